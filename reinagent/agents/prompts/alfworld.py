"""Prompt text for ALFWorld: the actor's instructions, its demonstrations, the Reflector's examples.

The demonstrations are real episodes from valid_train games with short thoughts added, built by
scripts/build_alfworld_demos.py into reinagent/data/alfworld_demos/<kind>.txt (one per task type;
sources.json there names the games). All wording here is this project's own.
"""

from __future__ import annotations

from functools import lru_cache

from reinagent.paths import DATA_DIR

DEMO_DIR = DATA_DIR / "alfworld_demos"

SYSTEM = (
    "Interact with a household to solve a task. Each turn, reply with exactly one line: either one "
    "command for the environment, or a thought that starts with 'think:'. The environment answers a "
    "thought with 'OK.' and a command it cannot carry out with 'Nothing happens.'.\n"
    "Commands: go to <place>, open <place>, close <place>, take <object> from <place>, "
    "put <object> in/on <place>, clean <object> with <place>, heat <object> with <place>, "
    "cool <object> with <place>, use <object>, examine <thing>, look, inventory.\n"
    "Name objects and places with their numbers exactly as the environment does (e.g. 'cabinet 3')."
)

DEMO_INTRO = (
    "Here is an example. Lines that start with '>' are the agent's turns (write them without the "
    "'>'); the other lines are what the environment answered."
)


DEMOS_INTRO = DEMO_INTRO.replace("Here is an example.", "Here are two examples.")


@lru_cache(maxsize=None)
def demonstration(kind: str, number: int = 1) -> str:
    """A demonstration for a task type (put, clean, heat, cool, examine or puttwo): the first is
    <kind>.txt, the second (--alfworld-demos 2) <kind>-2.txt, from another valid_train game."""
    name = kind if number == 1 else f"{kind}-{number}"
    return (DEMO_DIR / f"{name}.txt").read_text(encoding="utf-8").strip()


def demonstrations(kind: str, count: int = 1) -> str:
    """The prompt's examples: one demonstration of the task's type, or two as the reference shows."""
    if count == 1:
        return f"{DEMO_INTRO}\n\n{demonstration(kind)}\n\n(END OF EXAMPLE)"
    shown = "\n\n".join(f"{demonstration(kind, n)}\n\n(END OF EXAMPLE)" for n in range(1, count + 1))
    return f"{DEMOS_INTRO}\n\n{shown}"


REFLECTION_EXAMPLES = """\
Failed attempt:
You are in the middle of a room. Looking quickly around you, you see a cabinet 4, a cabinet 3, a cabinet 2, a cabinet 1, a countertop 1, a garbagecan 1, a handtowelholder 1, a sinkbasin 2, a sinkbasin 1, a toilet 1, a toiletpaperhanger 1, and a towelholder 1.
Your task is to: put a clean soapbar in cabinet.
> think: I need to find a soapbar, then put it in a cabinet.
OK.
> go to countertop 1
On the countertop 1, you see a soapbar 2, and a spraybottle 1.
> take soapbar 2 from countertop 1
You pick up the soapbar 2 from the countertop 1.
> go to cabinet 1
The cabinet 1 is closed.
> put soapbar 2 in/on cabinet 1
Nothing happens.
> put soapbar 2 in/on cabinet 1
Nothing happens.
> put soapbar 2 in/on cabinet 1
Nothing happens.
STATUS: FAIL (stopped: the same action was repeated in a loop)
Reflection: The task asked for a clean soapbar, but my plan left out the cleaning, and I tried to put the soapbar into cabinet 1 while the cabinet was still closed. When "Nothing happens." came back I repeated the same command instead of asking why it failed. Next time I will take the soapbar, go to sinkbasin 1 and clean it with "clean soapbar 2 with sinkbasin 1", then go to a cabinet, open it first if it is closed, and only then put the soapbar in/on it.

Failed attempt:
You are in the middle of a room. Looking quickly around you, you see a bed 1, a desk 1, a drawer 2, a drawer 1, a garbagecan 1, a shelf 3, a shelf 2, a shelf 1, and a sidetable 1.
Your task is to: look at cd under the desklamp.
> think: First I need to find a cd. It may be on the desk, a shelf or in a drawer.
OK.
> go to desk 1
On the desk 1, you see a desklamp 1, a laptop 1, and a pen 2.
> go to shelf 1
On the shelf 1, you see a pencil 1.
> go to shelf 2
On the shelf 2, you see nothing.
> go to shelf 1
On the shelf 1, you see a pencil 1.
> go to shelf 2
On the shelf 2, you see nothing.
(... the same two shelves again until the step budget ran out ...)
STATUS: FAIL (ran out of steps)
Reflection: I went back and forth between shelf 1 and shelf 2, which I had already searched, and never opened drawer 1 or drawer 2 or checked shelf 3 and the sidetable, so I never found the cd. I also noticed the desklamp on desk 1 but did not note it for later. Next time I will search every place once, in order, opening closed drawers, without revisiting a place I have already seen; when I find the cd I will take it, go back to desk 1 and use desklamp 1."""


# --reflection-prompt plan (the reference's ALFWorld reflector): the same attempts, each ending in
# the plan the reflector writes after "New plan:".
PLAN_EXAMPLES = REFLECTION_EXAMPLES.replace("\nReflection: ", "\nNew plan: ")
