"""The HTML report: one self-contained file (inline CSS, plots as base64 PNG, no scripts, no
network) with the markdown report's tables, the learning curves, a per-task drill-down and, for
search rollouts, each episode's tree.

The page is the jinja2 template templates/report.html.j2 with the stylesheet templates/report.css
(both shipped as package data); this module only prepares what the template shows.
"""

from __future__ import annotations

import base64
import time
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from reinagent.records import Step, TrialRecord
from reinagent.report.loading import LoadedRun
from reinagent.report.rollouts import rollout_table
from reinagent.report.programming import own_tests_line, retry_unchanged_line
from reinagent.report.significance import first_program_line, first_vs_last_line, retry_line, retry_table, significance_table
from reinagent.report.tables import (
    Table, comparison_table, concurrency_line, duration, error_table, reference_line, run_warnings, trial_table,
    trial_time_line, usage_table,
)
from reinagent.report.trajectory import evaluation_note, gold_of, outcome, task_prompt, task_question
from reinagent.report.tree import drawn_tree, tree_depth
from reinagent.terminal import plain

if TYPE_CHECKING:
    from reinagent.report.training import TrainingLog

MAX_MESSAGE_CHARS = 20_000  # a runaway prompt must not make the page unreadable
TEMPLATE = "report.html.j2"
STYLESHEET = "report.css"


def report_html(runs: list[LoadedRun], *, title: str = "reinagent report", max_tasks: int | None = None,
                training: list[TrainingLog] | None = None) -> str:
    """The whole page. `max_tasks` caps the drill-down per run (None: every task); `training`
    holds RL training logs (report/training.py) whose curves get their own section."""
    from reinagent.report.plots import figure_png, learning_curve_figure, metric_figure

    summaries = [r.summary for r in runs]
    plots = []
    if runs:
        plots = [_img("plot-success", figure_png(learning_curve_figure(summaries)), "success rate by trial"),
                 _img("plot-metric", figure_png(metric_figure(summaries)), "per-trial metric")]
    training_view = []
    if training:
        from reinagent.report.training import training_figure, training_table

        training_view = [{"log": log, "table": training_table(log),
                          "img": _img(f"plot-training-{i}", figure_png(training_figure(log)), "training curves")}
                         for i, log in enumerate(training)]
    return _template().render(
        title=title, css=Markup(stylesheet()), generated=time.strftime("%Y-%m-%d %H:%M:%S"),
        num_runs=len(runs),
        comparison=comparison_table(summaries) if len(runs) > 1 else None,
        warnings=run_warnings(summaries) if len(runs) > 1 else [],
        rollouts=rollout_table(summaries) if len(runs) > 1 else None,
        significance=significance_table(summaries) if len(runs) > 1 else None,
        retries=retry_table(summaries) if len(runs) > 1 else None,
        plots=plots, training=training_view,
        runs=[_run_view(run, i, max_tasks) for i, run in enumerate(runs)],
    ) + "\n"


def stylesheet() -> str:
    """The report's CSS, in one place (the page inlines it: a report must open offline)."""
    return resources.files("reinagent.report").joinpath("templates", STYLESHEET).read_text(encoding="utf-8") + tree_stylesheet()


def tree_stylesheet() -> str:
    """The search tree's CSS alone (the viewer's task page draws trees with the same macro)."""
    return resources.files("reinagent.report").joinpath("templates", "tree.css").read_text(encoding="utf-8")


def tree_number(value: float | None) -> str:
    """A node's value or reward in the tree macro: 0-1 or a 1-10 scale."""
    return "" if value is None else f"{value:.3g}"


def shown_text(value: Any) -> Any:
    """Every value a page shows (jinja's `finalize`): run text without escape sequences, control
    characters or bidi overrides (terminal.plain), markup kept markup. The report and the viewer
    render through it, so model text with ESC or U+202E reaches neither page (issue 54)."""
    if isinstance(value, Markup):
        return Markup(plain(str(value)))  # removing characters cannot make a tag of escaped text
    return plain(value) if isinstance(value, str) else value


@lru_cache(maxsize=1)
def _template():
    env = Environment(loader=PackageLoader("reinagent.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, finalize=shown_text)
    env.filters.update(clip=clip, wbr=wbr, duration=duration, num=tree_number)
    return env.get_template(TEMPLATE)


def _run_view(run: LoadedRun, index: int, max_tasks: int | None) -> dict[str, Any]:
    s = run.summary
    task_ids = list(run.spec.task_ids)
    shown = task_ids if max_tasks is None else task_ids[:max_tasks]
    return {"index": index, "s": s, "trials": trial_table(s), "rollout": rollout_table([s]),
            "usage": usage_table(s), "errors": error_table(s), "num_tasks": len(task_ids),
            "first_vs_last": first_vs_last_line(s), "first_program": first_program_line(s), "retry": retry_line(s), "timing": concurrency_line(s),
            "retry_unchanged": retry_unchanged_line(s), "own_tests": own_tests_line(s),
            "trial_time": trial_time_line(s), "warnings": run_warnings([s]),
            "reference": reference_line(s).replace("`", ""),
            "tasks": [_task_view(task_id, run.records_of(task_id), run.solved_at(task_id)) for task_id in shown]}


def _task_view(task_id: str, records: list[TrialRecord], solved_at: int | None) -> dict[str, Any]:
    """One task: its prompt and gold answer, then every trial collapsed under a one-line verdict."""
    first = records[0] if records else None
    return {
        "id": task_id, "records": len(records),
        "solved_at": solved_at,
        "errors": sum(r.error is not None for r in records),
        # The question is what a reader scans for; the id (often a hex hash) stays beside it, small.
        "question": task_question(first) if first else "",
        "prompt": task_prompt(first) if first else "",
        "gold": gold_of(first) if first else None,
        "trials": [_trial_view(r) for r in records],
    }


def _trial_view(rec: TrialRecord) -> dict[str, Any]:
    traj = rec.trajectory
    return {
        "rec": rec, "kind": "err" if rec.error else ("ok" if rec.success else "bad"),
        "outcome": outcome(rec),
        # Code answers are shown as the last action, not in a one-line summary.
        "answer": None if rec.answer is None or "\n" in rec.answer.strip() else rec.answer,
        "steps": [_step_view(step) for step in traj.steps],
        "evaluation": evaluation_note(rec),
        "tree": drawn_tree(traj) if traj.tree else None,
        "tree_size": len(traj.tree), "tree_depth": tree_depth(traj),
    }


def _step_view(step: Step) -> list[dict[str, Any]]:
    """A step's parts; multi-line text (code, test output) keeps its lines in a <pre>."""
    parts = []
    if step.thought is None and step.action is None:
        parts.append({"kind": "raw", "text": step.output})
    if step.thought:
        parts.append(_part("thought", "Thought", step.thought))
    if step.action is not None:
        flag = Markup("") if step.valid_action else Markup(" <span class='bad'>(invalid)</span>")
        parts.append(_part("action", Markup("Action") + flag, step.action))
    if step.observation is not None:
        parts.append(_part("observation", "Observation", clip(step.observation)))
    return parts


def _part(kind: str, label: str, text: str) -> dict[str, Any]:
    text = text.strip()
    return {"kind": kind, "label": label, "text": text, "pre": "\n" in text}


def _img(ident: str, png: bytes, alt: str) -> dict[str, str]:
    return {"id": ident, "alt": alt, "data": base64.b64encode(png).decode("ascii")}


def wbr(text: Any) -> Markup:
    """Column labels are agent/strategy/model: let them wrap at the slashes before anywhere else."""
    return Markup(str(escape(text)).replace("/", "/<wbr>"))


def clip(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + f"\n... ({len(text)} chars)"


def table_html(table: Table, css_class: str = "") -> str:
    """One table as the report draws it (for callers that embed a table elsewhere)."""
    macro = _template().environment.get_template("macros.html.j2").module.table  # type: ignore[attr-defined]
    return str(macro(table, css_class))
