"""What a programming run's report shows beyond pass@1, as the Reflexion paper shows it: how often
a retry only copied the program before it, and how far the model's own tests can be trusted.

`retry_unchanged`: of the retries (trial >= 2, the task's previous trial judged), how many wrote an
implementation byte-identical to the previous one. A copied wrong program cannot pass: a retry
loop whose retries copy is no loop (issue 52 found REFLEXION copying 19 of 45 HumanEval retries).

`own_tests`: the first programs' own-test verdicts (the trial-1 record's `internal_passed`) against
the hidden verdicts on the same programs (first_programs.json, judged after the loop): a false
positive passes its own tests and fails the hidden ones (the loop stops on a wrong program: the
paper's "false positive" rate, 1.4% HumanEval and 16.3% MBPP for GPT-4); a false negative fails
its own tests and passes the hidden ones (a right program retried, and maybe broken).
"""

from __future__ import annotations

from typing import Any

from reinagent.records import TrialRecord


def implementation(record: TrialRecord) -> str | None:
    traj = record.trajectory
    code = traj.answer if traj.answer is not None else traj.extra.get("implementation")
    return None if code is None else str(code)


def retry_unchanged(records: list[TrialRecord]) -> dict[str, int]:
    """{"retried": N, "unchanged": K} over the retries of a programming run's records."""
    by_key = {(r.task_id, r.trial): r for r in records}
    retried = unchanged = 0
    for rec in records:
        before = by_key.get((rec.task_id, rec.trial - 1))
        if rec.trial < 2 or before is None or rec.error is not None or before.error is not None:
            continue
        now, then = implementation(rec), implementation(before)
        if now is None or then is None:
            continue
        retried += 1
        unchanged += now == then
    return {"retried": retried, "unchanged": unchanged}


def own_tests(records: list[TrialRecord], first_programs: dict[str, dict[str, Any]] | None) -> dict[str, Any] | None:
    """The first programs' own tests against the hidden tests; None without hidden verdicts on the
    first programs (a run of another benchmark, or one judged before first_programs.json)."""
    if not first_programs:
        return None
    firsts = {r.task_id: r for r in records if r.trial == 1 and r.error is None and r.internal_passed is not None}
    pairs = [(firsts[t].internal_passed, v["passed"]) for t, v in first_programs.items() if t in firsts]
    if not pairs:
        return None
    passed_own = sum(own for own, _ in pairs)
    false_positive = sum(own and not hidden for own, hidden in pairs)
    false_negative = sum(hidden and not own for own, hidden in pairs)
    return {"judged": len(pairs), "passed_own": passed_own, "failed_own": len(pairs) - passed_own,
            "false_positive": false_positive, "false_negative": false_negative,
            "false_positive_rate": false_positive / passed_own if passed_own else None,
            "false_negative_rate": false_negative / (len(pairs) - passed_own) if len(pairs) > passed_own else None}


def retry_unchanged_line(s: dict[str, Any]) -> str | None:
    r = s.get("retry_unchanged")
    if not r or not r["retried"]:
        return None
    return (f"retries unchanged: {r['unchanged']} of {r['retried']} retries ({r['unchanged'] / r['retried']:.0%}) "
            f"wrote the same implementation as the trial before, byte for byte")


def own_tests_line(s: dict[str, Any]) -> str | None:
    o = s.get("own_tests")
    if not o:
        return None

    def share(k: int, n: int) -> str:
        return f"{k}/{n} ({k / n:.0%})" if n else f"{k}/0"

    return (f"own tests on the first programs: false positives {share(o['false_positive'], o['passed_own'])} "
            f"of those passing their own tests failed the hidden tests; false negatives "
            f"{share(o['false_negative'], o['failed_own'])} of those failing their own tests passed the hidden tests "
            f"({o['judged']} first programs judged)")
