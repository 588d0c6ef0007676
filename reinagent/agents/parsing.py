"""Tolerant parsing of `Thought: ...` / `Action: Name[argument]` model outputs.

Chat models decorate the paper's format: markdown (`**Action:**`), numbering (`Action 2:`),
different case, quotes around arguments, round brackets, trailing chatter. All of that is accepted;
anything else is reported as invalid so the agent can show an "Invalid action" observation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Every parse is linear in the reply (issue 45): a regex that starts with a run of decoration
# (`[*_#>\s`]*action`) or puts two quantifiers over the same characters side by side is retried at
# every position of a long run of them (50 KB of `*`: 15 s). So a label is found by its word, and
# the decoration before it is walked over by hand; possessive quantifiers (`*+`) never give back.
_LABEL = r"{name}(?:\s*+\d++)?[*_\s`]*+[:：][*_\s`]*+"
_THOUGHT = re.compile(_LABEL.format(name="thought"), re.I)
_ACTION = re.compile(_LABEL.format(name="action"), re.I)
_DECORATION = "*_#>`"  # what may come before a label, with whitespace (`**Action:**`, `> Thought:`)
_NAME = re.compile(r"[A-Za-z][A-Za-z ]*+")
_OPENERS = re.compile(r"[\[(]")
_CLOSE = {"[": "]", "(": ")"}


@dataclass(frozen=True)
class ParsedAction:
    name: str  # lower case, e.g. "search"
    argument: str  # quotes around it removed, straight or curly (`Search["Ed Wood"]` finds Ed Wood)
    # the argument as written, only whitespace trimmed: what an answer is judged on (HotpotQA's
    # official EM scores `“X”` wrong, so a Finish argument must keep its curly quotes)
    given: str = field(default="", compare=False)

    def __str__(self) -> str:
        # as given: the env re-parses it (a Search drops the quotes, a Finish is judged as written)
        return f"{self.name.capitalize()}[{self.given or self.argument}]"


def _label_start(text: str, at: int) -> int:
    """Where the label found at `at` starts, its decoration (`**`, `> `, spaces) included."""
    while at > 0 and (text[at - 1] in _DECORATION or text[at - 1].isspace()):
        at -= 1
    return at


def split_thought_action(text: str) -> tuple[str | None, str | None]:
    """(thought, action text) from one model output; either may be missing."""
    text = text.strip()
    action_match = _ACTION.search(text)
    action_start = _label_start(text, action_match.start()) if action_match else -1
    thought_match = _THOUGHT.search(text)
    thought = None
    if thought_match:
        end = action_start if action_match and action_start > thought_match.end() else len(text)
        thought = text[thought_match.end() : end].strip() or None
    if action_match:
        action = text[action_match.end() :].strip()
        return thought, (action.splitlines()[0].strip() if action else None)
    # No "Action:" label: a bare call on its own line (e.g. "Finish[yes]") still counts.
    for line in text.splitlines():
        if _split_call(line.strip().strip("*`")) and parse_call(line):
            return thought, line.strip()
    if thought is None and text:
        thought = text
    return thought, None


def _split_call(action: str) -> tuple[str, str, str] | None:
    r"""(name, opener, the rest after it) of `Name[...` or `Name(...`, as the pattern
    `^\s*[`*_]*\s*([A-Za-z][A-Za-z ]*?)\s*([[(])(.*)$` reads it, in one pass: the opener is the
    first bracket, and what comes before it must be decoration, then a name, then whitespace."""
    found = _OPENERS.search(action)
    if found is None:
        return None
    head = action[: found.start()].lstrip().lstrip("`*_").lstrip().rstrip()
    if not _NAME.fullmatch(head):
        return None
    return head, found.group(), action[found.end():]


def parse_call(action: str | None, names: tuple[str, ...] | None = None) -> ParsedAction | None:
    """`Search[Ed Wood]` -> ParsedAction('search', 'Ed Wood'); None when it is not a call."""
    if not action:
        return None
    call = _split_call(action.strip())
    if call is None:
        return None
    name, opener, rest = call[0].strip().lower(), call[1], call[2]
    end = _matching_close(rest, opener, _CLOSE[opener])
    if end == -1:
        return None
    given = rest[:end].strip()
    argument = given.strip("\"'`“”‘’").strip()
    if names is not None and name not in names:
        return None
    return ParsedAction(name, argument, given)


def _matching_close(text: str, opener: str, closer: str) -> int:
    """Index of the bracket closing the call (nested pairs inside the argument are kept)."""
    depth = 1
    for i, ch in enumerate(text):
        if ch == opener:
            depth += 1
        elif ch == closer:
            depth -= 1
            if depth == 0:
                return i
    return -1


def parse_output(text: str, names: tuple[str, ...]) -> tuple[str | None, ParsedAction | None]:
    """Thought and a valid action (one of `names`) from a model output."""
    thought, action = split_thought_action(text)
    return thought, parse_call(action, names)


def clean_step_text(thought: str | None, action: ParsedAction | None, raw: str) -> str:
    """What goes back into the conversation as the assistant's turn: the step without chatter."""
    if action is None:
        return raw.strip()
    lines = [f"Thought: {thought}"] if thought else []
    lines.append(f"Action: {action}")
    return "\n".join(lines)
