"""The action parser accepts chat-model habits and rejects what is not an action."""

import pytest

from reinagent.agents.parsing import parse_call, parse_output

NAMES = ("search", "lookup", "finish")


@pytest.mark.parametrize(
    "text, name, argument",
    [
        ("Thought: x\nAction: Search[Ed Wood]", "search", "Ed Wood"),
        ("**Thought:** x\n**Action:** Finish[yes]", "finish", "yes"),
        ("Thought 3: hm\nAction 3: Lookup[born]\nObservation 3: made up", "lookup", "born"),
        ("action: FINISH[ Greenwich Village, New York City ]", "finish", "Greenwich Village, New York City"),
        ('Action: Finish["Terry Richardson"]', "finish", "Terry Richardson"),
        ("Action: finish (YG Entertainment)", "finish", "YG Entertainment"),
        ("Sure! Here is my answer.\nFinish[Paris]\nHope this helps.", "finish", "Paris"),
        ("Thought: one\nAction: `Search[Animorphs]`", "search", "Animorphs"),
        ("Action: Search[Winner (band)]", "search", "Winner (band)"),
        ("Thought: a\nAction: Finish[3,677 seated] and then Search[x]", "finish", "3,677 seated"),
    ],
)
def test_tolerant_parsing(text, name, argument):
    _thought, action = parse_output(text, NAMES)
    assert action is not None
    assert (action.name, action.argument) == (name, argument)


@pytest.mark.parametrize(
    "text",
    ["I think the answer is Paris.", "Action: Jump[high]", "Action: Finish[unclosed", "", "Thought: only thinking"],
)
def test_unparseable_is_none(text):
    assert parse_output(text, NAMES)[1] is None


def test_thought_is_kept():
    thought, action = parse_output("Thought: The team played at the Colisee.\nAction: Search[Colisee]", NAMES)
    assert thought == "The team played at the Colisee."
    assert str(action) == "Search[Colisee]"


def test_an_action_outside_the_valid_names_is_not_parsed():
    assert parse_call("Search[x]", ("finish",)) is None
