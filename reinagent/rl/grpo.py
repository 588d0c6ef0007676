"""GRPO over our multi-turn token rollouts (TRL's loss, written for episodes with feedback tokens).

TRL's GRPOTrainer generates one completion per prompt and scores it with reward functions; it has
no notion of an environment that answers in the middle of a completion, whose tokens must not be
trained. So the loss is ours, written as TRL 1.x computes it (trl/trainer/grpo_trainer.py,
defaults of GRPOConfig): for each group of G episodes of one task,

    A_i = (r_i - mean(r)) / (std(r) + 1e-4)                      scale_rewards="group"
    ratio = exp(logp - logp_old)                                  per generated token
    l = -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A) + beta * KL
    KL = exp(logp_ref - logp) - (logp_ref - logp) - 1             the k3 estimator
    loss = sum(l * mask) / sum(mask)                               loss_type="dapo": over all tokens

where `mask` is the episode's env_mask: environment and feedback tokens (and the prompt) carry no
loss. Log-probs are taken at the sampling temperature (logits / T), as TRL does. With one update
per batch `logp_old` is `logp` detached (ratio 1, TRL's num_iterations=1); in async mode it is the
behaviour policy's log-prob from the rollout, one version older, and the clip bounds the update.

`method="sft"` is rejection-sampling fine-tuning with the same masks: the mean negative log-prob
of the policy's own *successful* episodes (failed ones are dropped).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from reinagent.rl.rollout import TokenEpisode


@dataclass
class Batch:
    """Episodes as tensors: prompts left-padded, completions right-padded, so every row's
    completion starts at the same column (logits are needed only from there on)."""

    input_ids: Any
    attention_mask: Any
    position_ids: Any
    loss_mask: Any  # [N, C] 1 on generated completion tokens
    old_logps: Any  # [N, C] behaviour log-probs
    advantages: Any  # [N]
    completion_width: int


def group_advantages(episodes: list[TokenEpisode]) -> list[float]:
    """(r - group mean) / (group std + 1e-4); a group whose rewards are all equal gets 0 (no signal)."""
    groups: dict[int, list[float]] = {}
    for ep in episodes:
        groups.setdefault(ep.group, []).append(ep.reward)
    stats = {}
    for g, rewards in groups.items():
        mean = sum(rewards) / len(rewards)
        var = sum((r - mean) ** 2 for r in rewards) / max(1, len(rewards) - 1)  # unbiased, as torch.std
        stats[g] = (mean, math.sqrt(var))
    return [(ep.reward - stats[ep.group][0]) / (stats[ep.group][1] + 1e-4) for ep in episodes]


def make_batch(episodes: list[TokenEpisode], advantages: list[float], pad_id: int) -> Batch:
    import torch

    p_width = max(len(e.prompt_ids) for e in episodes)
    c_width = max(1, max(len(e.completion_ids) for e in episodes))
    ids, attn, mask, old = [], [], [], []
    for e in episodes:
        left, right = p_width - len(e.prompt_ids), c_width - len(e.completion_ids)
        ids.append([pad_id] * left + e.prompt_ids + e.completion_ids + [pad_id] * right)
        attn.append([0] * left + [1] * (len(e.prompt_ids) + len(e.completion_ids)) + [0] * right)
        mask.append(e.env_mask + [0] * right)
        old.append(e.logprobs + [0.0] * right)
    attention = torch.tensor(attn)
    # positions as generate() computes them from the mask, so left padding shifts nothing
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    return Batch(torch.tensor(ids), attention, positions, torch.tensor(mask, dtype=torch.float32),
                 torch.tensor(old, dtype=torch.float32), torch.tensor(advantages, dtype=torch.float32), c_width)


def completion_logps(model: Any, batch: Batch, rows: slice, temperature: float) -> Any:
    """Per-token log-probs [n, C] of the completion tokens of `rows` under `model`."""
    import torch

    c = batch.completion_width
    ids = batch.input_ids[rows]
    logits = model(input_ids=ids, attention_mask=batch.attention_mask[rows], position_ids=batch.position_ids[rows],
                   logits_to_keep=c + 1, use_cache=False).logits[:, :-1].float()
    logits = logits / temperature
    targets = ids[:, -c:]
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def token_loss(logps: Any, old_logps: Any, ref_logps: Any | None, advantages: Any, mask: Any,
               clip_eps: float, kl_coef: float) -> tuple[Any, Any, Any]:
    """Per-token GRPO loss [n, C] (masked positions zeroed), the per-token KL and the clipped flags."""
    import torch

    ratio = torch.exp(logps - old_logps)
    adv = advantages.unsqueeze(1)
    unclipped, clipped = ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv
    loss = -torch.min(unclipped, clipped)
    kl = torch.zeros_like(logps)
    if ref_logps is not None:
        delta = ref_logps - logps
        kl = torch.exp(delta) - delta - 1
        loss = loss + kl_coef * kl
    # torch.where, not a product: a NaN/inf on a masked (environment) token must not leak in
    return torch.where(mask > 0, loss, torch.zeros_like(loss)), kl, (clipped.ne(unclipped) & (mask > 0))


@dataclass
class StepStats:
    loss: float
    kl: float
    clip_frac: float
    tokens: int  # non-pad tokens read by the forward/backward passes
    trained_tokens: int
    train_s: float


class Learner:
    """Owns the optimiser; one `update` per batch of episodes (GRPO or rejection-sampled SFT)."""

    def __init__(self, model: Any, ref_model: Any | None, tokenizer: Any, *, learning_rate: float, clip_eps: float,
                 kl_coef: float, temperature: float, micro_batch: int, method: str = "grpo"):
        import torch

        self.model, self.ref, self.tok = model, ref_model, tokenizer
        self.clip_eps, self.kl_coef, self.micro = clip_eps, kl_coef, micro_batch
        self.temperature = temperature if temperature > 0 else 1.0
        self.method = method
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=learning_rate, weight_decay=0.0)
        self.version = 0  # optimiser steps taken: the policy version

    def update(self, episodes: list[TokenEpisode], *, on_policy: bool = True) -> StepStats:
        """One optimiser step. `on_policy`: the episodes came from the current weights, so the
        ratio is 1 (logp_old = logp detached); otherwise their recorded behaviour log-probs."""
        import torch

        started = time.perf_counter()
        if self.method == "sft":
            episodes = [e for e in episodes if e.success]
            advantages = [1.0] * len(episodes)
        else:
            advantages = group_advantages(episodes)
        kept = [(e, a) for e, a in zip(episodes, advantages) if e.completion_ids]
        episodes, advantages = [e for e, _ in kept], [a for _, a in kept]
        trained = sum(e.generated_tokens for e in episodes)
        if not episodes or trained == 0:
            return StepStats(0.0, 0.0, 0.0, 0, 0, time.perf_counter() - started)
        batch = make_batch(episodes, advantages, self.pad_id)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        total_loss = total_kl = clipped = 0.0
        for start in range(0, len(episodes), self.micro):
            rows = slice(start, start + self.micro)
            mask = batch.loss_mask[rows]
            logps = completion_logps(self.model, batch, rows, self.temperature)
            if self.method == "sft":
                per_token = torch.where(mask > 0, -logps, torch.zeros_like(logps))
                kl, clip_flags = torch.zeros_like(logps), torch.zeros_like(mask, dtype=torch.bool)
            else:
                old = logps.detach() if on_policy else batch.old_logps[rows]
                ref = None
                if self.ref is not None and self.kl_coef > 0:
                    with torch.no_grad():
                        ref = completion_logps(self.ref, batch, rows, self.temperature)
                per_token, kl, clip_flags = token_loss(logps, old, ref, batch.advantages[rows], mask,
                                                       self.clip_eps, self.kl_coef)
            loss = per_token.sum() / trained  # "dapo": every generated token of the batch weighs the same
            loss.backward()
            total_loss += float(loss.detach())
            total_kl += float((kl.detach() * mask).sum())
            clipped += float(clip_flags.sum())
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.version += 1
        return StepStats(loss=total_loss, kl=total_kl / trained, clip_frac=clipped / trained,
                         tokens=int(batch.attention_mask.sum()), trained_tokens=trained,
                         train_s=time.perf_counter() - started)
