"""Instructions and few-shot examples for the HotpotQA agents and their Reflector.

Written for this project. The examples use questions from hotpotqa-dev-first100 (dev-0000,
dev-0005, dev-0007, dev-0008), never from the evaluation file hotpotqa-hard100.
"""

COT_SYSTEM = (
    "You answer questions by reasoning step by step. Reply with exactly two lines:\n"
    "Thought: <your reasoning>\n"
    "Action: Finish[<answer>]\n"
    "The answer inside Finish[...] must be short: a name, a number, a date, or yes/no."
)

COT_CONTEXT_EXAMPLES = """\
Context:
2014 S/S: 2014 S/S is the debut album of South Korean group WINNER. It was released on August 12, 2014 by the group's record label, YG Entertainment.
Winner (band): Winner, often stylized as WINNER, is a South Korean boy group formed in 2013 by YG Entertainment and debuted in 2014.
Question: 2014 S/S is the debut album of a South Korean boy group that was formed by who?
Thought: 2014 S/S is the debut album of WINNER. The paragraph on WINNER says the group was formed in 2013 by YG Entertainment. So the group was formed by YG Entertainment.
Action: Finish[YG Entertainment]

Context:
Scott Derrickson: Scott Derrickson (born July 16, 1966) is an American director, screenwriter and producer.
Ed Wood: Edward Davis Wood Jr. (October 10, 1924 - December 10, 1978) was an American filmmaker, actor, writer, producer, and director.
Question: Were Scott Derrickson and Ed Wood of the same nationality?
Thought: Scott Derrickson is described as American, and Ed Wood is also described as American. Both are American, so they share a nationality.
Action: Finish[yes]"""

COT_NO_CONTEXT_EXAMPLES = """\
Question: Were Scott Derrickson and Ed Wood of the same nationality?
Thought: Scott Derrickson is an American film director. Ed Wood was an American filmmaker. Both are American.
Action: Finish[yes]

Question: Who is older, Annie Morton or Terry Richardson?
Thought: Annie Morton, the American model, was born in 1970. Terry Richardson, the photographer, was born in 1965. 1965 is earlier than 1970, so Terry Richardson is older.
Action: Finish[Terry Richardson]"""

REACT_SYSTEM = (
    "You answer questions by interleaving Thought, Action and Observation steps. "
    "Each of your turns is exactly two lines:\n"
    "Thought: <reasoning about what you know and what to do next>\n"
    "Action: <one action>\n"
    "The actions are:\n"
    "Search[entity] looks up a page by its title and shows its first sentences, or suggests similar titles.\n"
    "Lookup[keyword] shows the next sentence containing keyword on the page you last searched.\n"
    "Finish[answer] gives the final answer (short: a name, a number, a date, or yes/no) and ends the task.\n"
    "After each action you will receive an Observation. Do not write Observations yourself."
)

REACT_EXAMPLES = """\
Question: The arena where the Lewiston Maineiacs played their home games can seat how many people?
Thought: I need to find where the Lewiston Maineiacs played their home games, then how many seats that arena has.
Action: Search[Lewiston Maineiacs]
Observation: The Lewiston Maineiacs were a junior ice hockey team of the Quebec Major Junior Hockey League based in Lewiston, Maine. The team played its home games at the Androscoggin Bank Colisée.
Thought: Their home arena was the Androscoggin Bank Colisée. I need its seating capacity.
Action: Search[Androscoggin Bank Colisée]
Observation: The Androscoggin Bank Colisée (formerly Central Maine Civic Center and Lewiston Colisee) is a 4,000 capacity (3,677 seated) multi-purpose arena, in Lewiston, Maine, that opened in 1958.
Thought: The arena holds 4,000 people, of whom 3,677 can be seated. The question asks how many it can seat.
Action: Finish[3,677 seated]

Question: Who is older, Annie Morton or Terry Richardson?
Thought: I need the birth dates of both people and then compare them.
Action: Search[Annie Morton]
Observation: Annie Morton (born October 8, 1970) is an American model born in Pennsylvania.
Thought: Annie Morton was born on October 8, 1970. Now Terry Richardson.
Action: Search[Terry Richardson]
Observation: Terrence "Uncle Terry" Richardson (born August 14, 1965) is an American fashion and portrait photographer.
Thought: Terry Richardson was born in 1965, five years before Annie Morton, so he is older.
Action: Finish[Terry Richardson]"""

REFLECTION_EXAMPLES = """\
Failed attempt:
Question: The arena where the Lewiston Maineiacs played their home games can seat how many people?
Thought: The Lewiston Maineiacs played in Lewiston, Maine. I will look up Lewiston.
Action: Search[Lewiston, Maine]
Observation: Could not find [Lewiston, Maine]. Similar: ['Lewiston Maineiacs', 'Androscoggin Bank Colisée'].
Thought: I could not find it, so I will guess.
Action: Finish[4,000]
Reflection: I searched for the city instead of the team, then guessed the total capacity instead of the seated capacity. Next time I will search the team page first to find the arena's name, search the arena, and answer with the number of seats the page gives for seating.

Failed attempt:
Question: Were Scott Derrickson and Ed Wood of the same nationality?
Thought: Scott Derrickson is a director and Ed Wood is a filmmaker, they are different people.
Action: Finish[no]
Reflection: I compared their jobs instead of their nationalities. Both are described as American, so the answer was yes. Next time I will find the nationality of each person explicitly before comparing."""

# The Reflector's examples for the CoT agents: attempts of the same shape as theirs (the context,
# or none, then one Thought and a Finish), no searches. A real model copies the example it is
# shown, so a search story here became a search plan in a loop that has no search.
COT_CONTEXT_REFLECTION_EXAMPLES = """\
Failed attempt:
Context:
2014 S/S: 2014 S/S is the debut album of South Korean group WINNER. It was released on August 12, 2014 by the group's record label, YG Entertainment.
Winner (band): Winner, often stylized as WINNER, is a South Korean boy group formed in 2013 by YG Entertainment and debuted in 2014.
Question: 2014 S/S is the debut album of a South Korean boy group that was formed by who?
Thought: 2014 S/S is the debut album of WINNER, a South Korean boy group. The group is from South Korea.
Action: Finish[South Korea]
Reflection: The question asks who formed the group, and I answered where it is from. The second paragraph says WINNER was formed in 2013 by YG Entertainment. Next time I will find the sentence that answers exactly what is asked (here: formed by whom) and answer with that name.

Failed attempt:
Context:
Scott Derrickson: Scott Derrickson (born July 16, 1966) is an American director, screenwriter and producer.
Ed Wood: Edward Davis Wood Jr. (October 10, 1924 - December 10, 1978) was an American filmmaker, actor, writer, producer, and director.
Question: Were Scott Derrickson and Ed Wood of the same nationality?
Thought: Scott Derrickson is a director and Ed Wood was a filmmaker and actor, so they are different.
Action: Finish[no]
Reflection: I compared their jobs, but the question is about nationality. The context calls both of them American. Next time I will read the attribute the question names for each person and answer yes or no from those two values."""

COT_REFLECTION_EXAMPLES = """\
Failed attempt:
Question: Who is older, Annie Morton or Terry Richardson?
Thought: Annie Morton is a model and Terry Richardson is a photographer. Photographers are usually older.
Action: Finish[Annie Morton]
Reflection: I guessed from their jobs instead of recalling their birth years, and then named the wrong person. Annie Morton was born in 1970 and Terry Richardson in 1965, so Terry Richardson is older. Next time I will write down both birth years before comparing them and answer with the name of the one born earlier.

Failed attempt:
Question: Were Scott Derrickson and Ed Wood of the same nationality?
Thought: Scott Derrickson directed horror films and Ed Wood made low-budget films, so they are not the same.
Action: Finish[no]
Reflection: I compared the kinds of films they made, but the question asks about nationality. Both are American filmmakers. Next time I will recall the nationality of each person and compare only that."""
