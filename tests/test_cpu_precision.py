"""The local engine's inference precision per CPU (llm/cpu_precision.py): f32 where the plugin
would pick bf16 (AMX or AVX512-BF16, measured slower or no faster for decoding: perf/precision.py),
the plugin's own f32 elsewhere, `exact` always f32 with an f32 KV cache, an override by name."""

from __future__ import annotations

import pytest

from reinagent.errors import ConfigError
from reinagent.llm.cpu_precision import ENV, choose

AMX = frozenset({"avx512f", "amx_bf16", "amx_tile", "avx512_bf16"})
PLAIN = frozenset({"avx2", "fma", "avx512f"})


@pytest.mark.parametrize("flags", [AMX, frozenset({"avx512_bf16"}), frozenset({"amx_bf16"})])
def test_a_cpu_with_bf16_instructions_gets_f32(flags):
    """Mutant: the plugin's own choice kept on such a CPU -- no hint, bf16 computed."""
    choice = choose("fast", flags, env="")
    assert choice.hint == "f32" and choice.properties("fast") == {"INFERENCE_PRECISION_HINT": "f32"}
    assert "bf16" in choice.reason and ENV in choice.reason
    # the line says what was measured on such a CPU: slower with AMX, no faster without
    assert ("decodes slower" if "amx_bf16" in flags else "decodes no faster") in choice.reason


def test_a_cpu_without_them_is_left_to_the_plugin_which_computes_f32():
    choice = choose("fast", PLAIN, env="")
    assert choice.hint is None and choice.properties("fast") == {} and choice.effective == "f32"


def test_exact_is_f32_arithmetic_and_an_f32_kv_cache_on_any_cpu():
    for flags in (AMX, PLAIN):
        assert choose("exact", flags, env="bf16").properties("exact") == {"INFERENCE_PRECISION_HINT": "f32",
                                                                           "KV_CACHE_PRECISION": "f32"}


def test_the_override_wins_and_a_bad_one_names_the_choices():
    assert choose("fast", AMX, env="bf16").hint == "bf16" and choose("fast", PLAIN, env="F32").hint == "f32"
    with pytest.raises(ConfigError, match="valid: f32, bf16, f16"):
        choose("fast", AMX, env="int4")
