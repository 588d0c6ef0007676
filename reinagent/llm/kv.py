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
        self._start = 0  # where the keys begin in the buffer; columns before it are room to widen
        if keys is not None and values is not None:
            self._place(keys, values, max(reserve, keys.shape[-2]))

    def _place(self, keys: torch.Tensor, values: torch.Tensor, capacity: int) -> None:
        b, h, t, d = keys.shape
        self._kbuf = keys.new_empty(b, h, capacity, d)
        self._vbuf = values.new_empty(b, h, capacity, values.shape[-1])
        self._kbuf[:, :, :t] = keys
        self._vbuf[:, :, :t] = values
        self._start = 0
        self.keys, self.values = self._kbuf[:, :, :t], self._vbuf[:, :, :t]
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True

    @classmethod
    def adopt(cls, kbuf: torch.Tensor, vbuf: torch.Tensor, start: int, length: int) -> SlabLayer:
        """A layer over buffers already filled from column `start` for `length` columns (no copy)."""
        layer = cls()
        layer._kbuf, layer._vbuf, layer._start = kbuf, vbuf, start
        layer.keys, layer.values = kbuf[:, :, start : start + length], vbuf[:, :, start : start + length]
        layer.dtype, layer.device, layer.is_initialized = kbuf.dtype, kbuf.device, True
        return layer

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized or self._kbuf is None:
            self._place(key_states, value_states, key_states.shape[-2])
            return self.keys, self.values
        n, m = self.keys.shape[-2], self.keys.shape[-2] + key_states.shape[-2]
        if self._start + m > self._kbuf.shape[-2] or self._kbuf[:, :, self._start :].data_ptr() != self.keys.data_ptr():
            self._place(self.keys, self.values, max(m, 2 * n, 16))
        s = self._start
        self._kbuf[:, :, s + n : s + m] = key_states
        self._vbuf[:, :, s + n : s + m] = value_states
        self.keys, self.values = self._kbuf[:, :, s : s + m], self._vbuf[:, :, s : s + m]
        return self.keys, self.values

    @property
    def room(self) -> int:
        """Free columns before the keys, which `widen` may take."""
        return self._start

    def widen(self, columns: int) -> None:
        """Prepend `columns` zero columns from the room before the keys (see `BatchKV.put`)."""
        assert self._kbuf is not None and self._vbuf is not None and columns <= self._start
        s, e = self._start - columns, self._start + self.keys.shape[-2]
        self._kbuf[:, :, s : self._start] = 0
        self._vbuf[:, :, s : self._start] = 0
        self._start = s
        self.keys, self.values = self._kbuf[:, :, s:e], self._vbuf[:, :, s:e]


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


# Columns kept free before a rebuilt batch: a later, longer row (an episode's next step, up to
# this many tokens longer than every running row) then takes a finished row's slot in place
# instead of copying the whole batch (a copy took 40-90 ms for 8 rows of ~450 tokens).
JOIN_ROOM = 256


class BatchKV:
    """The caches of the running requests, one row each, right-aligned: every row's newest token
    sits in the last column, so one decoding step appends one column for all rows at once.

    A finished row may stay in place (computed, then ignored) until a newcomer takes its slot
    (`put`, no copy of the other rows) or the batch is compacted (`rebuild`)."""

    def __init__(self) -> None:
        self.layers: list[SlabLayer] = []
        self.mask = torch.zeros(0, 0, dtype=torch.bool)
        self.cache: Cache | None = None

    @property
    def rows(self) -> int:
        return self.mask.shape[0]

    @property
    def width(self) -> int:
        return self.mask.shape[1]

    def rebuild(self, keep: list[int], new: Sequence[KV] = ()) -> None:
        """Copy rows `keep` and the `new` rows (prefilled caches of batch size 1) into fresh
        buffers, left-padding whoever is shorter and dropping columns that only padded."""
        if not keep and not new:
            self.__init__()
            return
        lengths = [self.width - int(self.mask[i].int().argmax()) for i in keep] + [row[0][0].shape[-2] for row in new]
        t, b = max(lengths), len(lengths)
        ref = new[0][0] if new else (self.layers[0].keys, self.layers[0].values)
        mask = torch.zeros(b, t, dtype=torch.bool, device=ref[0].device)
        for i, n in enumerate(lengths):
            mask[i, t - n :] = True
        layers = []
        room, cols = JOIN_ROOM, JOIN_ROOM + t + 64  # room to widen on the left, 64 steps on the right
        for li in range(len(new[0]) if new else len(self.layers)):
            k0, v0 = new[0][li] if new else (self.layers[li].keys, self.layers[li].values)
            keys = k0.new_empty(b, k0.shape[1], cols, k0.shape[-1])
            values = v0.new_empty(b, v0.shape[1], cols, v0.shape[-1])
            rows = [(self.layers[li].keys[old : old + 1, :, self.width - w :], self.layers[li].values[old : old + 1, :, self.width - w :])
                    for old, w in zip(keep, lengths[: len(keep)], strict=True)] + [row[li] for row in new]
            for i, (k, v) in enumerate(rows):
                w = k.shape[-2]
                # Zeros, not garbage, in the padding: masked keys still enter q.k before the mask
                # applies and a NaN there would poison the row.
                keys[i, :, room : room + t - w] = 0
                values[i, :, room : room + t - w] = 0
                keys[i, :, room + t - w : room + t] = k[0]
                values[i, :, room + t - w : room + t] = v[0]
            layers.append(SlabLayer.adopt(keys, values, room, t))
        self.layers, self.mask = layers, mask
        self.cache = make_cache(layers)

    def put(self, slot: int, row: KV) -> bool:
        """Write a new row into the slot of a finished one, widening the batch into the room left
        of it when the row is longer; False when there is not room enough."""
        n = row[0][0].shape[-2]
        if n > self.width:  # the next step of an episode is longer than every running row
            if n - self.width > self.layers[0].room:
                return False
            for layer in self.layers:
                layer.widen(n - self.width)
            self.mask = torch.cat([self.mask.new_zeros(self.rows, n - self.width), self.mask], dim=1)
        t = self.width
        for layer, (k, v) in zip(self.layers, row, strict=True):
            layer.keys[slot, :, : t - n] = 0
            layer.values[slot, :, : t - n] = 0
            layer.keys[slot, :, t - n :] = k[0]
            layer.values[slot, :, t - n :] = v[0]
        self.mask[slot] = False
        self.mask[slot, t - n :] = True
        return True

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

    def lookup(self, tokens: list[int]) -> tuple[int, int | None, KV]:
        """The longest cached prefix of `tokens` (leaving at least one token to compute logits
        from): its length, the entry it came from, and its keys/values."""
        if not self.entries or len(tokens) < 2:
            return 0, None, []
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
            return 0, None, []
        self.entries.move_to_end(best_key)
        self.hits += 1
        self.reused_tokens += best
        return best, best_key, [(k[:, :, :best], v[:, :, :best]) for k, v in self.entries[best_key].kv]

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
