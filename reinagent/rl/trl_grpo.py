"""GRPO through TRL's own GRPOTrainer, fed by our multi-turn token rollouts (the default trainer).

TRL 1.x lets a `rollout_func(prompts, trainer) -> dict` replace its generation: it must return
`prompt_ids`, `completion_ids` and `logprobs` per sequence; any other key is an extra field, and
`env_mask` among them becomes TRL's tool_mask (1: generated, trained; 0: environment text, no
loss). So TRL owns the loss, advantages, KL, optimiser, scheduler, logging and checkpoints, and we
own the episodes:

    dataset      one row per task, "prompt" = the task id (TRL's RepeatSampler repeats each G times)
    rollout_func prompts[i*G:(i+1)*G] are group i: TokenRollout.run(tasks, samples=G) plays them out
                 and returns ids, env_mask and the environment's reward as the extra field `env_reward`
    reward       `env_reward(..., env_reward) -> env_reward`: the environment's reward, passed through
    callback     one train_metrics.jsonl row per optimiser step from TRL's logs (loss, kl, clip
                 ratio) and our episodes (reward mean/std, tokens/s), the same columns as trainer="reinagent"

One generation per optimiser step (steps_per_generation = gradient_accumulation_steps, num_iterations
1), so TRL takes old log-probs = current ones (ratio 1), as our own loop does. Checkpoints go to
`output_dir/trainer/checkpoint-N` every `save_steps` steps; `resume_step` (loop.py) resumes from them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from reinagent.rl.config import RLAgentConfig
from reinagent.rl.metrics import metrics_row
from reinagent.rl.rollout import TokenEpisode, TokenRollout

TRAINER_DIR = "trainer"


def micro_split(total: int, micro_batch: int) -> tuple[int, int]:
    """(per-device batch, accumulation steps) with batch * steps == total and batch <= micro_batch:
    TRL slices one generation of `total` sequences into equal micro-batches."""
    batch = max(d for d in range(1, min(total, micro_batch) + 1) if total % d == 0)
    return batch, total // batch


def last_checkpoint(out: Path) -> tuple[Path | None, int]:
    """The newest complete TRL checkpoint under out/trainer and its step (None, 0 when none)."""
    found = []
    for path in (out / TRAINER_DIR).glob("checkpoint-*"):
        suffix = path.name.removeprefix("checkpoint-")
        if suffix.isdigit() and (path / "trainer_state.json").is_file():  # written last: the checkpoint is whole
            found.append((int(suffix), path))
    if not found:
        return None, 0
    step, path = max(found)
    return path, step


def env_reward(prompts: list[Any], completions: list[Any], env_reward: list[float], **_: Any) -> list[float]:
    """TRL's reward function: the environment's reward, computed during the rollout."""
    return list(env_reward)


class MetricsCallback:
    """Writes one metrics row per step: TRL's logged loss/KL with our episodes' rewards and timings."""

    def __init__(self, metrics: Any, on_row: Any):
        self.metrics, self.on_row = metrics, on_row
        self.episodes: list[TokenEpisode] = []
        self.rollout_s = 0.0
        self.resampled = 0  # groups replaced by dynamic sampling in this step's rollouts
        self.step_started = 0.0
        self.step_s = 0.0
        self.stop_requested = False  # set by the first Ctrl-C (graceful_stop)
        self.stopped_at = 0  # the step after which it stopped
        self.extra: dict[str, Any] = {}  # method-specific columns of this step's row (rl/reflect.py's)

    def hooks(self) -> Any:
        from transformers import TrainerCallback

        owner = self

        class Hooks(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                owner.step_started = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                owner.step_s = time.perf_counter() - owner.step_started
                if owner.stop_requested:  # Ctrl-C: save this step's checkpoint, then stop
                    control.should_save = True
                    control.should_training_stop = True
                    owner.stopped_at = state.global_step

            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs and "loss" in logs and owner.episodes:
                    owner.write(state.global_step, logs)

        return Hooks()

    def write(self, step: int, logs: dict[str, Any]) -> None:
        eps = self.episodes
        generated = sum(e.generated_tokens for e in eps)
        tokens = sum(len(e.prompt_ids) + len(e.completion_ids) for e in eps)
        train_s = max(self.step_s - self.rollout_s, 1e-9)
        row = metrics_row(step, eps, loss=float(logs["loss"]), kl=float(logs.get("kl", 0.0)),
                          clip_frac=float(logs.get("clip_ratio/region_mean", 0.0)), tokens=tokens,
                          trained_tokens=generated, rollout_s=self.rollout_s, train_s=train_s, version=step - 1,
                          resampled_groups=self.resampled, grad_norm=float(logs.get("grad_norm", 0.0)),
                          trainer="trl") | self.extra
        self.metrics.write(json.dumps(row) + "\n")
        self.metrics.flush()
        self.on_row(row, eps)
        self.episodes, self.extra = [], {}


def step_seed(cfg: RLAgentConfig, step: int, rank: int) -> int:
    """The sampling seed of a step's rollouts: each process of a multi-process launch its own."""
    return cfg.seed * 100_003 + step + rank * 1_000_003


def _slots(prompts: list[str], trainer: Any, by_id: dict[str, Any]) -> tuple[list[Any], int, Any]:
    """What both rollout_funcs start from: one task per group of TRL's prompts, the step about to
    be trained and the policy to sample from."""
    tasks = [by_id[prompts[i]] for i in range(0, len(prompts), trainer.num_generations)]
    return tasks, trainer.state.global_step + 1, trainer.accelerator.unwrap_model(trainer.model)


def make_rollout_func(rollout: TokenRollout, cfg: RLAgentConfig, by_id: dict[str, Any], log: Any,
                      callback: MetricsCallback, rank: int = 0) -> Any:
    pool = list(by_id.values())

    def rollout_func(prompts: list[str], trainer: Any) -> dict[str, list[Any]]:
        group = trainer.num_generations
        tasks, step, model = _slots(prompts, trainer, by_id)
        if rollout.engine is not None:
            rollout.engine.version = step  # the weights the step's rollouts come from
        started = time.perf_counter()
        episodes, callback.resampled = rollout.run_with_signal(
            model, tasks, pool, samples=group, temperature=cfg.temperature, version=step - 1,
            seed=step_seed(cfg, step, rank), rounds=cfg.dynamic_sampling)
        callback.rollout_s = time.perf_counter() - started
        callback.episodes = episodes
        # before the update: a resumed run supersedes trials past its checkpoint
        log.add(step, episodes, started=time.time() - callback.rollout_s)
        return {"prompt_ids": [e.prompt_ids for e in episodes], "completion_ids": [e.completion_ids for e in episodes],
                "logprobs": [e.logprobs for e in episodes], "env_mask": [e.env_mask for e in episodes],
                "env_reward": [e.reward for e in episodes]}

    return rollout_func


def make_reflect_rollout_func(reflect: Any, cfg: RLAgentConfig, by_id: dict[str, Any], log: Any,
                              callback: MetricsCallback, rank: int = 0) -> Any:
    """rollout_func of the reflect method (rl/reflect.py): TRL's group of prompts i is one training
    slot; its rows are the G (reflection, retry) pairs of a failed first attempt, as trained."""
    from reinagent.rl.reflect import log_step, step_columns, training_rows

    pool = list(by_id.values())

    def rollout_func(prompts: list[str], trainer: Any) -> dict[str, list[Any]]:
        tasks, step, model = _slots(prompts, trainer, by_id)
        if reflect.rollout.engine is not None:
            reflect.rollout.engine.version = step
        started, began = time.perf_counter(), time.time()
        played = reflect.play(model, tasks, pool, samples=cfg.group_size, temperature=cfg.temperature,
                              version=step - 1, seed=step_seed(cfg, step, rank), rounds=cfg.dynamic_sampling)
        rows = training_rows(played.groups, cfg.reflect_loss, cfg.group_size)
        callback.rollout_s = time.perf_counter() - started
        callback.episodes, callback.extra = rows, step_columns(played, cfg.reflect_loss)
        log_step(log.store, step, played, began)
        return {"prompt_ids": [e.prompt_ids for e in rows], "completion_ids": [e.completion_ids for e in rows],
                "logprobs": [e.logprobs for e in rows], "env_mask": [e.env_mask for e in rows],
                "env_reward": [e.reward for e in rows]}

    return rollout_func


def rows_per_group(cfg: RLAgentConfig, method: str) -> int:
    """TRL's num_generations: G episodes (grpo), or G pairs as 1 or 2 rows each (reflect)."""
    return cfg.group_size * (2 if method == "reflect" and cfg.reflect_loss == "both" else 1)


def anchor_reference(trainer: Any, start_state: dict[str, Any]) -> None:
    """TRL builds its reference model from the weights on disk (`config._name_or_path`), not from
    the policy it was handed, which may have been changed in memory: the KL would then measure the
    distance to the wrong model (0.164 at step 1 instead of 0). Copy the starting policy in."""
    if trainer.ref_model is None:
        return
    ref = trainer.accelerator.unwrap_model(trainer.ref_model)
    device = next(ref.parameters()).device
    ref.load_state_dict({k: v.to(device) for k, v in start_state.items()}, strict=True)


def train_trl(model: Any, tokenizer: Any, rollout: TokenRollout, tasks: list[Any], cfg: RLAgentConfig, out: Path,
              *, learning_rate: float, batch_size: int, steps: int, log: Any, metrics: Any, on_row: Any,
              resume: Path | None, method: str = "grpo", rank: int = 0, scratch_root: Path | None = None) -> None:
    """Run TRL's GRPOTrainer for `steps` optimiser steps (from `resume` when given); temporary
    copies go under `scratch_root` (the output directory's scratch folder)."""
    import torch

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental
    try:
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as exc:
        from reinagent.errors import ConfigError

        raise ConfigError(f"trainer = \"trl\" needs TRL 1.16+ and datasets ({exc.name or exc} is missing): "
                          "pip install -e '.[rl]', or set trainer = \"reinagent\"") from None
    from reinagent.llm.offline import no_telemetry

    no_telemetry()  # before the trainer is built

    group = rows_per_group(cfg, method)
    per_device, accumulate = micro_split(batch_size * group, cfg.micro_batch)
    ids = [t.task_id for t in tasks]
    while len(ids) < batch_size:  # RepeatSampler drops a short batch: fewer tasks than batch_size repeat
        ids += ids[: batch_size - len(ids)]
    name_or_path, scratch = getattr(model.config, "_name_or_path", ""), None
    if cfg.kl_coef > 0 and not Path(str(name_or_path or "")).is_dir():
        # TRL needs a path to build its reference from; its weights are replaced by the policy's below
        scratch = tempfile.TemporaryDirectory(prefix="reference-", dir=scratch_root)  # not /tmp: see loop.scratch_dir
        model.save_pretrained(scratch.name)
        model.config._name_or_path = scratch.name
    start_state = {k: v.detach().clone() for k, v in model.state_dict().items()} if cfg.kl_coef > 0 else {}
    # transformers 5 renamed gradient_checkpointing (the old name warns)
    checkpointing = ("activation_checkpointing" if "activation_checkpointing" in GRPOConfig.__dataclass_fields__
                     else "gradient_checkpointing")
    args = GRPOConfig(
        output_dir=str(out / TRAINER_DIR), per_device_train_batch_size=per_device,
        gradient_accumulation_steps=accumulate, steps_per_generation=accumulate, num_generations=group,
        max_steps=steps, learning_rate=learning_rate, lr_scheduler_type="constant", warmup_steps=0,
        weight_decay=0.0, max_grad_norm=1.0, beta=cfg.kl_coef, epsilon=cfg.clip_eps,
        temperature=cfg.temperature if cfg.temperature > 0 else 1.0, loss_type="dapo", scale_rewards="group",
        max_completion_length=max(cfg.reflection_max_tokens if method == "reflect" else 0,
                                  cfg.max_response_length * cfg.max_turns + cfg.max_obs_length * (cfg.max_turns - 1)),
        logging_steps=1, save_strategy="steps", save_steps=cfg.save_steps, save_total_limit=1, report_to="none",
        seed=cfg.seed, data_seed=cfg.seed, use_cpu=not torch.cuda.is_available(),
        bf16=cfg.train_precision == "bf16", fp16=False,  # bf16: autocast over fp32 master weights (CPU or GPU)
        disable_dropout=True, dataloader_num_workers=0, disable_tqdm=True,
        # TRL turns gradient checkpointing on by default, which also turns the KV cache off; on a
        # CPU a small policy's activations fit, and recomputing the forward only costs time
        **{checkpointing: torch.cuda.is_available()})
    callback = MetricsCallback(metrics, on_row)
    by_id = {t.task_id: t for t in tasks}
    if method == "reflect":
        from reinagent.rl.reflect import ReflectRollout

        rollout_func = make_reflect_rollout_func(ReflectRollout(rollout), cfg, by_id, log, callback, rank)
    else:
        rollout_func = make_rollout_func(rollout, cfg, by_id, log, callback, rank)
    trainer = GRPOTrainer(
        model=model, reward_funcs=env_reward, args=args, train_dataset=Dataset.from_dict({"prompt": ids}),
        processing_class=tokenizer, callbacks=[callback.hooks()],
        rollout_func=rollout_func)
    anchor_reference(trainer, start_state)
    del start_state
    if scratch is not None:
        model.config._name_or_path = name_or_path
        scratch.cleanup()
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # it prints every log dict; our metrics file has the rows
    with graceful_stop(callback):
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    if callback.stopped_at:
        from reinagent.errors import TrainingInterrupted

        raise TrainingInterrupted(callback.stopped_at, last_checkpoint(out)[1], steps)


@contextlib.contextmanager
def graceful_stop(callback: MetricsCallback):
    """The first Ctrl-C ends training after the current step, with a checkpoint of that step (a
    rerun of the same command resumes there); a second one stops at once (a rerun resumes from
    the newest checkpoint written before). Only the main thread receives signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def first(signum, frame):
        callback.stop_requested = True
        print("\nCtrl-C: finishing this step and saving a checkpoint to resume from (Ctrl-C again to stop now)",
              file=sys.stderr, flush=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
