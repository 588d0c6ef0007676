"""Prefilling prompts for the batching engine, one at a time or several together.

Requests that arrive together usually share their few-shot block, which the prefix cache already
holds after the first of them; what is left of each prompt is a short tail. Prefilling a tail of
30 tokens on a CPU costs about two decoding steps, almost all of it spent streaming the weights,
so the tails of several requests are prefilled in one forward pass over a batch that shares the
cached prefix. Tails are right-padded: under causal attention no real token sees the padding
after it, so no mask is needed, and each row's logits are read at its own last token.

Only imported by the engine's worker thread, once torch is known to be installed.
"""

from __future__ import annotations

from typing import Any

import torch

from reinagent.llm.kv import KV, SlabLayer, empty_cache, kv_of, make_cache

# A tail longer than this is prefilled on its own: it is compute-bound, so batching it saves
# little, and it would make the shorter tails beside it pay for its padding.
GROUP_TAIL = 256


def prefill(model: Any, prompts: list[list[int]], n: int, past: KV) -> list[tuple[torch.Tensor, KV]]:
    """Run `prompts` (all starting with the same `n` tokens, whose cache is `past`) through the
    model; return each one's next-token logits and its own cache of batch size 1."""
    device = model.device
    rows = len(prompts)
    tails = [p[n:] for p in prompts]
    width = max(len(t) for t in tails)
    if n:
        cache = make_cache([SlabLayer(k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1), reserve=n + width) for k, v in past])
    else:
        cache = empty_cache()
    ids = torch.tensor([t + [0] * (width - len(t)) for t in tails], device=device)
    positions = torch.arange(n, n + width, device=device).expand(rows, -1)
    last = torch.tensor([[len(t) - 1] for t in tails], device=device)
    out = model(input_ids=ids, position_ids=positions, past_key_values=cache, use_cache=True, logits_to_keep=1 if rows == 1 else last)
    kv = kv_of(cache)
    if rows == 1:
        return [(out.logits[0, -1], kv)]
    # Copies, not views: a view would keep the whole group's buffers alive in the prefix cache.
    return [(out.logits[i, -1], [(k[i : i + 1, :, : n + len(t)].clone(), v[i : i + 1, :, : n + len(t)].clone()) for k, v in kv]) for i, t in enumerate(tails)]
