"""Learned reflection (issue 37): Reflect, Retry, Reward (Bensal et al. 2025) over token rollouts.

Per training task: a first attempt from the agent's first-trial prompt; where the benchmark's own
judge (`Benchmark.evaluate`) fails it, G reflections sampled from the Reflector's prompt
(reflector.py) on the attempt as the agent renders it for the Reflector, each followed by a retry
whose prompt is the one the REFLEXION strategy builds for trial 2 (`memory.trial_view` and the
agent's prompt, as episode.py builds it). A pair's reward is the retry's success by the same judge,
1 or 0. GRPO compares the G pairs of one failure.

Which tokens carry the loss (`reflect_loss`):

    reflection  the reflection's tokens only (the paper's choice): one training row per pair
    retry       the retry's generated tokens only (its feedback tokens masked, as in every rollout)
    both        two rows per pair with the pair's reward; GRPO's group is then the 2G rows

The first attempt is never trained, nor any prompt or environment token. A reflection and its
retry are separate sequences: the retry was generated from the REFLEXION prompt alone, so its
tokens are scored in that very context (one sequence holding both would score them in another).

A task whose first attempt succeeds has nothing to reflect on: for up to `dynamic_sampling` rounds
it is replaced by fresh training tasks; a slot still without a failure becomes a group with no
trained token (advantage 0). A group whose G retries all earn the same reward teaches nothing
either; `zero_variance_groups` counts both.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

from reinagent.benchmarks.base import Task
from reinagent.memory import EpisodicMemory, trial_view
from reinagent.plan import reflection_examples
from reinagent.records import ModelCall, TrialRecord
from reinagent.reflector import Reflector, clean_reflection
from reinagent.rl.rollout import TokenEpisode, TokenRollout
from reinagent.strategy import ReflexionStrategy

LOSS_SPANS = ("reflection", "retry", "both")
STOP = "\n\n\n"  # the Reflector's stop string (reflector.py): the text after it is never used


@dataclass
class Pair:
    """One reflection on a failed first attempt and the retry that read it."""

    reflection: TokenEpisode  # prompt: the Reflector's; completion: the reflection (every token trained)
    retry: TokenEpisode  # prompt: REFLEXION's trial-2 prompt holding `text`; completion: the retry's turns
    text: str  # the reflection as the episodic memory holds it
    success: bool = False


@dataclass
class Group:
    """A training slot: a failed first attempt and its G pairs (no pairs: no failure was found)."""

    task: Task
    first: TokenEpisode
    pairs: list[Pair] = field(default_factory=list)


@dataclass
class Played:
    groups: list[Group]
    attempts: list[tuple[Task, TokenEpisode, bool]]  # every first attempt of the step and its verdict
    resampled: int = 0  # flat groups replaced by groups of fresh failures

    @property
    def first_attempts(self) -> int:
        return len(self.attempts)

    @property
    def first_failures(self) -> int:
        return sum(not ok for _, _, ok in self.attempts)


class ReflectRollout:
    """First attempts, reflections and retries of a transformers policy (one TokenRollout)."""

    def __init__(self, rollout: TokenRollout):
        self.rollout = rollout
        self.bench, self.agent, self.cfg, self.plan = rollout.bench, rollout.agent, rollout.cfg, rollout.plan
        # the Reflector's prompt (its model is the policy here, so no LLM is handed to it)
        examples = reflection_examples(self.bench, self.plan.task_settings.agent)
        self.reflector = Reflector(None, examples,  # type: ignore[arg-type]
                                   max_tokens=self.cfg.reflection_max_tokens)

    # --- the prompts the trial loop would build -------------------------------------------------

    def reflection_messages(self, task: Task, first: TokenEpisode) -> list[dict[str, str]]:
        """The Reflector's prompt on the failed attempt, as episode.py asks for a reflection."""
        attempt = self.agent.render_attempt(task, first.trajectory())
        return [m.model_dump() for m in self.reflector.prompt(attempt)]

    def retry_messages(self, task: Task, reflection: str) -> list[dict[str, str]]:
        """Trial 2's prompt under REFLEXION with this one reflection in the task's memory."""
        memory = EpisodicMemory(window=self.plan.config.memory_size)
        memory.add(reflection)
        view = trial_view(2, ReflexionStrategy.REFLEXION, memory, None)
        return [m.model_dump() for m in self.agent.prompt(task, view)]

    # --- playing a step ------------------------------------------------------------------------

    def judge(self, items: list[tuple[Task, TokenEpisode]]) -> list[bool]:
        """The benchmark's own verdict on each episode (never the environment's reward)."""
        from reinagent.runner import run_sync

        async def verdicts() -> list[Any]:
            return await asyncio.gather(*(self.bench.evaluate(t, e.trajectory(), self.plan.task_settings) for t, e in items))

        return [bool(v.success) for v in run_sync(verdicts())] if items else []

    def play(self, model: Any, tasks: list[Task], pool: list[Task], *, samples: int, temperature: float,
             version: int = 0, seed: int = 0, rounds: int = 0) -> Played:
        """One step's groups: group i is the i-th failure found among first attempts of `tasks`,
        each with `samples` pairs. For up to `rounds` rounds, fresh `pool` tasks replace first
        attempts that succeeded, then groups whose retries all earned the same reward (DAPO's
        dynamic sampling: such a group teaches nothing)."""
        first_t = self.cfg.first_trial_temperature
        first_t = temperature if first_t is None else first_t
        rng, used, attempts = random.Random(seed), set(), []

        def first_attempts(picks: list[Task], round_: int) -> list[Group]:
            used.update(t.task_id for t in picks)
            played = list(zip(picks, self.rollout.run(model, picks, temperature=first_t, version=version,
                                                      seed=seed * 1_000 + round_ if round_ else seed)))
            judged = [(t, e, ok) for (t, e), ok in zip(played, self.judge(played))]
            attempts.extend(judged)
            return [Group(t, e) for t, e, ok in judged if not ok]

        failed = first_attempts(tasks, 0)[: len(tasks)]
        for attempt in range(1, rounds + 1):  # a task whose first attempt succeeded gives way
            fresh = [t for t in pool if t.task_id not in used]
            if len(failed) >= len(tasks) or not fresh:
                break
            failed += first_attempts(rng.sample(fresh, min(len(tasks) - len(failed), len(fresh))), attempt)
        failed = failed[: len(tasks)]
        self._pairs(model, failed, samples, temperature, version, seed)
        resampled = 0
        for attempt in range(rounds + 1, 2 * rounds + 1):  # a flat group gives way
            flat = [i for i, g in enumerate(failed) if len({p.success for p in g.pairs}) == 1]
            fresh = [t for t in pool if t.task_id not in used]
            if not flat or not fresh:
                break
            new = first_attempts(rng.sample(fresh, min(len(flat), len(fresh))), attempt)
            self._pairs(model, new, samples, temperature, version, seed * 1_000 + attempt)
            for i, group in zip(flat, new):
                failed[i] = group
            resampled += min(len(flat), len(new))
        solved = [Group(t, e) for t, e, ok in attempts if ok]
        groups = failed + solved[: len(tasks) - len(failed)]  # a solved attempt stands in: nothing to reflect on
        for g, group in enumerate(groups):  # group g's rows: TRL's g-th group, our learner's advantages
            group.first.group = g
            for pair in group.pairs:
                pair.reflection.group = pair.retry.group = g
        return Played(groups, attempts, resampled)

    def _pairs(self, model: Any, groups: list[Group], samples: int, temperature: float, version: int,
               seed: int) -> None:
        start = self.rollout.start
        reflections = [start(gr.task, g, k, [dict(m) for m in self.reflection_messages(gr.task, gr.first)])
                       for g, gr in enumerate(groups) for k in range(samples)]
        for ep in reflections:
            ep.version = version
        self.rollout.reply_once(model, reflections, temperature=temperature,
                                max_new_tokens=self.cfg.reflection_max_tokens, seed=seed * 7 + 1)
        texts = [self._cut_at_stop(ep) for ep in reflections]
        retries = [start(groups[ep.group].task, ep.group, ep.sample, self.retry_messages(groups[ep.group].task, text))
                   for ep, text in zip(reflections, texts)]
        self.rollout.play_out(model, retries, [gr.task for gr in groups], temperature=temperature, version=version,
                              seed=seed * 7 + 2)
        verdicts = self.judge([(groups[ep.group].task, ep) for ep in retries])
        for ref, retry, text, ok in zip(reflections, retries, texts, verdicts):
            retry.success, retry.reward = ok, float(ok)  # the reward is the retry's success, 1 or 0
            ref.success, ref.reward = ok, float(ok)
            groups[ref.group].pairs.append(Pair(ref, retry, text, ok))

    def _cut_at_stop(self, ep: TokenEpisode) -> str:
        """Drop the tokens after the Reflector's stop string (the trial loop never sees them);
        return the reflection as Reflector.reflect cleans it."""
        decode = self.rollout.tok.decode
        text = decode(ep.completion_ids, skip_special_tokens=True)
        if STOP in text:
            keep = next(k for k in range(1, len(ep.completion_ids) + 1)
                        if STOP in decode(ep.completion_ids[:k], skip_special_tokens=True))
            ep.completion_ids, ep.env_mask, ep.logprobs = (ep.completion_ids[:keep], ep.env_mask[:keep],
                                                           ep.logprobs[:keep])
            text = decode(ep.completion_ids, skip_special_tokens=True).split(STOP)[0]
            ep.messages[-1] = {"role": "assistant", "content": text.strip()}
        return clean_reflection(text)


# --- what is trained, what is measured, what is kept ------------------------------------------

def training_rows(groups: list[Group], loss: str, samples: int) -> list[TokenEpisode]:
    """The sequences GRPO trains on, group by group (consecutive: TRL's groups), per `loss`."""
    if loss not in LOSS_SPANS:
        raise ValueError(f"unknown reflect_loss {loss!r}; valid: {', '.join(LOSS_SPANS)}")
    rows: list[TokenEpisode] = []
    per_pair = 2 if loss == "both" else 1
    for g, group in enumerate(groups):
        if not group.pairs:  # the first attempt stands in, with nothing trained and one reward: no signal
            rows += [dataclasses.replace(group.first, group=g, sample=k, reward=0.0, env_mask=[0] * len(group.first.env_mask))
                     for k in range(samples * per_pair)]
            continue
        for pair in group.pairs:
            rows += {"reflection": [pair.reflection], "retry": [pair.retry], "both": [pair.reflection, pair.retry]}[loss]
    return rows


def step_columns(played: Played, loss: str) -> dict[str, Any]:
    """The reflect method's metrics columns; reward_* and success_rate are the retries'."""
    pairs = [p for g in played.groups for p in g.pairs]
    rewards = [float(p.success) for p in pairs]
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards)) if rewards else 0.0

    def tokens(eps: list[TokenEpisode]) -> float:
        return sum(e.generated_tokens for e in eps) / len(eps) if eps else 0.0

    return {"method": "reflect", "reflect_loss": loss, "first_attempts": played.first_attempts,
            "first_failures": played.first_failures, "failure_groups": sum(bool(g.pairs) for g in played.groups),
            "pairs": len(pairs), "retry_successes": int(sum(rewards)), "retry_success": mean,
            "resampled_groups": played.resampled,
            "reward_mean": mean, "reward_std": std, "success_rate": mean,
            "reflection_tokens_mean": tokens([p.reflection for p in pairs]),
            "retry_tokens_mean": tokens([p.retry for p in pairs])}


def log_step(store: Any, step: int, played: Played, started: float) -> None:
    """Every first attempt (`TASK@first`) and every retry (`TASK@K`, the reflection it read in
    `memory` and `trajectory.extra`) of the step, as TrialRecords with trial = step."""
    now = time.time()

    def gold(task: Task) -> dict[str, str]:  # kept for reflect_stats: does a reflection state it?
        answer = getattr(task, "answer", None)
        return {} if answer is None else {"gold": str(answer)}

    for task, first, ok in played.attempts:
        store.append(TrialRecord(
            task_id=f"{first.task_id}@first", trial=step, success=ok, reward=float(ok), answer=first.answer,
            trajectory=first.trajectory(), started_at=started, finished_at=now,
            evaluation={"turns": first.turns, "end_reason": first.end_reason, "first_attempt": True, **gold(task)}))
    for group in played.groups:
        first = group.first
        for k, pair in enumerate(group.pairs):
            trajectory = pair.retry.trajectory()
            ref = pair.reflection
            trajectory.calls.insert(0, ModelCall(role="reflector", model="policy", prompt_tokens=len(ref.prompt_ids),
                                                 completion_tokens=ref.generated_tokens))
            trajectory.extra.update(reflection=pair.text, reflection_tokens=ref.generated_tokens,
                                    first_answer=first.answer)
            store.append(TrialRecord(
                task_id=f"{first.task_id}@{k}", trial=step, success=pair.success, reward=float(pair.success),
                answer=pair.retry.answer, trajectory=trajectory, memory=[pair.text] if pair.text else [],
                evaluation={"turns": pair.retry.turns, "end_reason": pair.retry.end_reason, **gold(group.task)},
                started_at=started, finished_at=now))


def reflect_line(row: dict[str, Any], steps: int) -> str:
    """The line `rl train` prints per step of the reflect method."""
    return (f"step {row['step']}/{steps}: first attempts {row['first_failures']}/{row['first_attempts']} failed; "
            f"retry success {row['retry_successes']}/{row['pairs']} ({row['retry_success']:.1%}) over "
            f"{row['failure_groups']} failures; reflection {row['reflection_tokens_mean']:.0f} tokens; "
            f"loss {row['loss']:.4f}, kl {row['kl']:.4f}, rollout {row['rollout_s']:.1f}s, train {row['train_s']:.1f}s "
            f"({row['tokens_per_s']:.0f} tokens/s)")
