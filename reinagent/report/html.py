"""The HTML report: one self-contained file (inline CSS, plots as base64 PNG, no scripts, no
network) with the markdown report's tables, the learning curves and a per-task drill-down."""

from __future__ import annotations

import base64
import html
import time
from typing import Any

from reinagent.records import TrialRecord
from reinagent.report.loading import LoadedRun
from reinagent.report.tables import Table, comparison_table, duration, error_table, trial_table, usage_table
from reinagent.report.trajectory import evaluation_note, gold_of, outcome, task_prompt, task_question

MAX_MESSAGE_CHARS = 20_000  # a runaway prompt must not make the page unreadable

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1200px;
 padding:0 1em;color:#1b1f24;line-height:1.4}
h1{font-size:1.6em}h2{border-bottom:1px solid #d0d7de;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0 1em;font-size:.9em}
th,td{border:1px solid #d0d7de;padding:.25em .6em;text-align:right;vertical-align:top}
th{background:#f6f8fa}td:first-child,th:first-child{text-align:left}
.meta{color:#57606a;font-size:.9em}.plots{display:flex;flex-wrap:wrap;gap:1em}
img.plot{max-width:100%;width:560px;border:1px solid #d0d7de;margin:.4em 0}
details{margin:.3em 0 .3em .4em}summary{cursor:pointer}details.task>summary{font-weight:600}
.ok{color:#1a7f37}.bad{color:#cf222e}.err{color:#9a6700}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:.5em;border-radius:4px;
 font-size:.85em;max-height:30em;overflow:auto}
ol.steps li{margin:.3em 0}.thought{color:#57606a}.action{font-family:monospace;font-weight:600}
.observation{font-family:monospace;color:#0550ae}blockquote.reflection{border-left:4px solid #8250df;
 margin:.4em 0;padding:.2em .8em;background:#fbefff}ul.memory li{color:#8250df}
.msg .role{font-weight:600;font-size:.8em;text-transform:uppercase;color:#57606a}
.scroll{max-width:100%;overflow-x:auto}td{overflow-wrap:anywhere}
table.comparison{table-layout:fixed;width:100%}table.comparison th{overflow-wrap:anywhere;font-size:.9em}
table.comparison th:first-child{width:15em}
.question{font-weight:400}.tid{color:#57606a;font-size:.8em}
"""


def report_html(runs: list[LoadedRun], *, title: str = "reinagent report", max_tasks: int | None = None) -> str:
    """The whole page. `max_tasks` caps the drill-down per run (None: every task)."""
    from reinagent.report.plots import figure_png, learning_curve_figure, metric_figure

    summaries = [r.summary for r in runs]
    body = [f"<h1>{_e(title)}</h1>",
            f"<p class='meta'>{len(runs)} run(s); generated {_e(time.strftime('%Y-%m-%d %H:%M:%S'))} "
            "from the run directories alone</p>"]
    if len(runs) > 1:
        body += ["<section id='comparison'><h2>Comparison</h2>", table_html(comparison_table(summaries), "comparison"),
                 "</section>"]
    body += ["<section id='curves'><h2>Learning curves</h2><div class='plots'>",
             _img("plot-success", figure_png(learning_curve_figure(summaries)), "success rate by trial"),
             _img("plot-metric", figure_png(metric_figure(summaries)), "per-trial metric"), "</div></section>"]
    for i, run in enumerate(runs):
        body.append(run_html(run, i, max_tasks))
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width'><title>{_e(title)}</title>"
            f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>\n")


def run_html(run: LoadedRun, index: int, max_tasks: int | None = None) -> str:
    s = run.summary
    errors = error_table(s)
    parts = [
        f"<section class='run' id='run-{index}'>",
        f"<h2>{_e(s['benchmark'])} / {_e(s['agent'])} / {_e(s['strategy'])}</h2>",
        f"<p class='meta'>model <code>{_e(s['model'])}</code>, reflector <code>{_e(s['reflector_model'])}</code>, "
        f"split {_e(s.get('split'))}, {s['num_tasks']} tasks, {s['num_trials']} trials, status "
        f"<b>{_e(s['status'])}</b><br>run directory <code>{_e(s.get('run_dir'))}</code>, git commit "
        f"<code>{_e(s.get('git_commit') or 'unknown')}</code></p>",
        "<h3>Trials</h3>", table_html(trial_table(s), "trials"),
        "<h3>Tokens and cost by role</h3>", table_html(usage_table(s), "usage"),
        f"<p>wall time {duration(s.get('wall_s'))} (first episode start to last end), "
        f"episodes {duration(s.get('episode_s'))} in total</p>",
    ]
    parts += ([f"<h3>Errors ({len(s['errors'])})</h3>", table_html(errors, "errors")] if errors[1]
              else ["<p>no errors</p>"])
    task_ids = list(run.spec.task_ids)
    shown = task_ids if max_tasks is None else task_ids[:max_tasks]
    parts.append(f"<h3>Tasks ({len(task_ids)})</h3>")
    if len(shown) < len(task_ids):
        parts.append(f"<p class='meta'>first {len(shown)} shown</p>")
    parts += [task_html(task_id, run.records_of(task_id)) for task_id in shown]
    parts.append("</section>")
    return "".join(parts)


def task_html(task_id: str, records: list[TrialRecord]) -> str:
    """One task: its prompt and gold answer, then every trial collapsed under a one-line verdict."""
    solved_at = next((r.trial for r in records if r.success), None)
    if not records:
        verdict = "<span class='meta'>not attempted yet</span>"
    elif solved_at is not None:
        verdict = f"<span class='ok'>solved at trial {solved_at}</span>"
    else:
        errors = sum(r.error is not None for r in records)
        verdict = f"<span class='bad'>unsolved after {len(records)} trial(s)</span>" + (
            f" <span class='err'>({errors} errored)</span>" if errors else "")
    question = task_question(records[0]) if records else ""
    # The question is what a reader scans for; the id (often a hex hash) stays beside it, small.
    name = (f"<span class='question'>{_e(question)}</span> <code class='tid'>{_e(task_id)}</code>" if question
            else f"<code>{_e(task_id)}</code>")
    parts = [f"<details class='task' data-task='{_e(task_id)}'><summary>{name} {verdict}</summary>"]
    if records:
        parts.append(f"<pre class='prompt'>{_e(_clip(task_prompt(records[0])))}</pre>")
        gold = gold_of(records[0])
        if gold is not None:
            parts.append(f"<p>gold answer: <b>{_e(gold)}</b></p>")
    parts += [trial_html(r) for r in records]
    parts.append("</details>")
    return "".join(parts)


def trial_html(rec: TrialRecord) -> str:
    kind = "err" if rec.error else ("ok" if rec.success else "bad")
    parts = [f"<details class='trial'><summary>trial {rec.trial}: <span class='{kind}'>{_e(outcome(rec))}</span>"
             f"{_answer(rec.answer)}</summary>"]
    if rec.memory:
        parts.append("<p>reflections in the prompt:</p><ul class='memory'>"
                     + "".join(f"<li>{_e(m)}</li>" for m in rec.memory) + "</ul>")
    parts.append("<ol class='steps'>")
    for step in rec.trajectory.steps:
        item = []
        if step.thought is None and step.action is None:
            item.append(f"<pre>{_e(_clip(step.output))}</pre>")
        if step.thought:
            item.append(_labelled("thought", "Thought", step.thought))
        if step.action is not None:
            flag = "" if step.valid_action else " <span class='bad'>(invalid)</span>"
            item.append(_labelled("action", f"Action{flag}", step.action, escape_label=False))
        if step.observation is not None:
            item.append(_labelled("observation", "Observation", _clip(step.observation)))
        parts.append(f"<li>{''.join(item)}</li>")
    parts.append("</ol>")
    if rec.error:
        parts.append(f"<pre class='error'>{_e(rec.error)}</pre>")
    if evaluation_note(rec):
        parts.append(f"<p class='meta'>evaluation: {_e(evaluation_note(rec))}</p>")
    if rec.reflection:
        parts.append(f"<p>reflection written after this trial:</p><blockquote class='reflection'>{_e(rec.reflection)}</blockquote>")
    messages = rec.trajectory.messages
    if messages:
        parts.append(f"<details class='conversation'><summary>full conversation ({len(messages)} messages)</summary>")
        parts += [f"<div class='msg'><span class='role'>{_e(m.role)}</span><pre>{_e(_clip(m.content))}</pre></div>"
                  for m in messages]
        parts.append("</details>")
    parts.append("</details>")
    return "".join(parts)


def table_html(table: Table, css_class: str = "") -> str:
    header, rows = table
    # Column labels are agent/strategy/model: let them wrap at the slashes before anywhere else.
    head = "".join(f"<th>{_e(h).replace('/', '/<wbr>')}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    # In a scrolling box: a wide table (long error texts) scrolls by itself, never the page.
    return (f"<div class='scroll'><table class='{css_class}'><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


def _labelled(kind: str, label: str, text: str, *, escape_label: bool = True) -> str:
    """A step part; multi-line text (code, test output) keeps its lines in a <pre>."""
    label = _e(label) if escape_label else label
    text = text.strip()
    if "\n" in text:
        return f"<div class='{kind}'>{label}:<pre>{_e(text)}</pre></div>"
    return f"<div class='{kind}'>{label}: {_e(text)}</div>"


def _img(ident: str, png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f"<img class='plot' id='{ident}' alt='{_e(alt)}' src='data:image/png;base64,{data}'>"


def _answer(answer: str | None) -> str:
    if answer is None or "\n" in answer.strip():
        return ""  # code answers are shown as the last action, not in a one-line summary
    return f" - answer <b>{_e(answer)}</b>"


def _clip(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + f"\n... ({len(text)} chars)"


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)
