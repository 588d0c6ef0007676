"""One train_metrics.jsonl row per step, the same columns whichever trainer stepped (loop.py for
ours, trl_grpo.MetricsCallback for TRL's), and the signal check that goes with it: a group whose
episodes all earned the same reward has advantage 0 everywhere, so it teaches nothing."""

from __future__ import annotations

import math
import time
from typing import Any

from reinagent.rl.rollout import TokenEpisode


def zero_variance_groups(episodes: list[TokenEpisode]) -> tuple[int, int]:
    """(groups whose rewards are all equal, groups): the first carry no GRPO learning signal."""
    groups: dict[int, set[float]] = {}
    for ep in episodes:
        groups.setdefault(ep.group, set()).add(round(ep.reward, 9))
    return sum(len(r) == 1 for r in groups.values()), len(groups)


def metrics_row(step: int, episodes: list[TokenEpisode], *, loss: float, kl: float, clip_frac: float,
                tokens: int, trained_tokens: int, rollout_s: float, train_s: float, version: int,
                **extra: Any) -> dict[str, Any]:
    """The row: the step's losses (from whichever trainer) with its episodes' rewards and timings.
    `tokens` are the tokens the forward/backward passes read; `extra` adds trainer-specific columns."""
    rewards = [e.reward for e in episodes]
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    generated = sum(e.generated_tokens for e in episodes)
    flat, groups = zero_variance_groups(episodes)
    return {
        "step": step, "loss": loss, "reward_mean": mean, "reward_std": std,
        "success_rate": sum(e.success for e in episodes) / len(episodes), "kl": kl, "clip_frac": clip_frac,
        "tokens_per_s": tokens / train_s if train_s else 0.0,
        "rollout_tokens_per_s": generated / rollout_s if rollout_s else 0.0, "episodes": len(episodes),
        "generated_tokens": generated, "trained_tokens": trained_tokens,
        "turns_mean": sum(e.turns for e in episodes) / len(episodes), "groups": groups,
        "zero_variance_groups": flat, "policy_version": version,
        "staleness": version - min(e.version for e in episodes),
        "rollout_s": rollout_s, "train_s": train_s, **extra, "time": time.time(),
    }


def step_line(row: dict[str, Any], steps: int) -> str:
    """The line `rl train` prints per step."""
    if row.get("method") == "reflect":
        from reinagent.rl.reflect import reflect_line

        return reflect_line(row, steps)
    return (f"step {row['step']}/{steps}: reward {row['reward_mean']:.3f} (std {row['reward_std']:.3f}), "
            f"loss {row['loss']:.4f}, kl {row['kl']:.4f}, rollout {row['rollout_s']:.1f}s "
            f"({row['rollout_tokens_per_s']:.1f} tokens/s), train {row['train_s']:.1f}s "
            f"({row['tokens_per_s']:.0f} tokens/s), staleness {row['staleness']}"
            + (f", {row['resampled_groups']} flat groups resampled" if row.get("resampled_groups") else ""))


def signal_warning(row: dict[str, Any]) -> str | None:
    """A warning when some of the step's groups had no reward variance (None when all had some)."""
    flat, groups = row.get("zero_variance_groups", 0), row.get("groups", 0)
    if not flat:
        return None
    what = "no learning signal this step" if flat == groups else "they add no learning signal"
    return (f"warning: step {row['step']}: {flat} of {groups} groups had no reward variance (every episode "
            f"earned the same reward): {what}; raise group_size or temperature, or pick harder/easier tasks")
