"""The local engine's inference precision, chosen for the CPU it runs on.

OpenVINO's CPU plugin computes in bf16 wherever the CPU has bf16 instructions (AMX or
AVX512-BF16) unless told otherwise, and in f32 everywhere else. What is faster depends on the CPU
and on the load, so the rule follows measurements (perf/precision.py interleaves the two hints in
one run, one stream and N requests in flight; docs/models.md has the table per CPU kind):

- an Intel CPU with AMX: f32. There bf16 decoded one stream at 5.5 tok/s against f32's 8.6: one
  decoded token is a batch of one, where AMX's tiles sit mostly empty and bf16 adds conversions.
  (Requests in flight were not measured in bf16 on that CPU.)
- a CPU with AVX512-BF16 and no AMX (an AMD Zen 4): bf16. There bf16 decodes one stream a little
  slower (0.92-0.94 of f32) but prefills faster, and with requests in flight, as runs have them
  (8 by default, 32 in the paired HumanEval run), it moves 1.34x (8) and 1.13x (32) f32's
  tokens/s: the matrices the plugin cannot give 8-bit activations (the Q6_K output matrix, the
  split's corrections, llm/gguf_exact.py) and the elementwise work run at bf16's rate.
- a CPU without bf16 instructions: the plugin's own choice, f32.

bf16 rounds activations to 8 significant bits, so greedy text differs from f32's; `exact` is always
f32 arithmetic with an f32 KV cache. REINAGENT_OV_PRECISION_HINT (f32, bf16 or f16) overrides the
rule. The choice is said in one stderr line when the engine loads, recorded in the engine's load
info, and part of the response cache's model identity when it is not f32 (`plugin_identity`).
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from reinagent.errors import ConfigError, env_count

HINTS = ("f32", "bf16", "f16")
ENV = "REINAGENT_OV_PRECISION_HINT"
DQ_ENV = "REINAGENT_OV_DQ_GROUP"
BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # the plugin computes bf16 by default where it finds one


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
    if "amx_bf16" in flags:  # measured: bf16 decodes slower with AMX
        return PrecisionChoice("f32", f"f32 inference: this CPU has amx_bf16, where the plugin's bf16 decodes "
                                      f"slower (perf/precision.py; {ENV}=bf16 to override)")
    if "avx512_bf16" in flags:  # measured on a Zen 4: faster with requests in flight, the runs' load
        return PrecisionChoice("bf16", f"bf16 inference: this CPU has avx512_bf16 and no AMX, where bf16 moves more "
                                       f"tokens/s than f32 with requests in flight (perf/precision.py; "
                                       f"{ENV}=f32 to override)")
    return PrecisionChoice(None, "f32 inference (no bf16 instructions on this CPU: the plugin's own choice)")


def plugin_identity(precision: str | None) -> dict[str, str]:
    """What the CPU plugin computes with, where it is not the f32 default: bf16 arithmetic (the
    rule per CPU, `choose`, or REINAGENT_OV_PRECISION_HINT) and a group size for the
    8-bit activations (REINAGENT_OV_DQ_GROUP) give other text, so they part the cache's keys. The
    f32 default adds nothing, so keys written before this stay valid."""
    if precision != "fast":
        return {}
    identity = {}
    effective = choose(precision).effective
    if effective != "f32":
        identity["inference"] = effective
    group = dq_group()
    if group is not None:
        identity["dq_group"] = str(group)
    return identity


def dq_group() -> int | None:
    """REINAGENT_OV_DQ_GROUP: the inputs per group of the plugin's 8-bit activations (its
    DYNAMIC_QUANTIZATION_GROUP_SIZE), or None for the plugin's own; a bad value is a ConfigError."""
    if not os.environ.get(DQ_ENV, "").strip():
        return None
    return env_count(DQ_ENV, 32, most=4096)
