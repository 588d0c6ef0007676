"""Every explicit setting is honoured: a flag or YAML value equal to its default is still the
user's choice, over a preset and over a part's own default, and spec.json records what was used.
One test per family of settings that something else could override."""

from __future__ import annotations

import json

import pytest

from reinagent.agents.coder import DEFAULT_MAX_TOKENS, CoderAgent
from reinagent.config import RunConfig, build_config
from reinagent.plan import resolve
from reinagent.records import RunSpec
from reinagent.resuming import recorded_settings
from tests.conftest import run_cli

FRAMEWORK_MAX_TOKENS = RunConfig.model_fields["max_tokens"].default  # 256


def _coder_tokens(config: RunConfig) -> tuple[int, int]:
    plan = resolve(config, check_models=False)
    return plan.config.max_tokens, CoderAgent(plan.agent_settings).impl_params.max_tokens


@pytest.mark.parametrize("flags,used", [({}, DEFAULT_MAX_TOKENS), ({"max_tokens": FRAMEWORK_MAX_TOKENS}, FRAMEWORK_MAX_TOKENS),
                                        ({"max_tokens": 512}, 512)])
def test_a_part_s_default_yields_to_a_flag_even_one_equal_to_the_framework_default(flags, used):
    """Mutant: `_given` by value (the old rule) -- `--max-tokens 256` becomes the coder's 768."""
    config = build_config(benchmark="humaneval", num_envs=1, **flags)
    recorded, asked = _coder_tokens(config)
    assert recorded == asked == used  # the config (spec.json's) says what the coder asks for
    # a resume rebuilds the config from what was recorded: the same again
    assert _coder_tokens(RunConfig(**resolve(config, check_models=False).config.model_dump(mode="json"))) == (used, used)


def test_a_yaml_value_equal_to_the_default_is_the_user_s_choice(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(f"benchmark: mbpp\nmax_tokens: {FRAMEWORK_MAX_TOKENS}\n")
    assert _coder_tokens(build_config(path, num_envs=1)) == (FRAMEWORK_MAX_TOKENS, FRAMEWORK_MAX_TOKENS)


@pytest.mark.parametrize("setting", ["reflection_max_tokens", "memory_size", "num_trials", "strategy"])
def test_a_flag_equal_to_the_framework_default_beats_the_preset(setting):
    """Mutant: the preset fills settings whose value equals the default -- the flag is lost."""
    flag_value = RunConfig.model_fields[setting].default
    preset = resolve(build_config(benchmark="humaneval", num_envs=1, preset="paper"), check_models=False).config
    assert getattr(preset, setting) != flag_value  # the preset would set something else
    given = resolve(build_config(benchmark="humaneval", num_envs=1, preset="paper", **{setting: flag_value}),
                    check_models=False).config
    assert getattr(given, setting) == flag_value


def test_the_cli_records_what_the_coder_used(tmp_path, script):
    model = script([{"when": "unit tests", "reply": "assert truncate_number(1.5) == 0.5"}],
                   default="```python\ndef truncate_number(number):\n    return number % 1.0\n```")
    for flags, used in (([], DEFAULT_MAX_TOKENS), (["--max-tokens", str(FRAMEWORK_MAX_TOKENS)], FRAMEWORK_MAX_TOKENS)):
        run_dir = tmp_path / str(used)
        proc = run_cli("run", "--benchmark", "humaneval", "--num-envs", "1", "--num-trials", "1", "--model", model,
                       "--run-dir", str(run_dir), "--no-cache", "--quiet", *flags)
        assert proc.returncode == 0, proc.stderr
        spec = json.loads((run_dir / "spec.json").read_text())
        assert spec["config"]["max_tokens"] == used and spec["settings"]["defaults_recorded"] is True


def test_a_coder_run_recorded_before_defaults_were_kept_resumes_with_what_it_used():
    """Its spec says 256 whether or not it was given; its coder used 768 unless the value differed."""
    from reinagent.resuming import ResumePlan

    def spec(max_tokens: int, marker: bool) -> RunSpec:
        return RunSpec(config={"benchmark": "humaneval", "agent": "coder", "max_tokens": max_tokens, "evaluator": "internal",
                               "search_reflections": 3}, task_ids=[], created_at=0.0, reinagent_version="0",
                       python_version="3", settings={"defaults_recorded": True} if marker else {})

    plan = ResumePlan(num_trials=2)
    assert recorded_settings(spec(FRAMEWORK_MAX_TOKENS, False), plan) == {"max_tokens": DEFAULT_MAX_TOKENS}
    assert recorded_settings(spec(FRAMEWORK_MAX_TOKENS, True), plan) == {}
    assert recorded_settings(spec(512, False), plan) == {}
