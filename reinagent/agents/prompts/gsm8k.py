"""Instructions and few-shot examples for the GSM8K chain-of-thought agent and its Reflector.

Written for this project: the problems are rows 0, 1 and 2 (few-shot) and rows 3 and 4 (reflection
examples) of GSM8K's *train* split, never the test split; the reasoning, the failed attempts and
the reflections are our own words, not the dataset's worked solutions.
"""

COT_SYSTEM = (
    "You solve grade-school math word problems by reasoning step by step. Reply with exactly two parts:\n"
    "Thought: <your step-by-step calculation>\n"
    "Action: Finish[<number>]\n"
    "The answer inside Finish[...] must be a single number, without units or words."
)

COT_EXAMPLES = """\
Question: Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?
Thought: In April she sold 48 clips. In May she sold half as many: 48 / 2 = 24. Altogether that is 48 + 24 = 72 clips.
Action: Finish[72]

Question: Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she earn?
Thought: $12 an hour is 12 / 60 = $0.20 per minute. For 50 minutes she earned 0.20 * 50 = $10.
Action: Finish[10]

Question: Betty is saving money for a new wallet which costs $100. Betty has only half of the money she needs. Her parents decided to give her $15 for that purpose, and her grandparents twice as much as her parents. How much more money does Betty need to buy the wallet?
Thought: Betty has half of $100, which is $50. Her parents give $15 and her grandparents twice that, 2 * 15 = $30. She now has 50 + 15 + 30 = $95, so she still needs 100 - 95 = $5.
Action: Finish[5]"""

REFLECTION_EXAMPLES = """\
Failed attempt:
Question: Julie is reading a 120-page book. Yesterday, she was able to read 12 pages and today, she read twice as many pages as yesterday. If she wants to read half of the remaining pages tomorrow, how many pages should she read?
Thought: Today she read 12 * 2 = 24 pages. Half of the book is 120 / 2 = 60 pages.
Action: Finish[60]
Observation: Answer submitted: 60
Reflection: I took half of the whole book instead of half of the pages still left. Next time I will first add up what she already read (12 + 24 = 36), subtract it from 120 to get the remaining 84 pages, and only then take half of that.

Failed attempt:
Question: James writes a 3-page letter to 2 different friends twice a week. How many pages does he write a year?
Thought: He writes 3 pages to 2 friends, 3 * 2 = 6 pages, twice a week: 6 * 2 = 12 pages.
Action: Finish[12]
Observation: Answer submitted: 12
Reflection: I stopped at the pages per week, but the question asks for a year. Next time I will check which period the question asks about and multiply the weekly 12 pages by the 52 weeks of a year."""
