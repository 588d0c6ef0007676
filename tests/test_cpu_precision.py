"""The local engine's inference precision per CPU (llm/cpu_precision.py): f32 with AMX (bf16
measured slower there), bf16 with AVX512-BF16 and no AMX (measured faster with requests in flight
on a Zen 4: perf/precision.py), the plugin's own f32 elsewhere, `exact` always f32 with an f32 KV
cache, an override by name; a choice other than f32 parts the response cache's keys."""

from __future__ import annotations

import pytest

from reinagent.errors import ConfigError
from reinagent.llm.cpu_precision import ENV, choose, plugin_identity

AMX = frozenset({"avx512f", "amx_bf16", "amx_tile", "avx512_bf16"})
PLAIN = frozenset({"avx2", "fma", "avx512f"})
ZEN4 = frozenset({"avx512f", "avx512_vnni", "avx512_bf16"})


@pytest.mark.parametrize("flags", [AMX, frozenset({"amx_bf16"})])
def test_a_cpu_with_amx_gets_f32(flags):
    """Mutant: the plugin's own choice kept on such a CPU -- no hint, bf16 computed."""
    choice = choose("fast", flags, env="")
    assert choice.hint == "f32" and choice.properties("fast") == {"INFERENCE_PRECISION_HINT": "f32"}
    assert "bf16 decodes slower" in choice.reason and ENV in choice.reason


def test_a_cpu_with_avx512_bf16_and_no_amx_gets_bf16():
    """Mutants: f32 there (the rule before the in-flight measurement), or the AMX test dropped."""
    choice = choose("fast", ZEN4, env="")
    assert choice.hint == "bf16" and choice.effective == "bf16"
    assert choice.properties("fast") == {"INFERENCE_PRECISION_HINT": "bf16"}
    assert "in flight" in choice.reason and ENV in choice.reason
    assert choose("exact", ZEN4, env="").effective == "f32"  # exact is f32 here too


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


def test_a_precision_other_than_f32_parts_the_response_cache_keys(monkeypatch):
    """bf16 (or another 8-bit activation group) gives other text: its answers must not be replayed
    to an f32 run of the same model, nor the other way. f32 adds nothing, so older keys hold.
    Mutant: plugin_identity returning {} always."""
    monkeypatch.delenv("REINAGENT_OV_DQ_GROUP", raising=False)
    monkeypatch.setenv(ENV, "f32")
    assert plugin_identity("fast") == {}
    monkeypatch.setenv(ENV, "bf16")
    assert plugin_identity("fast") == {"inference": "bf16"}
    assert plugin_identity("exact") == {}  # exact is f32 whatever the hint
    monkeypatch.setenv("REINAGENT_OV_DQ_GROUP", "16")
    assert plugin_identity("fast") == {"inference": "bf16", "dq_group": "16"}


def test_the_stack_puts_it_in_the_identity_of_a_local_model(monkeypatch, tmp_path):
    pytest.importorskip("openvino_genai")
    from reinagent.llm.stack import ModelSettings, build_llm

    monkeypatch.delenv("REINAGENT_OV_DQ_GROUP", raising=False)
    keys = {}
    for hint in ("f32", "bf16"):
        monkeypatch.setenv(ENV, hint)
        llm = build_llm("local", ModelSettings(cache_dir=str(tmp_path / "responses")))
        keys[hint] = llm.identity
    assert "inference" not in keys["f32"] and keys["bf16"]["inference"] == "bf16"
    same = {k: v for k, v in keys["f32"].items() if k != "run"}  # "run": each unnamed run its own scope
    assert {k: v for k, v in keys["bf16"].items() if k not in ("inference", "run")} == same
