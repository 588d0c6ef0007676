"""Key/value caches for the local batching engine: a growing per-layer slab, the batch of running
requests (left-padded, right-aligned) and a cache of prompt prefixes reused across requests.

Only imported by the engine's worker thread, once torch is known to be installed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

KV = list[tuple[torch.Tensor, torch.Tensor]]  # per model layer: keys, values of shape (B, H, T, D)


class SlabLayer(DynamicLayer):
    """A DynamicLayer whose keys/values are views of a buffer that grows by doubling.

    DynamicLayer appends with torch.cat, copying the whole cache at every decoding step; with eight
    sequences of a few hundred tokens that copy costs as much as the attention itself on a CPU.
    """

    def __init__(self, keys: torch.Tensor | None = None, values: torch.Tensor | None = None, reserve: int = 0):
        super().__init__()
        self._kbuf: torch.Tensor | None = None
        self._vbuf: torch.Tensor | None = None
        if keys is not None and values is not None:
            self._place(keys, values, max(reserve, keys.shape[-2]))

    def _place(self, keys: torch.Tensor, values: torch.Tensor, capacity: int) -> None:
        b, h, t, d = keys.shape
        self._kbuf = keys.new_empty(b, h, capacity, d)
        self._vbuf = values.new_empty(b, h, capacity, values.shape[-1])
        self._kbuf[:, :, :t] = keys
        self._vbuf[:, :, :t] = values
        self.keys, self.values = self._kbuf[:, :, :t], self._vbuf[:, :, :t]
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized or self._kbuf is None:
            self._place(key_states, value_states, key_states.shape[-2])
            return self.keys, self.values
        n, m = self.keys.shape[-2], self.keys.shape[-2] + key_states.shape[-2]
        if m > self._kbuf.shape[-2] or self._kbuf.data_ptr() != self.keys.data_ptr():
            self._place(self.keys, self.values, max(m, 2 * n, 16))
        self._kbuf[:, :, n:m] = key_states
        self._vbuf[:, :, n:m] = value_states
        self.keys, self.values = self._kbuf[:, :, :m], self._vbuf[:, :, :m]
        return self.keys, self.values


def make_cache(layers: list[SlabLayer]) -> Cache:
    cache = DynamicCache()
    cache.layers = layers  # type: ignore[assignment]
    cache.layer_class_to_replicate = SlabLayer
    return cache


def empty_cache() -> Cache:
    cache = DynamicCache()
    cache.layer_class_to_replicate = SlabLayer
    return cache


def kv_of(cache: Cache) -> KV:
    return [(layer.keys, layer.values) for layer in cache.layers]


class BatchKV:
    """The caches of the running requests, one row each, right-aligned: every row's newest token
    sits in the last column, so one decoding step appends one column for all rows at once."""

    def __init__(self) -> None:
        self.layers: list[SlabLayer] = []
        self.mask = torch.zeros(0, 0, dtype=torch.bool)
        self.cache: Cache | None = None

    @property
    def rows(self) -> int:
        return self.mask.shape[0]

    def add(self, rows: Sequence[KV]) -> None:
        """Append rows (each a prefilled cache of batch size 1), left-padding whoever is shorter."""
        if not rows:
            return
        lengths = [row[0][0].shape[-2] for row in rows]
        old_t = self.mask.shape[1]
        t = max([old_t, *lengths])
        b = self.rows + len(rows)
        device = rows[0][0][0].device
        mask = torch.zeros(b, t, dtype=torch.bool, device=device)
        mask[: self.rows, t - old_t :] = self.mask
        for i, n in enumerate(lengths):
            mask[self.rows + i, t - n :] = True
        layers = []
        for li, (k0, v0) in enumerate(rows[0]):
            h, d, dv = k0.shape[1], k0.shape[-1], v0.shape[-1]
            # Zeros, not garbage, in the padding: masked keys still enter q.k before the mask applies
            # and a NaN there would poison the row.
            keys = k0.new_zeros(b, h, t, d)
            values = v0.new_zeros(b, h, t, dv)
            if self.rows:
                keys[: self.rows, :, t - old_t :] = self.layers[li].keys
                values[: self.rows, :, t - old_t :] = self.layers[li].values
            for i, row in enumerate(rows):
                k, v = row[li]
                keys[self.rows + i, :, t - k.shape[-2] :] = k[0]
                values[self.rows + i, :, t - v.shape[-2] :] = v[0]
            layers.append(SlabLayer(keys, values, reserve=t + 64))
        self.layers, self.mask = layers, mask
        self.cache = make_cache(layers)

    def keep(self, indices: list[int]) -> None:
        """Drop finished rows, then the leading columns that only padded them."""
        if not indices:
            self.__init__()
            return
        idx = torch.tensor(indices, device=self.mask.device)
        mask = self.mask.index_select(0, idx)
        start = int(mask.any(0).int().argmax())
        self.mask = mask[:, start:]
        layers = []
        for layer in self.layers:
            keys = layer.keys.index_select(0, idx)[:, :, start:]
            values = layer.values.index_select(0, idx)[:, :, start:]
            layers.append(SlabLayer(keys, values, reserve=keys.shape[-2] + 64))
        self.layers = layers
        self.cache = make_cache(layers)

    def grow_mask(self) -> torch.Tensor:
        ones = torch.ones(self.rows, 1, dtype=torch.bool, device=self.mask.device)
        self.mask = torch.cat([self.mask, ones], dim=1)
        return self.mask


@dataclass
class _Prefix:
    tokens: torch.Tensor
    kv: KV
    nbytes: int


class PrefixCache:
    """Prompt caches of recent requests, so that a prompt sharing a prefix with one of them (the
    few-shot block of every episode, or the previous step of the same episode) only prefills the rest.
    Least recently used entries go first once `budget_bytes` is exceeded."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget = budget_bytes
        self.entries: OrderedDict[int, _Prefix] = OrderedDict()
        self.nbytes = 0
        self.hits = 0
        self.reused_tokens = 0
        self._next = 0

    def lookup(self, tokens: list[int]) -> tuple[int, KV]:
        """The longest cached prefix of `tokens`, leaving at least one token to compute logits from."""
        if not self.entries or len(tokens) < 2:
            return 0, []
        query = torch.tensor(tokens[:-1])
        best, best_key = 0, None
        for key, entry in self.entries.items():
            m = min(len(query), len(entry.tokens))
            if m <= best:
                continue
            same = query[:m] == entry.tokens[:m]
            n = m if bool(same.all()) else int((~same).int().argmax())
            if n > best:
                best, best_key = n, key
        if best_key is None:
            return 0, []
        self.entries.move_to_end(best_key)
        self.hits += 1
        self.reused_tokens += best
        return best, [(k[:, :, :best], v[:, :, :best]) for k, v in self.entries[best_key].kv]

    def store(self, tokens: list[int], kv: KV) -> None:
        if self.budget <= 0:
            return
        new = torch.tensor(tokens)
        nbytes = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)
        if nbytes > self.budget:
            return
        # An entry that is a prefix of the new prompt (the same episode's previous step) is superseded.
        for key in [k for k, e in self.entries.items() if len(e.tokens) <= len(new) and bool((new[: len(e.tokens)] == e.tokens).all())]:
            self.nbytes -= self.entries.pop(key).nbytes
        while self.entries and self.nbytes + nbytes > self.budget:
            self.nbytes -= self.entries.popitem(last=False)[1].nbytes
        self.entries[self._next] = _Prefix(new, kv, nbytes)
        self._next += 1
        self.nbytes += nbytes
