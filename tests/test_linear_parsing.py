"""Parsers and judges are linear in the reply (issue 45, item 2).

A regex with a leading run of decoration or two quantifiers over the same characters side by side
is retried at every position of a long run: `finish_text` took 32 s on 200 KB, `split_thought_action`
15 s on 50 KB of `*`, `parse_call` 13 s on `a` + 50,000 spaces + `b`, all holding the GIL. Each
pathological input here is 1 MB (a quadratic parser would need hours) and runs in a child with a
60 s limit; the answers are checked too. A differential test checks that the linear parsers read
short inputs exactly as the old patterns did."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import textwrap

from tests.conftest import ROOT
from tests.test_env_service import server_factory  # noqa: F401 - fixture

N = 1_000_000

CHILD = textwrap.dedent(f"""
    import json
    from reinagent.agents.alfworld_react import parse_move
    from reinagent.agents.parsing import parse_call, split_thought_action
    from reinagent.benchmarks import math_judge
    from reinagent.benchmarks.math_judge import finish_text
    from reinagent.benchmarks.math_text import without_restatements
    from reinagent.rl.envs import _SUM
    from reinagent.rollouts.value import parse_value
    from reinagent.service.remote import parse_reply

    N = {N}
    out = {{}}
    out["finish_open"] = finish_text("finish[" * (N // 7))
    out["finish_late"] = finish_text("x" * N + "Finish[ 42 ]")
    out["finish_first"] = finish_text("Finish[a]" + "finish[" * (N // 7))
    out["finish_spaces"] = finish_text("finish" + " " * N + "[b]")
    out["stars"] = split_thought_action("*" * N) == ("*" * N, None)
    out["a_spaces_b"] = split_thought_action("a" + " " * N + "b") == ("a" + " " * N + "b", None)
    out["call_spaces"] = parse_call("a" + " " * N + "b")
    out["call_far"] = str(parse_call("Search" + " " * N + "[x]"))
    out["labels"] = split_thought_action("Thought:" + " " * N + "x\\nAction: Finish[y]")
    out["action_spaces"] = split_thought_action("action" + " " * N)[1]
    out["value_blank"] = parse_value("\\n" * N)
    out["value_last"] = parse_value("\\n" * N + "7\\n")
    out["remote"] = parse_reply("\\n" * N + "Action: go")
    out["alfworld"] = str(parse_move("action" + " " * N + "x"))[:40]
    out["operation"] = bool(math_judge._OPERATION.search("1+" + " " * N + "x"))
    out["operand"] = bool(math_judge._OPERAND.search("1+" + " " * N + "x"))
    out["operator_after"] = bool(math_judge._OPERATOR_AFTER.match("+" + " " * N + "x"))
    out["sum"] = bool(_SUM.search("1" * N))
    out["restated"] = without_restatements(" " * N + "What is 9 + 9? 18", "What is 9 + 9?").strip()
    print(json.dumps(out))
""")


def test_pathological_replies_parse_in_linear_time():
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["finish_open"] is None and out["finish_late"] == "42" and out["finish_first"] == "a"
    assert out["finish_spaces"] == "b"
    assert out["stars"] and out["a_spaces_b"] and out["call_spaces"] is None
    assert out["call_far"] == "Search[x]"
    assert out["labels"] == ["x", "Finish[y]"] and out["action_spaces"] is None
    assert out["value_blank"] is None and out["value_last"] == 0.7
    assert out["remote"] == [None, "go"]
    assert not out["operation"] and not out["operand"] and not out["operator_after"] and not out["sum"]
    assert out["restated"] == "18"  # the question's words and operation removed, the answer kept


# The patterns as they were at 862ab4b: the linear parsers must read every input as these did.
_OLD_LABEL = r"[*_#>\s`]*{name}(?:\s*\d+)?[*_\s`]*[:：][*_\s`]*"
_OLD_THOUGHT = re.compile(_OLD_LABEL.format(name="thought"), re.I)
_OLD_ACTION = re.compile(_OLD_LABEL.format(name="action"), re.I)
_OLD_CALL = re.compile(r"^\s*[`*_]*\s*([A-Za-z][A-Za-z ]*?)\s*(\[|\()(.*)$", re.S)
_OLD_FINISH = re.compile(r"finish\s*\[(?P<arg>[^\]]*)\]", re.I)
_OLD_OPERATION = re.compile(r"[\d.)}]\s*(?:[-+*×÷^]|\\times|\\cdot|\\div)\s*[-(\\{]*\s*[\d.(\\{]")
_OLD_BARE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*10)?\s*\.?\s*$", re.M)
_OLD_REMOTE_ACTION = re.compile(r"^\s*action\s*\d*\s*[:：]\s*(.*)$", re.I | re.M)


def _old_split(text: str):
    from reinagent.agents.parsing import parse_call

    text = text.strip()
    action_match = next(iter(_OLD_ACTION.finditer(text)), None)
    thought_match = _OLD_THOUGHT.search(text)
    thought = None
    if thought_match:
        end = action_match.start() if action_match and action_match.start() > thought_match.end() else len(text)
        thought = text[thought_match.end():end].strip() or None
    if action_match:
        action = text[action_match.end():].strip()
        return thought, (action.splitlines()[0].strip() if action else None)
    for line in text.splitlines():
        if _OLD_CALL.match(line.strip().strip("*`")) and parse_call(line):
            return thought, line.strip()
    if thought is None and text:
        thought = text
    return thought, None


def _old_call_head(action: str):
    m = _OLD_CALL.match(action)
    return (m.group(1).strip().lower(), m.group(2), m.group(3)) if m else None


def test_the_linear_parsers_read_what_the_old_patterns_read():
    from reinagent.agents import parsing
    from reinagent.benchmarks import math_judge
    from reinagent.rollouts.value import _BARE, _SCORE
    from reinagent.service.remote import _ACTION as remote_action

    rng = random.Random(45)
    pieces = ["*", "_", "#", ">", "`", " ", "\t", "\n", "Thought", "thought", "Action", "action", " 2", ":", "：",
              "Search", "Finish", "finish", "[", "]", "(", ")", "a", "b", "1", "7", "/10", ".", "-", "+", "{", "\\"]
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        assert parsing.split_thought_action(text) == _old_split(text), repr(text)
        new = parsing._split_call(text)
        assert (None if new is None else (new[0].strip().lower(), new[1], new[2])) == _old_call_head(text), repr(text)
        found = list(_OLD_FINISH.finditer(text))
        assert math_judge.finish_text(text) == (found[-1].group("arg").strip() if found else None), repr(text)
        assert bool(math_judge._OPERATION.search(text)) == bool(_OLD_OPERATION.search(text)), repr(text)
        new_bare = [m.group(1) for line in text.splitlines() if (m := _BARE.fullmatch(line.strip()))]
        if not _SCORE.findall(text):
            assert new_bare[-1:] == _OLD_BARE.findall(text)[-1:], repr(text)
        old_remote, new_remote = _OLD_REMOTE_ACTION.search(text), remote_action.search(text)
        assert (old_remote and old_remote.group(1).strip()) == (new_remote and new_remote.group(1).strip()), repr(text)


def test_serve_env_answers_health_while_another_clients_long_steps_are_judged(server_factory):
    """One client steps five in-bounds 100,000-character actions that the old parser took ~50 s
    each over, holding the GIL; another polls /health meanwhile. Every poll is answered within its
    client deadline (20 s) and the five steps within theirs; each step's answer is checked."""
    import threading
    import time

    import httpx

    server = server_factory("--benchmark", "hotpotqa")
    task = server.http.get("/tasks").json()["tasks"][0]
    sid = server.post("/create", {"task_id": task, "options": {"agent": "react"}}).json()["id"]
    n = 100_000 - 10
    actions = ["a" + " " * n + "b", "*" * n, "Search" + " " * n + "[", "a " * (n // 2), "Thought:" + " " * n]
    answers: list = []

    def steps():
        with httpx.Client(base_url=server.url, timeout=300) as client:
            for action in actions:
                try:
                    answers.append(client.post("/step", json={"id": sid, "action": action}).json()["observation"])
                except httpx.HTTPError as err:
                    answers.append(err)

    stepper = threading.Thread(target=steps, daemon=True)
    stepper.start()
    polls = 0
    with httpx.Client(base_url=server.url, timeout=20) as health:
        end = time.monotonic() + 120  # a deadline for the five steps (the old parser: minutes)
        while True:  # at least one poll, then until the steps are all answered
            assert health.get("/health").json()["status"] == "ok"  # a ReadTimeout here: the server froze
            polls += 1
            if not stepper.is_alive():
                break
            assert time.monotonic() < end, f"the long steps were not all answered: {len(answers)} of {len(actions)}"
    stepper.join()
    assert len(answers) == len(actions)
    assert all(isinstance(a, str) and a.startswith("Invalid action") for a in answers), [str(a)[:80] for a in answers]
