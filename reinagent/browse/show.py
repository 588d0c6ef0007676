"""`reinagent show RUN TASK`: one task's question, trajectories and reflections, for a terminal.

TASK may be the task id, its number in the run (1-based, as `reinagent show RUN` lists them) or a
piece of its question; an ambiguous piece names the candidates instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass

import click

from reinagent.errors import ReinagentError, choices
from reinagent.records import TrialRecord, final_record, solved_at as solved_trial
from reinagent.report.loading import LoadedRun
from reinagent.report.trajectory import evaluation_note, gold_of, outcome, step_lines, task_prompt, task_question
from reinagent.terminal import plain, shell_word

MAX_CANDIDATES = 8
MAX_PROMPT_CHARS = 4000  # a HotpotQA context is long; the question line is what a reader scans for


@dataclass(frozen=True)
class TaskRow:
    """One task of a run as listed: number, id, one-line question and verdict."""

    number: int
    task_id: str
    question: str
    verdict: str


def task_rows(run: LoadedRun) -> list[TaskRow]:
    rows = []
    for number, task_id in enumerate(run.spec.task_ids, start=1):
        records = run.records_of(task_id)
        rows.append(TaskRow(number, task_id, task_question(records[0] if records else None), verdict(records, run.evaluator)))
    return rows


def verdict(records: list[TrialRecord], evaluator: str | None = None) -> str:
    if not records:
        return "not attempted yet"
    solved_at = solved_trial(records, evaluator)
    judged = {"internal": " (the hidden tests on the program its loop stopped with)",
              "hidden": " (judged by the hidden tests: oracle)"}.get(evaluator or "", "")
    if solved_at is not None:
        return f"solved at trial {solved_at}{judged}"
    final = final_record(records, evaluator)
    if evaluator == "internal" and final is not None and final.internal_passed:
        return f"unsolved: its own tests passed at trial {final.trial}, ending its loop; the hidden tests failed it"
    errors = sum(r.error is not None for r in records)
    return f"unsolved after {len(records)} trial(s)" + (f", {errors} errored" if errors else "") + judged


def resolve_task(run: LoadedRun, key: str) -> str:
    """The task id that `key` names: an id, a 1-based number, or a unique piece of a question/id."""
    task_ids = list(run.spec.task_ids)
    if key in task_ids:
        return key
    digits = key.strip()
    if digits.isascii() and digits.isdigit():  # isdigit() alone takes "²", which int() refuses
        significant = digits.lstrip("0") or "0"
        number = int(significant) if len(significant) <= 12 else 10 ** 12  # int() refuses 4,300+ digits
        if 1 <= number <= len(task_ids):
            return task_ids[number - 1]
        raise ReinagentError(f"task number {number} is out of range; this run has tasks 1 to {len(task_ids)}")
    needle = key.casefold()
    hits = [row for row in task_rows(run) if needle in row.question.casefold() or needle in row.task_id.casefold()]
    if len(hits) == 1:
        return hits[0].task_id
    if not hits:
        raise ReinagentError(f"no task of {run.run_dir} has id, number or question matching {key!r} "
                             f"(see `reinagent show {shell_word(run.run_dir)}` for the list)")
    named = [f"{h.number} ({h.question[:50] or h.task_id})" for h in hits[:MAX_CANDIDATES]]
    more = f" and {len(hits) - MAX_CANDIDATES} more" if len(hits) > MAX_CANDIDATES else ""
    raise ReinagentError(f"{key!r} matches {len(hits)} tasks: {', '.join(named)}{more}; give a number or a longer piece")


def render_task_list(run: LoadedRun) -> str:
    lines = [f"{run.run_dir}: {len(run.spec.task_ids)} tasks (show one with `reinagent show {shell_word(run.run_dir)} N`)"]
    for row in task_rows(run):
        lines.append(f"{row.number:>4}  {row.verdict:<28} {row.question or row.task_id}")
    return plain("\n".join(lines))  # no styles here: the whole list is run text, made plain at once


def render_task(run: LoadedRun, task_id: str, trial: int | None = None, color: bool = True) -> str:
    """The task, then per trial: reflections in the prompt, steps, outcome, reflection written.
    Every piece of a record passes through `plain`: a program or model must not drive the terminal."""
    def style(text: str, **kw) -> str:
        # what is styled is plain first: the style's own escapes are the only ones printed
        return click.style(plain(text), **kw) if color else plain(text)

    records = run.records_of(task_id)
    number = list(run.spec.task_ids).index(task_id) + 1
    cfg = run.spec.config
    # the spec's names are run text too: a planted model name carried OSC 52 (clipboard) and OSC 0
    lines = [style(f"task {number}/{len(run.spec.task_ids)}: {task_id}", bold=True),
             plain(f"run {run.run_dir} ({cfg.get('benchmark')} / {cfg.get('agent')} / {cfg.get('strategy')}, "
                   f"rollout {cfg.get('rollout') or 'react'}, model {cfg.get('model')})"),
             plain(verdict(records, run.evaluator)), ""]
    if not records:
        return "\n".join(lines)
    if trial is not None:
        trials = [r.trial for r in records]
        if trial not in trials:
            raise ReinagentError(f"--trial {trial}: task {task_id} has trial(s) {choices(trials)}")
    prompt = plain(task_prompt(records[0]))
    if len(prompt) > MAX_PROMPT_CHARS:
        prompt = prompt[:MAX_PROMPT_CHARS] + f"\n... ({len(prompt)} chars; the question is below)"
    lines += [style("prompt", bold=True), prompt, ""]
    question = plain(task_question(records[0], limit=10_000))
    if question and question not in prompt[:MAX_PROMPT_CHARS]:
        lines += [style("question: ", bold=True) + question, ""]
    gold = gold_of(records[0])
    if gold is not None:
        lines += [style("gold answer: ", bold=True) + plain(gold), ""]
    for rec in records:
        if trial is not None and rec.trial != trial:
            continue
        colour = "yellow" if rec.error else ("green" if rec.success else "red")
        lines.append(style(f"=== trial {rec.trial}: ", bold=True) + style(plain(outcome(rec)), fg=colour))
        if rec.memory:
            lines.append(style("  memory (reflections in this trial's prompt):", fg="magenta"))
            lines += [f"    - {plain(m)}" for m in rec.memory]
        lines += ["  " + plain(line).replace("\n", "\n  ") for line in step_lines(rec)]
        if rec.answer is not None and "\n" not in rec.answer.strip():
            lines.append(f"  answer: {plain(rec.answer)}")
        if evaluation_note(rec):
            lines.append(f"  evaluation: {plain(evaluation_note(rec))}")
        if rec.reflection:
            lines.append(style("  reflection written after this trial: ", fg="magenta") + plain(rec.reflection))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
