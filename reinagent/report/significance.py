"""Is a difference in solved tasks more than chance? Exact McNemar and two-proportion tests.

Two questions a Reflexion report must answer honestly:

* within one run, did the later trials solve tasks trial 1 did not? The same tasks are compared
  with themselves, so the test is paired: McNemar's, exact (binomial on the discordant tasks,
  which at these sizes, often under 25 discordant tasks, is the only version that holds). With
  cumulative success no task is ever *lost*, so the test only asks whether the gain could be
  luck; under NONE it measures what retrying alone buys (pass@k), which is why the second
  question matters more:
* after a failed first trial, how often does the second trial succeed? The share of trial-1
  failures solved at trial 2, with its Wilson interval, is what a Reflexion strategy is for; and
  between two runs (REFLEXION against NONE), McNemar over the tasks *both* failed at trial 1, so
  that each task's retry is compared with the other run's retry of the same failure. The
  comparison is fair when both runs made the same first attempts (`--first-trial-temperature 0`
  with `--deterministic`, or a shared cache: docs/reports.md);
* between two runs on the same tasks (REFLEXION against NONE, say), is the last trial's
  cumulative success different? Paired McNemar again when both runs attempted the same task ids,
  and the unpaired two-proportion z-test beside it for readers used to it.

Pure Python (math only), like the rest of the summary path.
"""

from __future__ import annotations

import math
from typing import Any

ALPHA = 0.05


def mcnemar_exact(gained: int, lost: int) -> float:
    """Two-sided exact McNemar p-value: under no effect each discordant task is a fair coin."""
    if gained < 0 or lost < 0:
        raise ValueError(f"counts must be >= 0, got gained={gained}, lost={lost}")
    n = gained + lost
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(gained, lost) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def two_proportion(s1: int, n1: int, s2: int, n2: int) -> tuple[float, float]:
    """Pooled two-proportion z-test: (z, two-sided p). z is 0 and p 1 when nothing varies."""
    if n1 <= 0 or n2 <= 0:
        return 0.0, 1.0
    pooled = (s1 + s2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0:
        return 0.0, 1.0
    z = (s2 / n2 - s1 / n1) / se
    return z, math.erfc(abs(z) / math.sqrt(2))


def unattempted(s: dict[str, Any]) -> int:
    """Tasks of a partial run that some trial has not reached yet: a test would count them as
    failures that never happened, so a run with any is not tested (n/a, partial run)."""
    if s.get("training_steps"):
        return 0
    return max((t.get("not_attempted", 0) for t in s.get("trials", [])), default=0)


def first_vs_last(s: dict[str, Any]) -> dict[str, Any] | None:
    """Trial 1 against the last trial's cumulative success of one run (paired by task)."""
    solved = s.get("solved_tasks")
    if not solved or s.get("num_trials", 0) < 2 or s.get("training_steps"):  # RL steps sample other tasks
        return None
    if unattempted(s):
        return None
    first, last = set(solved["first_trial"]), set(solved["by_last_trial"])
    gained, lost = len(last - first), len(first - last)
    return {"first": len(first), "last": len(last), "gained": gained, "lost": lost,
            "p_mcnemar": mcnemar_exact(gained, lost)}


def first_program_vs_pass_at_1(s: dict[str, Any]) -> dict[str, Any] | None:
    """A programming run's pass@1 against the single attempt of its own first programs, paired by
    task (McNemar); None until every task's first program has a verdict (reinagent.first_programs)."""
    solved = s.get("solved_tasks") or {}
    if "first_program" not in solved or s.get("first_programs_judged") != s.get("num_tasks") or unattempted(s):
        return None
    single, final = set(solved["first_program"]), set(solved["by_last_trial"])
    gained, lost = len(final - single), len(single - final)
    return {"single": len(single), "final": len(final), "gained": gained, "lost": lost,
            "p_mcnemar": mcnemar_exact(gained, lost)}


def first_program_line(s: dict[str, Any]) -> str | None:
    """'single attempt (the first programs, judged after the loop) 120 -> pass@1 131 of 164 ...'."""
    f = s.get("first_program_vs_pass_at_1")
    if not f:
        return None
    n = s["num_tasks"]
    return (f"single attempt (each task's first program, judged by the hidden tests after the loop) "
            f"{f['single']}/{n} ({f['single'] / n:.1%}) -> pass@1 {f['final']}/{n} ({f['final'] / n:.1%}) "
            f"(+{f['gained']}, -{f['lost']}), McNemar exact {verdict(f['p_mcnemar'])}")


def between_runs(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """`other` against `base` at the last trial: McNemar when they share their tasks, and z."""
    a, b = set(base["solved_tasks"]["by_last_trial"]), set(other["solved_tasks"]["by_last_trial"])
    n1, n2 = base["num_tasks"], other["num_tasks"]
    z, p_z = two_proportion(len(a), n1, len(b), n2)
    row: dict[str, Any] = {"base": len(a), "other": len(b), "n_base": n1, "n_other": n2, "z": z, "p_z": p_z,
                           "p_mcnemar": None, "gained": None, "lost": None}
    if base.get("task_ids") == other.get("task_ids"):
        row.update(gained=len(b - a), lost=len(a - b), p_mcnemar=mcnemar_exact(len(b - a), len(a - b)))
    return row


def baseline_of(s: dict[str, Any], summaries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The NONE run of the same benchmark, agent, rollout and tasks, when the report has one."""
    if s.get("strategy") == "none":
        return None
    for other in summaries:
        if (other is not s and other.get("strategy") == "none" and other.get("solved_tasks")
                and all(other.get(k) == s.get(k) for k in ("benchmark", "agent", "rollout", "num_tasks"))):
            return other
    return None


def verdict(p: float | None) -> str:
    if p is None:
        return "n/a"
    return f"p={p:.3g} " + ("(significant at 5%)" if p < ALPHA else "(not significant)")


def first_vs_last_line(s: dict[str, Any]) -> str | None:
    """'trial 1 -> trial 3: 12 -> 19 of 100 tasks (+7, -0), McNemar exact p=0.0156 (significant at 5%)'."""
    f = first_vs_last(s)
    if f is None:
        if (missing := unattempted(s)) and s.get("num_trials", 0) >= 2:
            return (f"trial 1 -> trial {s['num_trials']}: not tested, a partial run ({missing} of "
                    f"{s['num_tasks']} tasks have not been attempted in every trial yet)")
        return None
    return (f"trial 1 -> trial {s['num_trials']}: {f['first']} -> {f['last']} of {s['num_tasks']} tasks solved "
            f"(+{f['gained']}, -{f['lost']}), McNemar exact {verdict(f['p_mcnemar'])}" + _retried_right(s, f))


def _retried_right(s: dict[str, Any], f: dict[str, Any]) -> str:
    """What trial 1's count leaves out under --evaluator internal: a right first program that
    failed its own (wrong) tests was retried, so trial 1 does not count it, and the gain from
    trial 1 read as the method's while pass@1 was below the single attempt ("6 -> 8 (+2)" beside
    "single attempt 9 -> 8", issue 54). '' when the single attempt is trial 1's count."""
    single = s.get("first_program_vs_pass_at_1")
    if not single or single["single"] == f["first"]:
        return ""
    retried = len(set(s["solved_tasks"]["first_program"]) - set(s["solved_tasks"]["first_trial"]))
    return (f"; trial 1 leaves out {retried} first program(s) that pass the hidden tests but failed their own "
            f"tests and were retried: against the single attempt it is {single['single']} -> {single['final']} "
            f"(+{single['gained']}, -{single['lost']})")


def significance_table(summaries: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """One row per run: its own trial-1 vs last-trial test, and its last trial against the NONE
    run of the same benchmark, agent and tasks when the report holds one."""
    from reinagent.report.labels import unique_labels

    header = ["run", "trial 1 -> last trial (paired)", "vs NONE at the last trial", "McNemar (same tasks)",
              "two-proportion z"]
    # programming runs judged after the loop: their single attempt beside trial 1, which counts only
    # the loops that ended at trial 1 (a right first program its own tests failed is not in it)
    singles = any(s.get("first_program_vs_pass_at_1") for s in summaries)
    if singles:
        header.insert(2, "single attempt -> pass@1 (paired)")
    rows = []
    for label, s in zip(unique_labels(summaries), summaries):
        f = first_vs_last(s)
        own = "n/a" if f is None else f"{f['first']} -> {f['last']}/{s['num_tasks']}: {verdict(f['p_mcnemar'])}"
        if unattempted(s):
            own = f"n/a (partial run: {unattempted(s)} tasks not attempted)"
        own = [own, _single_cell(s)] if singles else [own]
        base = baseline_of(s, summaries) if s.get("solved_tasks") else None
        if base is None:
            rows.append([label, *own, "n/a", "n/a", "n/a"])
            continue
        if unattempted(s) or unattempted(base):
            rows.append([label, *own, "-", "n/a (partial run)", "n/a (partial run)"])
            continue
        b = between_runs(base, s)
        mcnemar = "tasks differ" if b["p_mcnemar"] is None else f"+{b['gained']} -{b['lost']}: {verdict(b['p_mcnemar'])}"
        rows.append([label, *own, f"{b['other']}/{b['n_other']} vs {b['base']}/{b['n_base']}", mcnemar,
                     f"z={b['z']:.2f}, {verdict(b['p_z'])}"])
    return header, rows


def _single_cell(s: dict[str, Any]) -> str:
    g = s.get("first_program_vs_pass_at_1")
    if not g:
        return "n/a"
    return f"{g['single']} -> {g['final']}/{s['num_tasks']} (+{g['gained']} -{g['lost']}): {verdict(g['p_mcnemar'])}"


def retry_after_failure(s: dict[str, Any]) -> dict[str, Any] | None:
    """The share of trial-1 failures (judged, no error) solved at trial 2, with its 95% Wilson
    interval; None for a run of one trial or RL training rollouts."""
    solved = s.get("solved_tasks") or {}
    if s.get("num_trials", 0) < 2 or s.get("training_steps") or "failed_first_trial" not in solved:
        return None
    failed = set(solved["failed_first_trial"])
    retried = failed & set(solved["second_trial"])
    from reinagent.report.stats import wilson_interval

    low, high = wilson_interval(len(retried), len(failed))
    return {"failed_first": len(failed), "solved_second": len(retried),
            "rate": len(retried) / len(failed) if failed else None, "ci": [low, high]}


def retry_line(s: dict[str, Any]) -> str | None:
    """'trial-1 failures solved at trial 2: 3/95 3.2% [1.1, 8.9]' (95% Wilson interval)."""
    r = s.get("retry_after_failure") or retry_after_failure(s)
    if r is None:
        return None
    from reinagent.report.stats import format_rate

    return f"trial-1 failures solved at trial 2: {format_rate(r['solved_second'], r['failed_first'])} (95% Wilson interval)"


def retry_between(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any] | None:
    """Trial 2 of `other` against trial 2 of `base` over the tasks both failed at trial 1: exact
    McNemar (gained: tasks only `other`'s retry solved). None unless both have 2+ trials over the
    same tasks."""
    if retry_after_failure(base) is None or retry_after_failure(other) is None:
        return None
    if base.get("task_ids") != other.get("task_ids"):
        return None
    a, b = base["solved_tasks"], other["solved_tasks"]
    both = set(a["failed_first_trial"]) & set(b["failed_first_trial"])
    sa, sb = set(a["second_trial"]) & both, set(b["second_trial"]) & both
    gained, lost = len(sb - sa), len(sa - sb)
    return {"both_failed": len(both), "base_solved": len(sa), "other_solved": len(sb), "gained": gained,
            "lost": lost, "p_mcnemar": mcnemar_exact(gained, lost)}


def retry_comparisons(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each run against the NONE run of the same benchmark, agent, rollout and tasks (as the
    significance table pairs them); with exactly two runs and no such pair, the two. Labelled."""
    from reinagent.report.labels import unique_labels

    labels = unique_labels(summaries)
    index = {id(s): i for i, s in enumerate(summaries)}
    pairs = [(base, s) for s in summaries if (base := baseline_of(s, summaries)) is not None]
    if not pairs and len(summaries) == 2:
        pairs = [(summaries[0], summaries[1])]
    rows = []
    for base, other in pairs:
        r = retry_between(base, other)
        if r is not None:
            rows.append({"base": labels[index[id(base)]], "other": labels[index[id(other)]], **r})
    return rows


def retry_table(summaries: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Each run's retry success after a trial-1 failure, then each comparable pair's McNemar."""
    from reinagent.report.labels import unique_labels
    from reinagent.report.stats import format_rate

    header = ["run / pair", "trial-1 failures", "solved at trial 2 [95% CI]", "McNemar (tasks both failed)"]
    rows = []
    for label, s in zip(unique_labels(summaries), summaries):
        r = retry_after_failure(s)
        if r is not None:
            rows.append([label, str(r["failed_first"]), format_rate(r["solved_second"], r["failed_first"]), ""])
    for c in retry_comparisons(summaries):
        rows.append([f"{c['other']} vs {c['base']}", f"{c['both_failed']} both",
                     f"{c['other_solved']} vs {c['base_solved']} of {c['both_failed']}",
                     f"+{c['gained']} -{c['lost']}: {verdict(c['p_mcnemar'])}"])
    return header, rows
