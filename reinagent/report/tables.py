"""The tables of a report as plain rows of text, shared by the markdown and HTML renderers so
that both formats always show the same numbers."""

from __future__ import annotations

import math
from typing import Any

from reinagent.reference import shown_value
from reinagent.report.stats import format_rate
from reinagent.report.labels import unique_labels

Table = tuple[list[str], list[list[str]]]  # header, rows

# A compared run with more of its calls answered from the response cache than this gets a warning:
# its tokens, cost and time are not what the experiment costs.
MOSTLY_CACHED = 0.5
MAX_ERRORS_SHOWN = 20  # a run with hundreds of errors needs the JSON, not a page of them


def metric_name(s: dict[str, Any]) -> str:
    return "mean F1" if s.get("metric") == "f1" else "pass rate"


def trial_table(s: dict[str, Any]) -> Table:
    """Per trial: attempts, solves, the cumulative success rate with its 95% Wilson interval, the
    benchmark's graded metric (mean F1, else pass rate of that trial's attempts), errors, time."""
    header = ["trial", "attempted", "solved", "cumulative solved", "success rate [95% CI]",
              metric_name(s), "errors", "wall time"]
    rows = []
    for t in s["trials"]:
        value = t.get("mean_f1") if s.get("metric") == "f1" else t.get("success_rate")
        training = bool(s.get("training_steps"))  # RL rollouts: each step samples its own tasks
        missing = 0 if training else t.get("not_attempted", 0)
        unjudged = t.get("not_judged") or 0  # --evaluator internal: attempts the hidden tests never ran on
        judged = t["attempted"] - unjudged
        if t["attempted"] and not judged:  # "solved 0, pass rate 0.000" read as a verdict; there was none
            solved, shown = "not judged", "not judged"
        else:
            solved, shown = str(t["solved"]), num(value) + (f" ({unjudged} not judged)" if unjudged else "")
        rows.append([
            str(t["trial"]), str(t["attempted"]), solved,
            "-" if training or t["attempted"] == 0 and missing else _so_far(t["solved_cumulative"], s["num_tasks"], missing),
            "-" if training or missing else f"{pct(t['success_rate_cumulative'])} [{pct(t['ci_low'], '')}, {pct(t['ci_high'], '')}]",
            shown, str(t.get("errors", 0)),
            "copied" if t["trial"] in ((s.get("copied") or {}).get("trials") or ()) else duration(t.get("wall_s", 0.0)),
        ])
    return header, rows


def _so_far(solved: int, n: int, missing: int) -> str:
    """'12/100', or for a trial some tasks have not reached yet '12/100 so far (40 not attempted)':
    a rate or an interval over tasks never attempted would be a measurement of nothing."""
    return f"{solved}/{n}" + (f" so far ({missing} not attempted)" if missing else "")


def usage_table(s: dict[str, Any]) -> Table:
    """Tokens and cost per model role (actor, reflector, a search's value judgements) and in
    total: paid (cache hits cost nothing) and what the same calls cost when first made ("if
    uncached"). The last column adds up each call's latency: calls overlap, so it exceeds the
    wall time by the concurrency (`concurrency_line` says it beside the wall time)."""
    header = ["role", "calls", "cache hits", "tokens paid (prompt+completion)", "tokens if uncached",
              "cost paid (USD)", "cost if uncached (USD)", "call latency, summed"]
    rows = []
    for name, u in [*s["usage"].get("by_role", {}).items(), ("total", s["usage"])]:
        full = u.get("if_uncached") or u
        rows.append([name, str(u["calls"]), str(u.get("cache_hits", 0)),
                     f"{u['prompt_tokens']}+{u['completion_tokens']}",
                     f"{full['prompt_tokens']}+{full['completion_tokens']}",
                     f"{u['cost_usd']:.4f}", f"{full['cost_usd']:.4f}", _summed(u.get("latency_s", 0.0))])
    return header, rows


def concurrency_line(s: dict[str, Any]) -> str:
    """Wall time beside the summed call latency, and what their ratio means: how many calls were
    in flight on average (a summed 1h24m beside a 4m49s wall time read as a bug)."""
    wall, latency = s.get("wall_s") or 0.0, s["usage"].get("latency_s", 0.0)
    copied = s.get("copied")
    line = (f"trial {_trials(copied['trials'])}: {copied['records']} records copied from {copied['from']} (the "
            "time, calls and tokens they took are that run's and not counted in this run's figures); " if copied else "")
    line += (f"wall time {duration(wall)} (first episode start to last end); model calls' latency summed "
             f"{_summed(latency)}")
    if wall > 0 and latency:
        line += f", so {latency / wall:.1f} calls were in flight on average"
    return line + f"; episodes {_summed(s.get('episode_s', 0.0))} summed"


def trial_time_line(s: dict[str, Any]) -> str | None:
    """How a trial's wall time is measured, when the trials' times add up to more than the run's
    (a newcomer read that as a bug): under the pipeline schedule a task starts its next trial as
    soon as its own ends, so trials overlap. None when they do not (the barrier schedule)."""
    copied = set((s.get("copied") or {}).get("trials") or ())
    summed = sum(t.get("wall_s") or 0.0 for t in s["trials"] if t["trial"] not in copied)
    wall = s.get("wall_s") or 0.0
    if not (summed > wall and math.isfinite(summed)) or s.get("training_steps"):
        return None
    return (f"a trial's wall time runs from its first episode's start to its last one's end; a task starts its "
            f"next trial as soon as its own ends (the pipeline schedule), so trials overlap and their times "
            f"add up to more than the run's ({duration(summed)} summed, {duration(wall)} for the run)")


def _trials(numbers: list[int]) -> str:
    return ", ".join(str(n) for n in numbers)


def _summed(seconds: float | None) -> str:
    """A summed time, or "-" where none was measured (None: RL token rollouts)."""
    return "-" if seconds is None else duration(seconds)


def run_warnings(summaries: list[dict[str, Any]]) -> list[str]:
    """Every warning a report gives about its runs: retries that repeat the first attempts, then
    runs mostly answered from the response cache."""
    out = []
    for label, s in zip(unique_labels(summaries), summaries):
        if repeat := s.get("retries_repeat"):
            cached = (f" (the response cache answered {repeat['cached']} of its retries' {repeat['calls']} actor "
                      "calls: the same request again)") if repeat["cached"] else ""
            out.append(f"{label}: {repeat['why']}{cached}")
        if empty := s.get("empty_reflections"):
            out.append(f"{label}: {empty} reflection(s) kept nothing: the Reflector's reply held no text of the "
                       "model's own (only an echo of the attempt or a copy of an example), so memory gained nothing "
                       "there; the replies are each record's reflection_raw")
    return out + cache_warnings(summaries)


def cache_warnings(summaries: list[dict[str, Any]]) -> list[str]:
    """One line per run mostly answered from the response cache."""
    labels = unique_labels(summaries)
    out = []
    for label, s in zip(labels, summaries):
        u = s["usage"]
        share = s.get("cache_share", u.get("cache_hits", 0) / u["calls"] if u.get("calls") else 0.0)
        if share > MOSTLY_CACHED:
            out.append(f"{label}: {u.get('cache_hits', 0)} of {u['calls']} calls ({100 * share:.0f}%) were answered "
                       "from the response cache, so its tokens paid, cost paid and wall time understate what "
                       "the run costs; compare the 'if uncached' rows (or rerun with --cache-scope run)")
    return out


def error_table(s: dict[str, Any]) -> Table:
    errors = s.get("errors") or []
    rows = [[e["task_id"], str(e["trial"]), cell(e["error"])] for e in errors[:MAX_ERRORS_SHOWN]]
    if len(errors) > MAX_ERRORS_SHOWN:
        rows.append(["...", "", f"{len(errors) - MAX_ERRORS_SHOWN} more (see --format json)"])
    return ["task", "trial", "error"], rows


JUDGED = {"internal": "own tests end the loop; hidden tests once (pass@1)",
          "hidden": "hidden tests every trial (oracle)"}


def comparison_table(summaries: list[dict[str, Any]]) -> Table:
    """One column per run (labelled agent/strategy/model), one row per quantity compared."""
    rows: list[list[str]] = [
        ["benchmark", *[str(s["benchmark"]) for s in summaries]],
        ["agent", *[str(s["agent"]) for s in summaries]],
        ["strategy", *[str(s["strategy"]) for s in summaries]],
        ["model", *[str(s["model"]) for s in summaries]],
        ["tasks", *[str(s["num_tasks"]) for s in summaries]],
        ["status", *[str(s["status"]) for s in summaries]],
    ]
    if any(s.get("evaluator") for s in summaries):  # programming: what the success below is
        rows.append(["judged by", *[JUDGED.get(s.get("evaluator") or "", "-") for s in summaries]])
    if any(s.get("first_program_vs_pass_at_1") for s in summaries):  # before trial 1: it counts every first program
        rows.append(["single attempt (first programs, hidden tests) [95% CI]", *[_single_cell(s) for s in summaries]])
    for t in range(1, max(len(s["trials"]) for s in summaries) + 1):
        rows.append([f"solved by trial {t} [95% CI]", *[_trial_cell(s, t) for s in summaries]])
    rows += [
        ["mean F1 / pass rate, last trial", *[num(_last_metric(s)) for s in summaries]],
        ["actor tokens paid (prompt+completion)", *[_tokens(s, "actor") for s in summaries]],
        ["actor tokens if uncached", *[_tokens(s, "actor", uncached=True) for s in summaries]],
        ["reflector tokens paid (prompt+completion)", *[_tokens(s, "reflector") for s in summaries]],
        ["reflector tokens if uncached", *[_tokens(s, "reflector", uncached=True) for s in summaries]],
        ["cost paid (USD)", *[f"{s['usage']['cost_usd']:.4f}" for s in summaries]],
        ["cost if uncached (USD)", *[f"{(s['usage'].get('if_uncached') or s['usage'])['cost_usd']:.4f}" for s in summaries]],
        ["calls answered from cache", *[_cache_cell(s) for s in summaries]],
        ["wall time", *[duration(s.get("wall_s", 0.0)) for s in summaries]],
        ["errors", *[str(s.get("num_errors", len(s.get("errors") or []))) for s in summaries]],
    ]
    return ["", *unique_labels(summaries)], rows


def _single_cell(s: dict[str, Any]) -> str:
    """Each task's first program judged by the hidden tests after the loop (report/significance.py)."""
    g = s.get("first_program_vs_pass_at_1")
    return format_rate(g["single"], s["num_tasks"]) if g else "-"


def _trial_cell(s: dict[str, Any], trial: int) -> str:
    if trial > len(s["trials"]):
        return ""  # this run planned fewer trials
    t = s["trials"][trial - 1]
    missing = 0 if s.get("training_steps") else t.get("not_attempted", 0)
    if missing and t["attempted"] == 0:
        return "-"  # not reached: no 0% with a tight interval beside finished runs
    if missing:
        return _so_far(t["solved_cumulative"], s["num_tasks"], missing)
    return format_rate(t["solved_cumulative"], s["num_tasks"])


def _last_metric(s: dict[str, Any]) -> float | None:
    attempted = [t for t in s["trials"] if t["attempted"]]
    if not attempted:
        return None
    last = attempted[-1]
    return last.get("mean_f1") if s.get("metric") == "f1" else last.get("success_rate")


def _tokens(s: dict[str, Any], role: str, uncached: bool = False) -> str:
    u = s["usage"].get("by_role", {}).get(role)
    if u and uncached:
        u = u.get("if_uncached") or u  # a summary from before if_uncached existed: paid = all
    return f"{u['prompt_tokens']}+{u['completion_tokens']}" if u else "0+0"


def _cache_cell(s: dict[str, Any]) -> str:
    u = s["usage"]
    calls, hits = u.get("calls", 0), u.get("cache_hits", 0)
    return f"{hits}/{calls} ({100 * hits / calls:.0f}%)" if calls else "0/0"


def pct(value: float | None, suffix: str = "%") -> str:
    return "" if value is None else f"{100 * value:.1f}{suffix}"


def num(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def duration(seconds: float | None) -> str:
    seconds = float(seconds or 0.0)
    if not math.isfinite(seconds):  # timestamps far apart (1e308 and -1e308) overflow to inf
        return "unknown"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def cell(text: object, limit: int = 160) -> str:
    """One table cell: a single line, short enough to keep the table readable."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def reference_line(s: dict[str, Any]) -> str:
    """The run's departures from the reference code's settings, in one line (every report says it)."""
    ref = s.get("reference") or {}
    preset = f"preset `{ref['preset']}`; " if ref.get("preset") else ""
    found = ref.get("departures")
    if found is None:
        return f"{preset}departures from the reference code: not applicable (it has no {s.get('benchmark')} run)"
    if not found:
        return f"{preset}departures from the reference code: none"
    listed = "; ".join(f"{d['setting']} = {shown_value(d['setting'], d['value'])} "
                       f"(reference {shown_value(d['setting'], d['reference'])})" for d in found)
    return f"{preset}departures from the reference code ({len(found)}): {listed}"
