"""The local engine's inference precision, chosen for the CPU it runs on.

OpenVINO's CPU plugin computes in bf16 wherever the CPU has bf16 instructions (AMX or
AVX512-BF16) unless told otherwise, and in f32 everywhere else. On an Intel CPU with AMX its bf16
decoding is slower than f32, and on an AMD Zen 4 (AVX512-BF16, no AMX) no faster (measured:
perf/precision.py interleaves the two in one run; docs/models.md has the table per CPU kind): one
decoded token is a batch of one, where AMX's tiles sit mostly empty and bf16 adds conversions.
Agent runs are decode-bound (a trial decodes hundreds of tokens per prompt), so `fast` asks for f32
there too, the rule the measurement supports (and f32 is the reference's precision); a CPU without
bf16 instructions is left to the plugin, which picks f32 itself.

REINAGENT_OV_PRECISION_HINT (f32, bf16 or f16) overrides the rule, for measuring or for a CPU
where bf16 wins. The choice is said in one stderr line when the engine loads, and recorded in
the engine's load info.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from reinagent.errors import ConfigError

HINTS = ("f32", "bf16", "f16")
ENV = "REINAGENT_OV_PRECISION_HINT"
BF16_FLAGS = ("amx_bf16", "avx512_bf16")


@dataclass(frozen=True)
class PrecisionChoice:
    hint: str | None  # INFERENCE_PRECISION_HINT to set (None: the plugin's own choice, f32 here)
    reason: str  # one line: what was chosen and why

    @property
    def effective(self) -> str:
        return self.hint or "f32"

    def properties(self, precision: str) -> dict[str, str]:
        """The CPU plugin's properties for this choice; `exact` adds an f32 KV cache (the
        plugin's default cache is u8)."""
        props = {} if self.hint is None else {"INFERENCE_PRECISION_HINT": self.hint}
        return props | ({"KV_CACHE_PRECISION": "f32"} if precision == "exact" else {})

    def say(self) -> None:
        """The choice on stderr, once per process (every engine of a run loads with the same)."""
        if self.reason not in _SAID:
            _SAID.add(self.reason)
            print(f"local engine: {self.reason}", file=sys.stderr, flush=True)


_SAID: set[str] = set()


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (/proc/cpuinfo; empty where there is none, e.g. macOS)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def choose(precision: str, flags: frozenset[str] | None = None, env: str | None = None) -> PrecisionChoice:
    """The inference precision for `precision` (fast | exact) on a CPU with `flags`."""
    if precision == "exact":
        return PrecisionChoice("f32", "exact: f32 arithmetic and an f32 KV cache")
    wanted = (os.environ.get(ENV, "") if env is None else env).strip().lower()
    if wanted:
        if wanted not in HINTS:
            raise ConfigError(f"{ENV}={wanted!r} is not a precision; valid: {', '.join(HINTS)}")
        return PrecisionChoice(wanted, f"{wanted} inference ({ENV})")
    flags = cpu_flags() if flags is None else flags
    bf16 = [f for f in BF16_FLAGS if f in flags]
    if bf16:
        # measured: slower with AMX, no faster on AVX512-BF16 alone (an AMD Zen 4)
        speed = "slower" if "amx_bf16" in flags else "no faster"
        return PrecisionChoice("f32", f"f32 inference: this CPU has {'/'.join(bf16)}, where the plugin's "
                                      f"bf16 decodes {speed} (perf/precision.py; {ENV}=bf16 to override)")
    return PrecisionChoice(None, "f32 inference (no bf16 instructions on this CPU: the plugin's own choice)")
