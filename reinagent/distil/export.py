"""Successful trajectories of run directories -> a chat dataset for supervised fine-tuning.

One example per successful (run, task, trial): the system and task prompt, then the agent's turns
as `assistant` messages and the observations as `user` messages, exactly as the actor saw them,
plus where it came from (run, task, trial, model, strategy). Options shape the prompt:

- drop reflections (default): the prompt is re-rendered with an empty memory, so the model learns
  to succeed without the hint (STaR's rationalisation); the reflections stay in the metadata.
- no few-shot: the prompt is re-rendered without the agent's worked examples (shorter sequences).

Re-rendering goes through the agent (`Agent.prompt`) and is trusted only after the agent,
given the record's own memory, reproduces the recorded prompt exactly; otherwise (an agent without
the hook, prompts edited since the run) the exact memory block and the examples marker are cut
from the recorded text, and an example neither way can fix is skipped and counted, never guessed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reinagent.errors import ReinagentError, RunDirError
from reinagent.memory import MemoryView
from reinagent.records import Message, TrialRecord
from reinagent.strategy import ReflexionStrategy

DATASET_DIR = "dataset"  # datasets.save_to_disk
JSONL = "train.jsonl"
SUMMARY = "export.json"
_FEW_SHOT = re.compile(r"\AHere are some examples:.*?\(END OF EXAMPLES\)\n\n", re.S)


@dataclass(frozen=True)
class ExportOptions:
    drop_reflections: bool = True
    first_success_only: bool = True
    few_shot: bool = True
    dedupe: bool = True


@dataclass
class ExportStats:
    runs: list[str] = field(default_factory=list)
    records: int = 0
    successes: int = 0
    exported: int = 0
    later_successes: int = 0  # dropped by first-success-only
    duplicates: int = 0
    memory_removed: int = 0  # examples whose prompt lost its reflections / previous attempt
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count


class PromptRewriter:
    """Re-renders first prompts of one run's episodes (benchmark, agent and tasks made lazily)."""

    def __init__(self, config: dict[str, Any], records: dict[tuple[str, int], TrialRecord]):
        self.config, self.records = config, records  # config: the run's, as its spec.json records it
        self.strategy = ReflexionStrategy(str(config["strategy"]).strip().lower())
        self._agent: Any = None
        self._tasks: dict[str, Any] | None = None

    def _load(self) -> None:
        if self._tasks is not None:
            return
        from reinagent.benchmarks import make
        from reinagent.plan import agent_settings

        bench = make(self.config["benchmark"])
        self._agent = bench.make_agent(self.config["agent"], agent_settings(self.config))
        self._tasks = {t.task_id: t for t in bench.load_tasks(self.config["split"])}

    def view(self, rec: TrialRecord) -> MemoryView:
        """The memory the actor was shown in this trial, rebuilt from the record and its predecessor."""
        last_attempt = previous = None
        prev = self.records.get((rec.task_id, rec.trial - 1))
        if self.strategy.uses_last_attempt and prev is not None:
            self._load()  # only the agent can render the previous attempt
            last_attempt = self._agent.render_last_attempt(self._tasks[rec.task_id], prev.trajectory)
            previous = prev.trajectory
        return MemoryView(rec.trial, self.strategy, tuple(rec.memory), last_attempt, previous=previous)

    def rewrite(self, rec: TrialRecord, prompt: list[Message], options: ExportOptions) -> list[Message]:
        """The prompt as the options want it; ValueError (the reason) when that cannot be done safely."""
        recorded: MemoryView | None = None
        try:
            recorded = self.view(rec)
            self._load()
            task = self._tasks.get(rec.task_id) if self._tasks else None
            if task is not None and self._agent.prompt(task, recorded) == prompt:
                target = MemoryView(rec.trial, ReflexionStrategy.NONE) if options.drop_reflections else recorded
                return self._agent.prompt(task, target, few_shot=options.few_shot)
        except (NotImplementedError, ReinagentError, KeyError, ImportError, OSError):
            pass  # no agent hook, or the benchmark / task cannot be made here: cut the text instead
        return _cut(prompt, recorded, options)


def _cut(prompt: list[Message], view: MemoryView | None, options: ExportOptions) -> list[Message]:
    """Fallback: remove the exact memory block / the examples block from the recorded text."""
    user_i = max(i for i, m in enumerate(prompt) if m.role == "user")
    text = prompt[user_i].content
    if options.drop_reflections:
        if view is None:
            raise ValueError("cannot rebuild the memory block")
        block = view.block()
        if block:
            if f"{block}\n\n" not in text:
                raise ValueError("memory block not found in the recorded prompt")
            text = text.replace(f"{block}\n\n", "", 1)
    if not options.few_shot:
        text, n = _FEW_SHOT.subn("", text, count=1)
        if n == 0:
            raise ValueError("few-shot block not found in the recorded prompt")
    return [*prompt[:user_i], Message(role=prompt[user_i].role, content=text), *prompt[user_i + 1 :]]


def expand_run_dirs(paths: Sequence[str | Path]) -> list[Path]:
    """Run directories in the order given; a folder holding runs stands for every run in it."""
    from reinagent.store import is_run_dir

    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if is_run_dir(path):
            found.append(path)
        elif path.is_dir() and (inner := sorted(p for p in path.iterdir() if is_run_dir(p))):
            found.extend(inner)
        else:
            raise RunDirError(f"{path} is not a reinagent run directory (no spec.json) nor a folder of runs")
    return found


def _example(run_dir: Path, config: dict[str, Any], rec: TrialRecord, messages: list[Message], removed: bool, few_shot: bool) -> dict[str, Any]:
    chat = [{"role": m.role, "content": m.content} for m in messages]
    digest = hashlib.sha256(json.dumps(chat, sort_keys=True).encode()).hexdigest()[:16]
    steps = rec.trajectory.steps
    return {
        "messages": chat,
        "example_id": digest,
        "run_dir": str(run_dir),
        "benchmark": config["benchmark"],
        "agent": config["agent"],
        "split": config["split"],
        "strategy": str(config["strategy"]).strip().lower(),
        "model": config["model"],
        "task_id": rec.task_id,
        "trial": rec.trial,
        "reward": rec.reward,
        "reflections": list(rec.memory),  # shown to the actor in that trial, kept even when dropped
        "reflections_in_prompt": bool(rec.memory) and not removed,
        "few_shot": few_shot,
        "num_steps": len(steps),
        "invalid_steps": sum(not s.valid_action for s in steps),
    }


def collect(run_dirs: Sequence[str | Path], options: ExportOptions = ExportOptions()) -> tuple[list[dict[str, Any]], ExportStats]:
    """Examples from every successful trajectory of the runs, filtered and deduplicated."""
    from reinagent.runner import load_run

    stats, skipped = ExportStats(), Counter()
    examples: list[dict[str, Any]] = []
    for run_dir in expand_run_dirs(run_dirs):
        spec, records = load_run(run_dir)
        config = spec.config
        strategy = ReflexionStrategy(str(config["strategy"]).strip().lower())
        stats.runs.append(str(run_dir))
        stats.records += len(records)
        rewriter = PromptRewriter(config, {(r.task_id, r.trial): r for r in records})
        for rec in sorted((r for r in records if r.success), key=lambda r: (r.trial, r.task_id)):
            stats.successes += 1
            if not rec.trajectory.steps:
                skipped["no steps recorded"] += 1
                continue
            n0 = rec.trajectory.steps[0].prompt_len
            prompt, turns = rec.trajectory.messages[:n0], rec.trajectory.messages[n0:]
            has_memory = bool(rec.memory) or (strategy.uses_last_attempt and rec.trial > 1)
            needs_rewrite = (options.drop_reflections and has_memory) or not options.few_shot
            try:
                new_prompt = rewriter.rewrite(rec, prompt, options) if needs_rewrite else prompt
            except ValueError as err:
                skipped[str(err)] += 1
                continue
            removed = options.drop_reflections and has_memory
            stats.memory_removed += removed
            examples.append(_example(run_dir, config, rec, [*new_prompt, *turns], removed, options.few_shot))
    if options.first_success_only:
        examples, stats.later_successes = _first_per_task(examples)
    if options.dedupe:
        examples, stats.duplicates = _dedupe(examples)
    stats.exported = len(examples)
    stats.skipped = dict(skipped)
    return examples, stats


def _first_per_task(examples: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    # `collect` appends runs in the order given and trials ascending within a run, so the first
    # example of a task in list order is its first success.
    first: dict[tuple[str, str], dict[str, Any]] = {}
    for ex in examples:
        first.setdefault((ex["benchmark"], ex["task_id"]), ex)
    kept = [ex for ex in examples if first[(ex["benchmark"], ex["task_id"])] is ex]
    return kept, len(examples) - len(kept)


def _dedupe(examples: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    seen: set[str] = set()
    kept = []
    for ex in examples:
        if ex["example_id"] not in seen:
            seen.add(ex["example_id"])
            kept.append(ex)
    return kept, len(examples) - len(kept)


def write(examples: list[dict[str, Any]], stats: ExportStats, options: ExportOptions, output: str | Path, *, overwrite: bool = False) -> Path:
    """DATA_DIR/dataset (datasets.save_to_disk), DATA_DIR/train.jsonl and DATA_DIR/export.json."""
    from reinagent.distil import require

    require("datasets")
    from datasets import Dataset

    out = Path(output)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise ReinagentError(f"{out} exists and is not empty; choose another --output or pass --overwrite")
    if not examples:
        raise ReinagentError(
            f"no successful trajectories to export from {len(stats.runs)} run(s) "
            f"({stats.records} records, {stats.successes} successes, skipped: {stats.skipped or 'none'})"
        )
    out.mkdir(parents=True, exist_ok=True)
    Dataset.from_list(examples).save_to_disk(str(out / DATASET_DIR))
    with open(out / JSONL, "w", encoding="utf-8") as fh:
        for ex in examples:
            fh.write(json.dumps(ex, ensure_ascii=False) + "\n")
    summary = {"options": asdict(options), "stats": asdict(stats)}
    (out / SUMMARY).write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return out


def load_examples(data_dir: str | Path) -> Any:
    """The exported dataset (a `datasets.Dataset`) from DATA_DIR, its dataset/ folder, or a JSONL file."""
    from reinagent.distil import require

    require("datasets")
    import datasets

    path = Path(data_dir)
    if path.is_file() and path.suffix == ".jsonl":
        return datasets.Dataset.from_json(str(path))
    for candidate in (path / DATASET_DIR, path):
        if (candidate / "state.json").is_file():
            return datasets.load_from_disk(str(candidate))
    if (path / JSONL).is_file():
        return datasets.Dataset.from_json(str(path / JSONL))
    raise ReinagentError(f"{path} holds no exported dataset; make one with `reinagent distil export RUN_DIR --output {path}`")
