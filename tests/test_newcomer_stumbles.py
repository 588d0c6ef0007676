"""Issue 45's "newcomer's stumbles": what a new user met on a fresh clone, each as it happened."""

from __future__ import annotations

import re

from reinagent.config import RunConfig
from tests.conftest import run_cli


def test_run_help_shows_the_default_strategy():
    """Was: `--strategy` listed the four values without saying which one a run gets."""
    text = " ".join(run_cli("run", "--help").stdout.split())
    default = RunConfig.model_fields["strategy"].default.value
    assert re.search(rf"--strategy TEXT none, last_attempt, reflexion or last_attempt_and_reflexion \(default {default}\)",
                     text), text[:300]


def test_trials_the_hidden_tests_never_judged_say_so(tmp_path, script):
    """Under --evaluator internal a program that fails its own (wrong) test is not shown to the
    hidden tests while trials are left. Was: those trials read "solved 0, pass rate 0.000" in
    the report, as if the hidden tests had failed them."""
    from tests.test_evaluator import IMPLEMENT, REFLECT, RIGHT, TESTS_PROMPT, WRONG_TEST

    model = script([{"when": REFLECT, "reply": "Reflection: my test may be wrong."},
                    {"when": TESTS_PROMPT, "reply": WRONG_TEST}, {"when": IMPLEMENT, "reply": RIGHT}], default="no")
    run_dir = tmp_path / "run"
    done = run_cli("run", "--benchmark", "humaneval", "--agent", "coder", "--num-envs", "1", "--num-trials", "3",
                   "--model", model, "--run-dir", str(run_dir), "--no-cache", "--quiet")
    assert done.returncode == 0, done.stderr
    md = run_cli("report", str(run_dir)).stdout
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in md.splitlines() if re.match(r"\| [123] \|", line)}
    assert rows["1"][2] == "not judged" and rows["1"][5] == "not judged"
    assert rows["2"][2] == "not judged" and rows["2"][5] == "not judged"
    assert rows["3"][2] == "1" and rows["3"][5] == "1.000"  # the last trial is judged: the right program passes
