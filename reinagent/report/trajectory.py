"""One task's story across its trials: what the actor saw, did and was told, and its reflections.

Used by notebooks (`print(task_story(run, task_id))`) and by the HTML drill-down, which renders the
same pieces as collapsible blocks.
"""

from __future__ import annotations

import re
from pathlib import Path

from reinagent.records import TrialRecord
from reinagent.report.loading import LoadedRun, load
from reinagent.report.tree import chosen_path

# The few-shot prompts end their examples with "(END OF EXAMPLES)" (ALFWorld: "(END OF EXAMPLE)").
EXAMPLES_END = re.compile(r"\(END OF EXAMPLES?\)")


def task_prompt(rec: TrialRecord) -> str:
    """The task as the actor first saw it: the last user message before the first step, without
    the few-shot examples in front of it (they are the same for every task)."""
    traj = rec.trajectory
    messages = traj.prompt_of(traj.steps[0]) if traj.steps else traj.messages
    users = [m.content for m in messages if m.role == "user"]
    if not users:
        return ""
    # After the last marker: a prompt may hold several example blocks.
    return EXAMPLES_END.split(users[-1])[-1].strip()


_QUESTION_PATTERNS = (
    re.compile(r"^Question:\s*(.+)$", re.M),  # HotpotQA (every agent)
    re.compile(r"^(Your task is to:.+)$", re.M),  # ALFWorld
    re.compile(r"def (\w+)\(.*?(?:\"\"\"|\'\'\')\s*(.+?)\s*$", re.S | re.M),  # programming: name + docstring
)
SKIP_LINES = ("```", "Context:", "Here is the task:")


def task_question(rec: TrialRecord | None, limit: int = 200) -> str:
    """The task in one line, for lists and headings: HotpotQA's question, ALFWorld's goal, a
    programming task's function name and the first line of its docstring; else the prompt's first
    line. Empty when there is no record to read it from."""
    if rec is None:
        return ""
    prompt = task_prompt(rec)
    text = ""
    for pattern in _QUESTION_PATTERNS:
        found = pattern.search(prompt)
        if found:
            text = ": ".join(g.strip() for g in found.groups())
            break
    if not text:
        lines = [ln.strip() for ln in prompt.splitlines() if ln.strip()]
        text = next((ln for ln in lines if not ln.startswith(SKIP_LINES)), lines[0] if lines else "")
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def gold_of(rec: TrialRecord) -> str | None:
    """The reference answer when the evaluator recorded one (HotpotQA does, as 'gold')."""
    gold = rec.evaluation.get("gold") if rec.evaluation else None
    return None if gold is None else str(gold)


def evaluation_note(rec: TrialRecord) -> str:
    """The evaluator's details (e.g. which hidden test failed) in one line; the gold answer is
    shown on its own, so it is left out here."""
    items = [f"{k}: {v}" for k, v in (rec.evaluation or {}).items() if k != "gold" and v not in (None, "")]
    return "; ".join(items)


def outcome(rec: TrialRecord) -> str:
    if rec.error:
        return f"ERROR: {rec.error}"
    verdict = "solved" if rec.success else "failed"
    f1 = "" if rec.f1 is None else f", F1 {rec.f1:.2f}"
    return f"{verdict} (reward {rec.reward:g}{f1}, {rec.trajectory.end_reason})"


def step_lines(rec: TrialRecord) -> list[str]:
    """Thought / Action / Observation per step; the raw output where nothing was parsed."""
    lines: list[str] = []
    for i, step in enumerate(rec.trajectory.steps, start=1):
        if step.thought is None and step.action is None:
            lines.append(_block(f"[{i}] Output:", step.output))
        else:
            if step.thought:
                lines.append(_block(f"[{i}] Thought:", step.thought))
            if step.action is not None:
                flag = "" if step.valid_action else " (invalid)"
                lines.append(_block(f"[{i}] Action{flag}:", step.action))
        if step.observation is not None:
            lines.append(_block(f"[{i}] Observation:", step.observation))
    return lines


def _block(label: str, text: str) -> str:
    """One line when the text is one line; otherwise the text indented under its label, so that
    code (programming actions) and multi-line observations keep their shape."""
    text = text.strip()
    if "\n" not in text:
        return f"{label} {text}"
    return label + "\n" + "\n".join(f"    {line}" for line in text.splitlines())


def pick_task(run: LoadedRun) -> str | None:
    """A task worth showing: solved after a reflection, else failed with reflections, else any."""
    by_task: dict[str, list[TrialRecord]] = {}
    for rec in run.records:
        by_task.setdefault(rec.task_id, []).append(rec)
    ordered = [t for t in run.spec.task_ids if t in by_task]

    def reflected(tid: str) -> bool:
        return any(r.reflection for r in by_task[tid])

    for test in (lambda t: reflected(t) and any(r.success for r in by_task[t]), reflected, lambda t: True):
        for tid in ordered:
            if test(tid):
                return tid
    return None


def task_story(run: LoadedRun | str | Path, task_id: str | None = None) -> str:
    """Plain text: the task, then per trial the reflections shown, the steps, the outcome and
    the reflection written after it. `task_id` defaults to `pick_task(run)`."""
    if not isinstance(run, LoadedRun):
        run = load(run)[0]
    task_id = task_id or pick_task(run)
    if task_id is None:
        return f"{run.run_dir}: no records yet"
    records = run.records_of(task_id)
    if not records:
        return f"task {task_id}: not attempted yet"
    lines = [f"task {task_id}", ""]
    prompt = task_prompt(records[0])
    if prompt:
        lines += [prompt, ""]
    gold = gold_of(records[0])
    if gold is not None:
        lines += [f"gold answer: {gold}", ""]
    for rec in records:
        lines.append(f"=== trial {rec.trial}: {outcome(rec)}")
        for reflection in rec.memory:
            lines.append(f"  reflection in prompt: {reflection}")
        lines += ["  " + line.replace("\n", "\n  ") for line in step_lines(rec)]
        if rec.trajectory.tree:
            path = " > ".join(f"#{i}" for i in chosen_path(rec.trajectory))
            lines.append(f"  search tree ({rec.trajectory.rollout}): {len(rec.trajectory.tree)} nodes, chosen path {path}")
        if rec.answer is not None and "\n" not in rec.answer.strip():
            lines.append(f"  answer: {rec.answer}")  # a multi-line answer (code) is the last action
        if evaluation_note(rec):
            lines.append(f"  evaluation: {evaluation_note(rec)}")
        if rec.reflection:
            lines.append(f"  reflection written: {rec.reflection}")
        lines.append("")
    return "\n".join(lines)
