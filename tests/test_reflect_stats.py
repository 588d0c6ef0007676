"""reinagent.rl.reflect_stats: what the reflections say and whether the retry follows them,
read from an evaluation run's records and from reflect training's rollouts."""

from __future__ import annotations

import json
from pathlib import Path

from reinagent.rl.reflect_stats import Retry, eval_retries, numbers, retry_use_line, training_line, training_retries


def _write(path: Path, rows: list[dict]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _trial(task: str, trial: int, ok: bool, gold: str, predicted: str, memory: list[str] | None = None) -> dict:
    return {"task_id": task, "trial": trial, "success": ok, "answer": predicted, "memory": memory or [],
            "evaluation": {"gold": gold, "predicted": predicted}, "error": None}


def test_numbers_are_normalised():
    assert numbers("I wrote 5.0, then -3 and 1,200; the answer is -0.") == {"5", "-3", "1200", "0"}


def test_the_three_properties():
    r = Retry(gold="-4", first="4", reflection="I subtracted the wrong way: 12 - 16 = -4.", answer="-4", success=True)
    assert r.states_gold and r.follows and not r.repeats
    r = Retry(gold="-4", first="4", reflection="I should be more careful.", answer="4", success=False)
    assert not r.states_gold and not r.follows and r.repeats
    # a bare 4 in the reflection is not the gold -4
    assert not Retry(gold="-4", first="4", reflection="it was 4", answer="4", success=False).states_gold
    assert not Retry(gold="4", first="3", reflection="it was 14", answer="14", success=False).states_gold  # numbers, not text
    assert Retry(gold="Paris", first="Rome", reflection="It is paris.", answer="", success=False).states_gold


def test_eval_run_pairs_trial_two_with_the_failed_trial_one(tmp_path):
    run = tmp_path / "run"
    _write(run, [
        _trial("t/a", 1, False, "7", "5"), _trial("t/a", 2, True, "7", "7", ["The answer is 7."]),
        _trial("t/b", 1, False, "-2", "2"), _trial("t/b", 2, False, "-2", "2", ["Be careful with signs."]),
        _trial("t/c", 1, True, "3", "3"),  # solved at once: no retry
        _trial("t/d", 1, False, "9", "8"), _trial("t/d", 2, False, "9", "1", ["I think 9 or 1."]),
    ])
    retries = eval_retries(run)
    assert [(r.gold, r.first, r.answer, r.success) for r in retries] == [("7", "5", "7", True), ("-2", "2", "2", False),
                                                                        ("9", "8", "1", False)]
    line = retry_use_line("x", retries)
    # 2 of 3 reflections state the answer; the retry solved 1 of those 2 and 0 of the other 1
    assert "states the right answer in 2/3 (66.7%)" in line
    assert "retry solved 1/2 (50.0%) of those, 0/1 (0.0%) of the rest" in line
    assert "retry answers a number of its reflection 2/2 (100.0%)" in line  # 7 and 1; b's reflection has none
    assert "repeats its failed answer 1/3 (33.3%)" in line


def test_training_rollouts_and_metrics(tmp_path):
    rollouts = tmp_path / "rollouts"
    _write(rollouts, [
        {"task_id": "train/1+1@first", "trial": 1, "success": False, "answer": "3", "evaluation": {"gold": "2"}},
        {"task_id": "train/1+1@0", "trial": 1, "success": True, "answer": "2", "memory": ["1 + 1 = 2"],
         "evaluation": {"gold": "2"}, "trajectory": {"extra": {"reflection": "1 + 1 = 2", "first_answer": "3"}}},
        {"task_id": "train/1+1@1", "trial": 1, "success": False, "answer": "3", "memory": ["oops"],
         "evaluation": {"gold": "2"}, "trajectory": {"extra": {"reflection": "oops", "first_answer": "3"}}},
    ])
    retries = training_retries(rollouts)
    assert [(r.states_gold, r.success, r.repeats) for r in retries] == [(True, True, False), (False, False, True)]
    metrics = tmp_path / "train_metrics.jsonl"
    rows = [{"step": s, "method": "reflect", "first_attempts": 6, "first_failures": 4, "pairs": 16,
             "retry_successes": k, "groups": 4, "zero_variance_groups": z} for s, k, z in ((1, 0, 4), (2, 1, 3), (3, 4, 1), (4, 6, 0))]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    line = training_line(metrics)
    assert "first attempts failed 16/24 (66.7%)" in line
    assert "steps 1-2: retry success 1/32 (3.1%), flat groups 7/8 (87.5%)" in line
    assert "steps 3-4: retry success 10/32 (31.2%), flat groups 1/8 (12.5%)" in line


def test_a_superseded_or_rewritten_trial_counts_once(tmp_path):
    """The live records, as reports read them: a trial appended again (a resume) counts once, and
    a trial a marker superseded not at all."""
    run = tmp_path / "run"
    _write(run, [
        _trial("t/a", 1, False, "7", "5"), _trial("t/a", 2, False, "7", "5", ["no idea"]),
        _trial("t/a", 2, True, "7", "7", ["The answer is 7."]),  # appended again: the last one counts
        _trial("t/b", 1, False, "3", "2"), _trial("t/b", 2, True, "3", "3", ["3"]),
    ])
    with (run / "records.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"kind": "supersede", "keys": [["t/b", 2]], "reason": "test"}) + "\n")
    assert [(r.answer, r.success) for r in eval_retries(run)] == [("7", True)]


def test_the_command_line_gives_one_line_errors(tmp_path, capsys):
    from reinagent.rl.reflect_stats import main

    assert main([]) == 2 and "usage:" in capsys.readouterr().err
    assert main([str(tmp_path / "missing")]) == 2
    bad = tmp_path / "demo" / "eval" / "base-reflexion"
    bad.mkdir(parents=True)
    (bad / "records.jsonl").write_text("{not json\n" + json.dumps(_trial("t/a", 1, False, "1", "2")) + "\n")
    capsys.readouterr()
    assert main([str(tmp_path / "demo")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: corrupt record file") and len(err.strip().splitlines()) == 1


def test_the_demo_comparison_command_gives_one_line_errors(tmp_path, capsys):
    from reinagent.rl.compare import main

    assert main([]) == 2 and "usage:" in capsys.readouterr().err
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "does not exist" in err and len(err.strip().splitlines()) == 1
