"""The training loop: rollouts -> GRPO (or SFT) updates, every rollout kept, metrics logged.

Output directory (`output_dir`):

    train_metrics.jsonl   one line per step: loss, reward_mean/std, kl, tokens_per_s, ... (report/training.py)
    rollouts/             a run directory: every training episode as a TrialRecord (trial = step,
                          task id `<task>@<sample>`), so `reinagent report OUTPUT_DIR/rollouts` draws
                          success per step
    checkpoint/           the trained model + tokenizer + rl.json (`--model local:OUTPUT_DIR/checkpoint`)
    trainer/checkpoint-N  trainer="trl": TRL's resumable checkpoints (every save_steps steps)
    .scratch/             while training: the policy's temporary copies (OpenVINO rollouts, TRL's
                          reference); removed at the end, and at the next start after a kill
    ranks/rank-N/         under `accelerate launch` / `torchrun` (trainer="trl"): process N's own
                          rollouts/ and train_metrics.jsonl; rank 0 writes the rest (rl/ranks.py)

Resuming (trainer="trl"): training again into an output_dir that holds our rollouts/ continues from
the newest trainer/checkpoint-N (or from the start when none was written yet): metrics rows and
rollout records of steps after N are dropped (superseded) before the steps are redone, so nothing is
duplicated. `overwrite = true` starts afresh instead.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reinagent.errors import ConfigError, choices
from reinagent.records import TrialRecord
from reinagent.rl.config import RLAgentConfig
from reinagent.rl.grpo import Learner, StepStats
from reinagent.rl.metrics import metrics_row
from reinagent.rl.rollout import TokenEpisode, TokenRollout
from reinagent.runlock import open_no_follow

METRICS = "train_metrics.jsonl"
SCRATCH = ".scratch"  # temporary copies of the policy while training (scratch_dir); removed at the end


@dataclass
class TrainSummary:
    checkpoint: str
    metrics: str
    rollouts: str
    method: str
    steps: int
    episodes: int
    reward_first: float  # mean reward of the first step's rollouts
    reward_last: float
    losses: list[float] = field(default_factory=list)
    async_mode: bool = False
    max_staleness: int = 0


def task_batches(tasks: list[Any], batch_size: int, steps: int, seed: int) -> list[list[Any]]:
    """`steps` batches, passing over the tasks in a fresh seeded order each epoch."""
    batches, order, rng = [], [], random.Random(seed)
    for _ in range(steps):
        batch = []
        while len(batch) < batch_size:
            if not order:
                order = list(tasks)
                rng.shuffle(order)
            batch.append(order.pop())
        batches.append(batch)
    return batches


def plan_steps(cfg: RLAgentConfig, num_tasks: int, num_epochs: float, batch_size: int, max_steps: int | None) -> int:
    return max_steps or max(1, math.ceil(num_epochs * num_tasks / batch_size))


class RolloutLog:
    """Training episodes into a run directory (the same format as `reinagent run`)."""

    def __init__(self, run_dir: Path, plan: Any, settings: dict[str, Any],
                 resume_step: int | None = None):
        from reinagent.runner import make_spec
        from reinagent.store import RunStore

        self.run_dir = run_dir
        if resume_step is None:
            self.store = RunStore.create(run_dir, make_spec(plan, settings))
            return
        # Resuming: the steps after the checkpoint will be redone, so their episodes are retired first.
        self.store, _, records = RunStore.open(run_dir)
        stale = [(r.task_id, r.trial) for r in records if r.trial > resume_step]
        if stale:
            self.store.supersede(stale, f"training resumed from step {resume_step}")

    def add(self, step: int, episodes: list[TokenEpisode], advantages: list[float] | None = None,
            started: float | None = None) -> None:
        """`started`: when the step's rollouts began (time.time()); each record spans the rollouts,
        which run as one batch, so the report's wall time is the rollouts' and not 0."""
        now = time.time()
        started = now if started is None else started
        for i, ep in enumerate(episodes):
            trajectory = ep.trajectory()
            if advantages is not None:
                trajectory.extra["advantage"] = advantages[i]
            self.store.append(TrialRecord(
                task_id=f"{ep.task_id}@{ep.sample}", trial=step, success=ep.success, reward=ep.reward,
                answer=ep.answer, trajectory=trajectory, evaluation={"turns": ep.turns, "end_reason": ep.end_reason},
                started_at=started, finished_at=now))

    def close(self) -> None:
        self.store.close()


def scratch_dir(own: Path) -> Path:
    """This process's scratch folder, SCRATCH inside its output directory, emptied first: the
    policy's copies for the OpenVINO rollouts and TRL's reference (0.5 GB for the embedded model)
    went to the system's temporary folder, where a killed run left them for good (issue 45).
    Here a killed run's leftovers go with the next start in the same output_dir (or its rm -r)."""
    path = own / SCRATCH
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


# What `rl train` writes into output_dir (the module docstring); anything else there but the run
# directories `rl run` writes beside them is not ours to replace.
TRAIN_ENTRIES = frozenset({METRICS, "rollouts", "checkpoint", "trainer", "ranks", SCRATCH})


def _foreign(out: Path) -> list[str]:
    """Names in `out` that neither `rl train` nor `rl run` wrote (docs/learning.md runs `rl run`
    then `rl train` with one config: the episodes of `rl run` are run directories in output_dir)."""
    from reinagent.store import is_run_dir

    if not out.is_dir():
        return []
    return sorted(p.name for p in out.iterdir() if p.name not in TRAIN_ENTRIES and not is_run_dir(p))


def own_loop(cfg: RLAgentConfig, method: str) -> str | None:
    """What trains with reinagent's own loop, which cannot resume ("async mode", "method 'sft'",
    "trainer 'reinagent'"); None for TRL's trainer, which resumes from its checkpoints."""
    if uses_trl(cfg, method):
        return None
    return "async mode" if cfg.async_mode else f"method {method!r}" if method != "grpo" else "trainer 'reinagent'"


def check_output_dir(out: Path, overwrite: bool, own: str | None) -> None:
    """Before the policy loads (29 s for the embedded model): whether training may write `out`.
    A training run there is resumed (TRL's trainer; `own`: what trains with our loop instead)
    unless `overwrite`; files no reinagent command wrote are never trained over without
    `overwrite`; the run directories of `rl run` stay beside the training run."""
    held = (out / "rollouts" / "spec.json").is_file()
    if overwrite:
        return
    if held:
        if own is not None:
            raise ConfigError(f"output_dir {out} holds a training run; {own} trains with reinagent's own loop, "
                              "which cannot resume: choose another output_dir, or set overwrite = true to start "
                              "again (only trainer = \"trl\" resumes)")
        return  # resumed (TRL's checkpoints), whatever else lies beside it
    foreign = _foreign(out)
    if foreign:
        raise ConfigError(f"output_dir {out} holds files `rl train` did not write ({', '.join(foreign[:3])}"
                          f"{', ...' if len(foreign) > 3 else ''}); choose another output_dir or set overwrite = true")
    if any((out / name).exists() for name in TRAIN_ENTRIES - {SCRATCH}):  # a killed run's scratch is not a run
        raise ConfigError(f"output_dir {out} holds a training run's files but no rollouts/spec.json to resume from; "
                          "choose another output_dir or set overwrite = true to start again")


def prepare_output(out: Path, overwrite: bool) -> None:
    """`out` ready for a new training run: what training wrote before is removed under
    `overwrite` (so are files no reinagent command wrote); `rl run`'s run directories are kept."""
    check_output_dir(out, overwrite, own="this")
    if out.is_dir() and overwrite:
        foreign = set(_foreign(out))
        for path in out.iterdir():
            if path.name in TRAIN_ENTRIES or path.name in foreign:
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    out.mkdir(parents=True, exist_ok=True)


def resume_metrics(path: Path, step: int) -> list[dict[str, Any]]:
    """Keep the metrics rows of steps <= `step` (rewritten atomically); return them."""
    from reinagent.store import atomic_write

    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    kept = [r for r in rows if r.get("step", 0) <= step]
    atomic_write(path, "".join(json.dumps(r) + "\n" for r in kept))
    return kept


# What a resumed run may change: how long it trains, how often it saves, how fast it goes, where a
# copy goes. Everything else (group_size, learning rate, model, task set, ...) defines the run.
RESUMABLE_CHANGES = frozenset({"max_steps", "num_epochs", "save_steps", "overwrite", "threads", "output_dir",
                               "max_workers", "storage_backend", "storage_url", "eval_temperature"})


def run_settings(cfg: RLAgentConfig, method: str, steps: int, learning_rate: float, batch_size: int) -> dict[str, Any]:
    """The settings recorded in rollouts/spec.json: the config and the values the run really used."""
    from reinagent.redact import redact

    rl = cfg.model_dump(mode="json")
    if rl.get("storage_url"):
        rl["storage_url"] = redact(rl["storage_url"])
    return {"rl": rl, "method": method, "steps": steps,
            "effective": {"learning_rate": learning_rate, "batch_size": batch_size, "method": method}}


def check_resume(out: Path, settings: dict[str, Any]) -> None:
    """Refuse to resume a run under settings that define a different run (one line naming them)."""
    from reinagent.store import read_spec

    before = read_spec(out / "rollouts").settings
    old = {**before.get("rl", {}), **before.get("effective", {})}
    new = {**settings["rl"], **settings["effective"]}
    changed = [k for k in new if k not in RESUMABLE_CHANGES and k in old and old[k] != new[k]]
    if changed:
        what = ", ".join(f"{k} {old[k]!r} -> {new[k]!r}" for k in changed)
        raise ConfigError(f"output_dir {out} holds a run with other settings ({what}); resuming may change only "
                          f"{choices(sorted(RESUMABLE_CHANGES))}: restore them, choose another output_dir, "
                          "or set overwrite = true to start again")


def uses_trl(cfg: RLAgentConfig, method: str) -> bool:
    """TRL's GRPOTrainer trains GRPO (and reflect) unless asked otherwise; SFT and the async mode are ours."""
    return method in ("grpo", "reflect") and cfg.trainer == "trl" and not cfg.async_mode


def train_policy(model: Any, tokenizer: Any, rollout: TokenRollout, tasks: list[Any], cfg: RLAgentConfig,
                 plan: Any, out: Path, *, learning_rate: float, num_epochs: float, batch_size: int,
                 method: str, max_steps: int | None, on_step: Any = None) -> TrainSummary:
    """Train `model` in place on `tasks`; write the output directory; return what happened."""
    from reinagent.rl.policy import save_checkpoint

    if method in ("grpo", "reflect") and cfg.temperature <= 0:
        raise ConfigError("temperature must be > 0 for GRPO: a group of greedy episodes is one episode G times")
    if cfg.async_mode and cfg.dynamic_sampling:
        raise ConfigError("dynamic_sampling is for the synchronous trainers; async_mode generates the next batch "
                          "while training, so set dynamic_sampling = 0 or async_mode = false")
    trl = uses_trl(cfg, method)
    from reinagent.rl.ranks import current_rank, launched_world

    if launched_world() > 1 and not trl:
        raise ConfigError(f"a multi-process launch ({launched_world()} processes) trains through TRL only: set "
                          "trainer = \"trl\" with method grpo or reflect and async_mode = false, or run one process")
    if cfg.train_precision != "fp32" and not trl:
        raise ConfigError(f"train_precision = {cfg.train_precision!r} trains through TRL only: set trainer = \"trl\" with method "
                          "grpo or reflect and async_mode = false, or train_precision = \"fp32\"")
    from reinagent.rl.ov_rollout import OpenVINORollouts, check_engine

    check_engine(cfg.rollout_engine, "trl" if trl else "reinagent", method)
    rank = current_rank()
    own = rank.own_dir(out)
    steps = plan_steps(cfg, len(tasks), num_epochs, batch_size, max_steps)
    settings = run_settings(cfg, method, steps, learning_rate, batch_size)
    resume, resume_step = None, None
    if not cfg.overwrite and (own / "rollouts" / "spec.json").is_file():
        check_output_dir(own, False, own_loop(cfg, method))
        from reinagent.rl.trl_grpo import last_checkpoint

        check_resume(own, settings)
        resume, resume_step = last_checkpoint(out)
    else:
        with rank.main_first():  # rank 0 empties (overwrite) or checks the shared directory first
            if rank.main:
                prepare_output(out, cfg.overwrite)
            else:
                own.mkdir(parents=True, exist_ok=True)
    if resume_step is not None and resume_step >= steps:
        raise ConfigError(f"output_dir {out} holds a run trained for {resume_step} steps already; raise max_steps "
                          f"above {resume_step} to continue it, or set overwrite = true to start again")
    if resume_step is not None:  # a rerun after Ctrl-C says which step it continues from (it silently began at 1)
        print(f"resuming {out} from trainer/checkpoint-{resume_step}: steps 1-{resume_step} are kept, training "
              f"continues at step {resume_step + 1}" if resume else
              f"{out} holds a training run stopped before its first checkpoint (every save_steps = "
              f"{cfg.save_steps} steps): starting again at step 1", file=sys.stderr, flush=True)
    scratch = scratch_dir(own)
    if cfg.rollout_engine == "openvino":
        rollout.engine = OpenVINORollouts(tokenizer, max_batch=cfg.max_workers, workdir=scratch / "openvino")
    log = RolloutLog(own / "rollouts", plan, settings, resume_step)
    samples = cfg.group_size if method == "grpo" else max(1, cfg.group_size)
    summary = TrainSummary(checkpoint="", metrics=str(own / METRICS), rollouts=str(own / "rollouts"), method=method,
                           steps=steps, episodes=0, reward_first=0.0, reward_last=0.0, async_mode=cfg.async_mode)
    try:
        kept = resume_metrics(own / METRICS, resume_step) if resume_step is not None else []
        # O_NOFOLLOW: an output_dir may be a copied one, and a link there must not be appended through
        with os.fdopen(open_no_follow(own / METRICS, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a",
                       encoding="utf-8") as metrics:
            def note(row: dict[str, Any], episodes: list[Any]) -> None:
                if on_step is not None:
                    on_step(row, steps)
                summary.episodes += row["episodes"]
                summary.losses.append(row["loss"])
                summary.max_staleness = max(summary.max_staleness, row["staleness"])
                if row["step"] == 1:
                    summary.reward_first = row["reward_mean"]
                summary.reward_last = row["reward_mean"]

            for row in kept:
                note(row, [])

            def record(step: int, episodes: list[TokenEpisode], stats: StepStats, rollout_s: float, version: int,
                       resampled: int = 0) -> None:
                row = metrics_row(step, episodes, loss=stats.loss, kl=stats.kl, clip_frac=stats.clip_frac,
                                  tokens=stats.tokens, trained_tokens=stats.trained_tokens, rollout_s=rollout_s,
                                  train_s=stats.train_s, version=version, resampled_groups=resampled)
                metrics.write(json.dumps(row) + "\n")
                metrics.flush()
                log.add(step, episodes, started=time.time() - rollout_s - stats.train_s)
                note(row, episodes)

            if trl:
                from reinagent.rl.trl_grpo import train_trl

                train_trl(model, tokenizer, rollout, tasks, cfg, out, learning_rate=learning_rate,
                          batch_size=batch_size, steps=steps, log=log, metrics=metrics, on_row=note, resume=resume,
                          method=method, rank=rank.index, scratch_root=scratch)
            else:
                batches = task_batches(tasks, batch_size, steps, cfg.seed)
                ref = None
                if method in ("grpo", "reflect") and cfg.kl_coef > 0:
                    ref = copy.deepcopy(model).eval()
                    ref.requires_grad_(False)
                learner = Learner(model, ref, tokenizer, learning_rate=learning_rate, clip_eps=cfg.clip_eps,
                                  kl_coef=cfg.kl_coef, temperature=cfg.temperature, micro_batch=cfg.micro_batch,
                                  method=method)
                if method == "reflect":
                    train_reflect(model, learner, rollout, tasks, batches, cfg, metrics, log, note)
                elif cfg.async_mode:
                    from reinagent.rl.async_mode import train_async

                    train_async(model, learner, rollout, batches, cfg, samples, record)
                else:
                    for step, batch in enumerate(batches, start=1):
                        started = time.perf_counter()
                        episodes, resampled = rollout.run_with_signal(
                            model, batch, tasks, samples=samples, temperature=cfg.temperature, version=learner.version,
                            seed=cfg.seed * 100_003 + step, rounds=cfg.dynamic_sampling if method == "grpo" else 0)
                        rollout_s = time.perf_counter() - started
                        stats = learner.update(episodes, on_policy=True)
                        record(step, episodes, stats, rollout_s, learner.version - 1, resampled)
    finally:
        log.close()
        if rollout.engine is not None:
            rollout.engine.close()
            rollout.engine = None
        shutil.rmtree(scratch, ignore_errors=True)
    summary.checkpoint = str(out / "checkpoint")
    if rank.main:  # every rank holds the same weights (gradients are all-reduced); one writes them
        save_checkpoint(model, tokenizer, out / "checkpoint", {"config": cfg.model_dump(mode="json"), **asdict(summary)})
    return summary


def train_reflect(model: Any, learner: Learner, rollout: TokenRollout, tasks: list[Any], batches: list[list[Any]],
                  cfg: RLAgentConfig, metrics: Any, log: RolloutLog, note: Any) -> None:
    """The reflect method with our own learner (trainer = "reinagent"): the rows TRL would get."""
    from reinagent.rl.reflect import ReflectRollout, log_step, step_columns, training_rows

    reflect = ReflectRollout(rollout)
    for step, batch in enumerate(batches, start=1):
        started, began = time.perf_counter(), time.time()
        played = reflect.play(model, batch, tasks, samples=cfg.group_size, temperature=cfg.temperature,
                              version=learner.version, seed=cfg.seed * 100_003 + step, rounds=cfg.dynamic_sampling)
        rollout_s = time.perf_counter() - started
        rows = training_rows(played.groups, cfg.reflect_loss, cfg.group_size)
        stats = learner.update(rows, on_policy=True)
        row = metrics_row(step, rows, loss=stats.loss, kl=stats.kl, clip_frac=stats.clip_frac, tokens=stats.tokens,
                          trained_tokens=stats.trained_tokens, rollout_s=rollout_s, train_s=stats.train_s,
                          version=learner.version - 1) | step_columns(played, cfg.reflect_loss)
        metrics.write(json.dumps(row) + "\n")
        metrics.flush()
        log_step(log.store, step, played, began)
        note(row, rows)
