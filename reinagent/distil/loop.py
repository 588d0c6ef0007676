"""The whole distillation loop in one call: Reflexion on a training split -> export the successes
-> fine-tune -> evaluate the base and the tuned model on a held-out split, side by side.

Everything lives under one work directory and every stage is resumable: the runs resume from
their records, the export is redone (cheap), the model is retrained only when the exported
examples changed (or `retrain`), and an evaluation of a model that was retrained is moved aside,
never deleted.

    WORK/train-run   Reflexion run on the training split
    WORK/data        exported dataset            WORK/model       fine-tuned model (local:WORK/model)
    WORK/eval-base   base model, held-out split  WORK/eval-tuned  tuned model, held-out split
    WORK/loop.json   the figures printed at the end
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reinagent.distil.export import ExportOptions
from reinagent.distil.train import SUMMARY as MODEL_SUMMARY
from reinagent.distil.train import TrainOptions

LOOP_SUMMARY = "loop.json"


@dataclass
class LoopOptions:
    work_dir: str
    benchmark: str = "hotpotqa"
    agent: str = "cot-context"
    strategy: str = "reflexion"
    train_split: str = "dev-first100"
    eval_split: str = "hard100"
    num_trials: int = 3
    train_envs: int | None = None
    eval_envs: int | None = None
    eval_strategy: str = "none"  # pass@1 of each model, no reflections: what the weights learned
    eval_trials: int = 1
    model: str = "local"
    reflector_model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None  # of the Reflexion run only (sampling finds more successes); evaluations are greedy
    export: ExportOptions = field(default_factory=ExportOptions)
    train: TrainOptions = field(default_factory=TrainOptions)
    retrain: bool = False
    progress: bool = True


@dataclass
class RunScore:
    """Success of one run: solved at trial 1, and within all its trials."""

    label: str
    model: str
    run_dir: str
    tasks: int
    solved_first: int
    solved: int
    errors: int

    def rate(self, n: int) -> str:
        return f"{n}/{self.tasks} ({100 * n / max(self.tasks, 1):.1f}%)"


@dataclass
class LoopResult:
    options: dict[str, Any]
    train_run: RunScore
    exported: int
    training: dict[str, Any] | None
    base: RunScore
    tuned: RunScore | None
    notes: list[str] = field(default_factory=list)
    summary_path: str = ""

    def rates(self) -> dict[str, float | None]:
        def rate(score: RunScore | None) -> float | None:
            return None if score is None else score.solved / max(score.tasks, 1)

        return {"train_reflexion": rate(self.train_run), "base": rate(self.base), "tuned": rate(self.tuned)}

    def table(self) -> str:
        o, t = self.options, self.train_run
        lines = [
            f"distillation loop: {o['benchmark']} {o['agent']}; train {o['train_split']}, evaluate {o['eval_split']} "
            f"({o['eval_strategy']}, {o['eval_trials']} trial(s))",
            f"{o['strategy']} run of {o['model']} on {o['train_split']}: solved {t.rate(t.solved)} within {o['num_trials']} trial(s) "
            f"(trial 1: {t.rate(t.solved_first)}); exported {self.exported} example(s)",
        ]
        if self.training:
            losses = self.training.get("losses") or [float("nan")]
            lines.append(f"training: {self.training['steps']} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
                         f"{self.training.get('tokens_per_s', 0):.0f} tokens/s on {self.training.get('device')}")
        lines += ["", f"| model | run | trial 1 | within {o['eval_trials']} trial(s) | errors |", "|---|---|---|---|---|"]
        for score in (self.base, self.tuned):
            if score is not None:
                lines.append(f"| {score.label}: {score.model} | {score.run_dir} | {score.rate(score.solved_first)} | "
                             f"{score.rate(score.solved)} | {score.errors} |")
        if self.tuned is None:
            lines.append("| tuned | (not trained: no successful trajectory to learn from) | | | |")
        return "\n".join(lines)


def score(run_dir: Path, label: str, model: str) -> RunScore:
    from reinagent.runner import load_run

    spec, records = load_run(run_dir)
    return RunScore(
        label=label, model=model, run_dir=str(run_dir), tasks=len(spec.task_ids),
        solved_first=sum(r.success for r in records if r.trial == 1),
        solved=len({r.task_id for r in records if r.success}),
        errors=sum(r.error is not None for r in records),
    )


def run_or_resume(run_dir: Path, progress: bool, **settings: Any) -> Path:
    """Start the run, or finish it from its records when a previous loop was interrupted."""
    import reinagent
    from reinagent.store import is_run_dir

    if is_run_dir(run_dir):
        return Path(reinagent.resume(run_dir, progress=progress))
    settings = {k: v for k, v in settings.items() if v is not None}
    return Path(reinagent.run(run_dir=str(run_dir), progress=progress, **settings))


def as_local_model(base_model: str) -> str:
    """The model string `reinagent run` takes for a base model given to training."""
    return base_model if base_model == "local" or base_model.startswith("local:") else f"local:{base_model}"


def run_loop(opts: LoopOptions) -> LoopResult:
    from reinagent.distil.export import collect, write
    from reinagent.distil.train import train

    work = Path(opts.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    previous = _read_json(work / LOOP_SUMMARY)
    notes: list[str] = []
    common = {"benchmark": opts.benchmark, "agent": opts.agent, "max_tokens": opts.max_tokens}

    train_run = run_or_resume(work / "train-run", opts.progress, **common, strategy=opts.strategy, split=opts.train_split,
                              num_trials=opts.num_trials, num_envs=opts.train_envs, model=opts.model,
                              reflector_model=opts.reflector_model, temperature=opts.temperature)
    examples, stats = collect([train_run], opts.export)
    fingerprint = hashlib.sha256(json.dumps(sorted(e["example_id"] for e in examples)).encode()).hexdigest()[:16]
    model_dir, training = work / "model", None
    if examples:
        write(examples, stats, opts.export, work / "data", overwrite=True)
        complete = (model_dir / MODEL_SUMMARY).is_file()
        if complete and not opts.retrain and previous.get("data_fingerprint") == fingerprint:
            training = _read_json(model_dir / MODEL_SUMMARY)
            notes.append(f"reused the model trained earlier on the same {len(examples)} example(s) (--retrain to train again)")
        else:
            training = asdict(train(work / "data", model_dir, opts.train))
            _move_aside(work / "eval-tuned")  # it evaluated a model that no longer exists
    else:
        notes.append(f"no successful trajectory on {opts.train_split}: nothing to distil, only the base model is evaluated")

    # Evaluations run without the response cache: the tuned model's name (local:WORK/model) stays
    # the same when it is retrained, so cached replies of an older model would be served.
    evaluation = {**common, "strategy": opts.eval_strategy, "split": opts.eval_split, "num_trials": opts.eval_trials,
                  "num_envs": opts.eval_envs, "cache": False}
    base_model = as_local_model(opts.train.base_model)
    base = score(run_or_resume(work / "eval-base", opts.progress, **evaluation, model=base_model), "base", base_model)
    tuned = None
    if training is not None:
        tuned_model = f"local:{model_dir}"
        tuned = score(run_or_resume(work / "eval-tuned", opts.progress, **evaluation, model=tuned_model), "tuned", tuned_model)

    options = {**asdict(opts), "export": asdict(opts.export), "train": asdict(opts.train)}
    result = LoopResult(options, score(train_run, "reflexion", opts.model), len(examples), training, base, tuned, notes)
    result.summary_path = str(work / LOOP_SUMMARY)
    summary = {**asdict(result), "rates": result.rates(), "data_fingerprint": fingerprint, "export": asdict(stats)}
    (work / LOOP_SUMMARY).write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return result


def _move_aside(path: Path) -> None:
    if path.exists():
        path.rename(path.with_name(f"{path.name}-before-{time.strftime('%Y%m%d-%H%M%S')}"))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
