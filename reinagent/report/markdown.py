"""Markdown reports: one run in full, several runs side by side (one column per run)."""

from __future__ import annotations

import re
from typing import Any

from reinagent.terminal import plain

from reinagent.report.rollouts import rollout_table
from reinagent.report.programming import own_tests_line, retry_unchanged_line
from reinagent.report.significance import first_program_line, first_vs_last_line, retry_line, retry_table, significance_table
from reinagent.report.tables import (
    Table, comparison_table, concurrency_line, duration, error_table, reference_line, run_warnings, trial_table,
    trial_time_line, usage_table,
)


def report_markdown(summaries: list[dict[str, Any]]) -> str:
    """The whole markdown report: a comparison first when there are several runs."""
    parts = [comparison_markdown(summaries)] if len(summaries) > 1 else []
    parts += [run_markdown(s, level=2 if len(summaries) > 1 else 1) for s in summaries]
    return "\n".join(parts)


def comparison_markdown(summaries: list[dict[str, Any]]) -> str:
    """Only the side-by-side table: one column per run, labelled agent/strategy/model."""
    warnings = "".join(f"\n> **warning:** {_escape(w)}\n" for w in run_warnings(summaries))
    return (f"# Comparison of {runs_count(len(summaries))}\n\n{table_markdown(comparison_table(summaries))}\n{warnings}"
            f"\n## By rollout\n\n{table_markdown(rollout_table(summaries))}\n"
            f"\n## More than chance?\n\nExact McNemar tests pair each task with itself; the last trial counts "
            f"cumulative success.\n\n{table_markdown(significance_table(summaries))}\n" + _retry_section(summaries))


def runs_count(n: int) -> str:
    """'1 run', '2 runs' (a notebook compares the runs it finds: sometimes one)."""
    return f"{n} run" + ("" if n == 1 else "s")


def _retry_section(summaries: list[dict[str, Any]]) -> str:
    table = retry_table(summaries)
    if not table[1]:
        return ""
    return ("\n## Retry after a trial-1 failure\n\nThe share of trial-1 failures solved at trial 2 (95% Wilson "
            "interval); two runs over the same tasks are compared by exact McNemar on the tasks both failed at "
            f"trial 1.\n\n{table_markdown(table)}\n")


def where(s: dict[str, Any]) -> str:
    """Where the run lives: its run directory, or its store and run id."""
    if s.get("store"):
        return f"store {_code(s['store'])}, run id {_code(s.get('run_id'))}"
    return f"run directory {_code(s.get('run_dir'))}"


def _reference(s: dict[str, Any]) -> str:
    """reference_line with its values as text, the preset's name as code."""
    ref = s.get("reference") or {}
    line = reference_line({**s, "reference": {**ref, "preset": None}})
    return (f"preset {_code(ref['preset'])}; " if ref.get("preset") else "") + _escape(line)


def run_markdown(s: dict[str, Any], level: int = 1) -> str:
    """One run: the per-trial table, its rollout's cost per solved task, tokens and cost per role,
    wall time and errors."""
    h = "#" * level
    errors = error_table(s)
    oracle = " (judged by the hidden tests: oracle)" if s.get("evaluator") == "hidden" else ""
    # Every value in these header lines comes from a spec.json anyone may have written: a model
    # name holding a backtick closed the code span and let `<img onerror=...>` through (issue 45).
    title = " / ".join(_escape(str(s.get(key))) for key in ("benchmark", "agent", "strategy"))
    lines = [
        f"{h} {title}{oracle}",
        "",
        f"model {_code(s['model'])}, reflector {_code(s['reflector_model'] or '-')}, split {_code(s.get('split'))}, "
        + _size(s),
        "",
        f"{where(s)}, git commit {_code(s.get('git_commit') or 'unknown')}",
        "",
        _reference(s),
        "",
        table_markdown(trial_table(s)),
        "",
        *([line, ""] if (line := trial_time_line(s)) else []),
        *([f"success rate {s['success_rate']:.1%}: {s['judged_by']}", ""] if s.get("judged_by") else []),
        # the single attempt first: a programming run's trial 1 leaves out right first programs it retried
        *([line, ""] if (line := first_program_line(s)) else []),
        *([line, ""] if (line := first_vs_last_line(s)) else []),
        *([line, ""] if (line := retry_line(s)) else []),
        *([line, ""] if (line := retry_unchanged_line(s)) else []),
        *([line, ""] if (line := own_tests_line(s)) else []),
        f"{h}# Rollout",
        "",
        table_markdown(rollout_table([s])),
        "",
        f"{h}# Tokens and cost by role",
        "",
        table_markdown(usage_table(s)),
        "",
        *[f"> **warning:** {_escape(w)}\n" for w in run_warnings([s])],
        concurrency_line(s),
        "",
        f"{h}# Errors ({len(s.get('errors') or [])})" if errors[1] else "no errors",
        "",
    ]
    if errors[1]:
        lines += [table_markdown(errors), ""]
    return "\n".join(lines)


def _size(s: dict[str, Any]) -> str:
    status = _escape(str(s["status"]))
    if s.get("training_steps"):  # RL training rollouts: each step samples its own tasks
        return f"RL training rollouts over {s['num_tasks']} tasks, {s['num_trials']} steps (trial = step), status **{status}**"
    return f"{s['num_tasks']} tasks, {s['num_trials']} trials, status **{status}**"


def _code(value: object) -> str:
    """`value` as one inline code span whatever it holds: CommonMark closes a span only on a run
    of backticks as long as its opening one, so the fence is one longer than any run inside
    (and padded with a space, which the renderer strips). Inside a span HTML is never markup."""
    text = plain(str(value)).replace("\n", " ").replace("\r", " ")
    if "`" not in text:
        return f"`{text}`"
    fence = "`" * (max(len(run) for run in re.findall("`+", text)) + 1)
    return f"{fence} {text} {fence}"


def table_markdown(table: Table) -> str:
    """A GitHub-flavoured table; numbers right-aligned, the first column left-aligned."""
    header, rows = table
    align = ["---"] + ["---:"] * (len(header) - 1)
    lines = ["| " + " | ".join(_escape(h) for h in header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# Cells hold error messages and answers that a program or model wrote: as text, never as markup
# (a raw <script> in a rendered report, a [link](...) that was never ours, or a terminal escape)
# (`<` alone opens a tag or a comment: our own cells say "3 -> 11/12" and keep their `>`)
_MARKUP = str.maketrans({"<": "&lt;", "|": "\\|", "\n": " ", "`": "\\`", "\\": "\\\\"})


def _escape(text: str) -> str:
    return plain(text).translate(_MARKUP).replace("](", "]\\(")  # [text](url): no link, brackets as they were
