"""`--local-engine auto` (reinagent/llm/engine_choice.py): the faster local engine for this CPU and
model, measured once and cached, OpenVINO without measuring where only it can run what is asked,
and spec.json recording what was chosen and why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reinagent.config import build_config
from reinagent.llm import engine_choice
from reinagent.llm.engine_choice import EngineChoice, cache_key, pick, without_measuring
from reinagent.plan import resolve
from tests.conftest import run_cli
from tests.test_llamacpp import _binary


@pytest.mark.parametrize("tok_s, engine", [({"openvino": 10.0, "llamacpp": 12.5}, "llamacpp"),
                                           ({"openvino": 12.5, "llamacpp": 10.0}, "openvino"),
                                           ({"openvino": 7.0, "llamacpp": 7.0}, "openvino")])
def test_the_faster_engine_is_chosen_and_a_tie_keeps_openvino(tok_s, engine):
    assert pick(tok_s) == engine


@pytest.mark.parametrize("asked, why", [
    (dict(constrained=True), "--constrained"),
    (dict(deterministic=True), "--deterministic"),
    (dict(precision="exact"), "--precision exact"),
    (dict(executor="ray"), "--executor ray"),
    (dict(llamacpp_missing="pip install 'reinagent[llamacpp]'"), "llama.cpp's server is not installed"),
])
def test_openvino_without_measuring_where_only_it_runs_what_is_asked(asked, why):
    settings = dict(constrained=None, deterministic=False, precision="fast", executor="local", llamacpp_missing=None)
    choice = without_measuring(**{**settings, **asked})
    assert choice is not None and choice.engine == "openvino" and why in choice.reason and not choice.tok_s
    assert without_measuring(**settings) is None  # nothing asked that only OpenVINO does: measure


def test_a_plan_that_asks_for_what_only_openvino_does_keeps_it_and_records_why(monkeypatch, script):
    monkeypatch.setattr(engine_choice, "choose", lambda *a: pytest.fail("measured where it need not"))
    plan = resolve(build_config(model="local", local_engine="auto", deterministic=True, num_envs=1))
    assert plan.config.local_engine == "openvino" and plan.executor.local_engine == "openvino"
    assert plan.engine_choice["asked"] == "auto" and "--deterministic" in plan.engine_choice["reason"]
    # a model no local engine decodes: nothing to choose, nothing recorded
    plan = resolve(build_config(model=script([]), local_engine="auto", num_envs=1))
    assert plan.config.local_engine == "openvino" and plan.engine_choice is None


def _spec(run_dir: Path) -> dict:
    return json.loads((run_dir / "spec.json").read_text())


def _run(tmp_path: Path, name: str, cache: Path, *extra: str):
    return run_cli("run", "--benchmark", "hotpotqa", "--agent", "react", "--num-envs", "2", "--num-trials", "1",
                   "--model", "local", "--max-tokens", "8", "--max-steps", "2", "--local-engine", "auto", *extra,
                   "--run-dir", str(tmp_path / name), "--no-cache",
                   env={"REINAGENT_CACHE_DIR": str(cache), "REINAGENT_ENGINE_CHOICE_TOKENS": "12"}, timeout=900)


@pytest.mark.slow
def test_a_cached_choice_of_llamacpp_runs_on_it_unconstrained_and_the_spec_says_so(tmp_path):
    _binary()
    cache = tmp_path / "cache"
    cache.mkdir()
    # As a measurement on a CPU where llama.cpp wins would have left it (in-flight 8: the default batch)
    recorded = EngineChoice("llamacpp", "llamacpp measured faster at 8 in flight: 9.0 vs 8.0 tok/s (openvino)",
                            {"openvino": 8.0, "llamacpp": 9.0}, 8, engine_choice.cpu_name())
    entry = {k: v for k, v in recorded.record().items() if k not in ("asked", "cached")}
    (cache / "engine_choice.json").write_text(json.dumps({cache_key("local", 8): entry}))
    proc = _run(tmp_path, "r", cache)
    assert proc.returncode == 0, proc.stderr
    assert "measured before on this CPU" in proc.stderr and "measuring which engine" not in proc.stderr
    assert "starting llama.cpp's server" in proc.stderr  # the run decoded on the engine chosen
    spec = _spec(tmp_path / "r")
    assert spec["config"]["local_engine"] == "llamacpp"  # a resume runs on it again without measuring
    assert spec["settings"]["local_engine_choice"] == {**recorded.record(), "cached": True}
    assert spec["settings"]["constrained"] is False  # llama.cpp takes no regular-expression grammar


@pytest.mark.slow
def test_auto_measures_both_engines_once_and_runs_on_the_faster(tmp_path):
    _binary()
    cache = tmp_path / "cache"
    first = _run(tmp_path, "first", cache)
    assert first.returncode == 0, first.stderr
    assert "measuring which engine decodes local faster here" in first.stderr
    choice = _spec(tmp_path / "first")["settings"]["local_engine_choice"]
    assert choice["cached"] is False and choice["in_flight"] == 8
    assert set(choice["tok_s"]) == {"openvino", "llamacpp"} and min(choice["tok_s"].values()) > 0
    assert choice["engine"] == pick(choice["tok_s"]) == _spec(tmp_path / "first")["config"]["local_engine"]
    assert ("starting llama.cpp's server" in first.stderr.split(choice["reason"])[-1]) == (choice["engine"] == "llamacpp")
    assert len(json.loads((cache / "engine_choice.json").read_text())) == 1
    again = _run(tmp_path, "again", cache)  # the same CPU, model and batch: no second measurement
    assert again.returncode == 0, again.stderr
    assert "measuring which engine" not in again.stderr and "measured before on this CPU" in again.stderr
    assert _spec(tmp_path / "again")["settings"]["local_engine_choice"] == {**choice, "cached": True}


def test_a_cache_entry_this_version_did_not_write_is_measured_again(tmp_path, monkeypatch):
    monkeypatch.setattr(engine_choice, "cache_file", lambda: tmp_path / "engine_choice.json")
    monkeypatch.setattr(engine_choice, "cache_key", lambda model, in_flight: "k")
    (tmp_path / "engine_choice.json").write_text(json.dumps({"k": {"engine": "vllm", "oops": 1}}))
    measured = []

    async def fake(model, in_flight, tokens):
        measured.append(model)
        return {"openvino": 1.0, "llamacpp": 2.0}

    monkeypatch.setattr(engine_choice, "_measure", fake)
    choice = engine_choice.choose("local", 8)
    assert measured == ["local"] and choice.engine == "llamacpp" and not choice.cached
    assert json.loads((tmp_path / "engine_choice.json").read_text())["k"]["engine"] == "llamacpp"


def test_a_plugin_computing_in_bf16_is_measured_again(monkeypatch):
    """bf16 moves other tokens/s than f32 (llm/cpu_precision.py): a choice measured under one
    precision is not the other's. Mutant: engines_version without the plugin's precision."""
    from reinagent.llm.cpu_precision import ENV
    from reinagent.llm.engine_choice import engines_version

    monkeypatch.delenv("REINAGENT_OV_DQ_GROUP", raising=False)
    monkeypatch.setenv(ENV, "f32")
    f32 = engines_version()
    monkeypatch.setenv(ENV, "bf16")
    assert engines_version() != f32 and "inference=bf16" in engines_version()
