"""The Reflexion reference code's settings, benchmark by benchmark; `--preset paper`, which applies
them; and a run's departures from them, which every report lists.

The reference is noahshinn/reflexion at 218cf0e (alfworld_runs/, hotpotqa_runs/, programming_runs/)
and, for the search rollouts, LATS (andyz245/LanguageAgentTreeSearch) at 43901ce. `--preset paper`
itself is applied where a run is resolved (plan.apply_preset). Every row's
`source` names the file and line of the reference that sets the value (tests/test_reference.py
holds a test per row); docs/strategies.md says the same. Only settings are compared here: prompts
are this project's own wording everywhere.

Precedence: a flag, then a key of the YAML file, then the preset, then the default. A resumed run
is rebuilt from spec.json, whose config holds every value the preset set, so it keeps them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


Config = Mapping[str, Any]  # a run's settings as spec.json holds them (strategy as its string)


def _always(cfg: Config) -> bool:
    return True


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Reference:
    """One setting of the reference code: `setting` (a RunConfig field) is `value` in `benchmarks`
    where `when` holds. `effective` turns a stored value into what the run used (None: the
    agent's default); `equivalent` accepts values that behave the same for this run."""

    setting: str
    value: Any
    benchmarks: tuple[str, ...]
    source: str  # where the reference does it, for the report and the docs
    when: Callable[[Config], bool] = _always
    effective: Callable[[Any], Any] = _same
    equivalent: Callable[[Any, Config], bool] | None = None

    def holds(self, cfg: Config) -> bool:
        value = self.effective(cfg.get(self.setting))
        if self.equivalent is not None:
            return self.equivalent(value, cfg)
        return value == self.value


def _strategy(*names: str) -> Callable[[Config], bool]:
    return lambda cfg: str(cfg.get("strategy")) in names


def _learns(cfg: Config) -> bool:  # something crosses from one trial to the next
    return str(cfg.get("strategy")) != "none"


def _reflects(cfg: Config) -> bool:
    return str(cfg.get("strategy")) in ("reflexion", "last_attempt_and_reflexion")


def _react_alfworld(cfg: Config) -> bool:
    return (cfg.get("agent") or "react") == "react"


def _search(cfg: Config) -> bool:
    return cfg.get("rollout") in ("tot", "mcts")


def _mcts(cfg: Config) -> bool:
    return cfg.get("rollout") == "mcts"


def _react_hotpotqa(cfg: Config) -> bool:
    return cfg.get("agent") == "react"


def _greedy_first_trial(value: Any, cfg: Config) -> bool:
    """Trial 1 as greedy as the others: no first-trial temperature of its own (the `temperature`
    row then decides), or 0."""
    return value is None or value == 0.0


def _all_reflections(value: Any, cfg: Config) -> bool:
    """Every reflection: no window, or one no smaller than the reflections a run can have."""
    return value is None or value >= int(cfg.get("num_trials") or 1) - 1


HOTPOTQA, ALFWORLD, PROGRAMMING = ("hotpotqa",), ("alfworld",), ("humaneval", "mbpp")
BENCHMARKS = ("alfworld", "hotpotqa", "humaneval", "mbpp")  # those the reference code runs

REFERENCES: tuple[Reference, ...] = (
    # HotpotQA (hotpotqa_runs/agents.py, hotpotqa_runs/notebooks/)
    Reference("memory_size", None, HOTPOTQA, "REFLEXION shows every reflection "
              "(hotpotqa_runs/agents.py:113-114, format_reflections(self.reflections))",
              when=_strategy("reflexion"), equivalent=_all_reflections),
    Reference("memory_size", 1, HOTPOTQA, "LAST_ATTEMPT_AND_REFLEXION shows only the latest reflection "
              "(hotpotqa_runs/agents.py:117, self.reflections = [self.prompt_reflection()])",
              when=_strategy("last_attempt_and_reflexion")),
    Reference("truncate_attempts", 1600, HOTPOTQA, "truncate_scratchpad: the last attempt and the reflector's "
              "input cut to 1600 tokens (hotpotqa_runs/agents.py:363, n_tokens=1600)", when=_learns),
    Reference("reflector_memory", 0, HOTPOTQA, "the reflector sees the failed attempt only "
              "(hotpotqa_runs/agents.py:142-147, _build_reflection_prompt)", when=_reflects),
    Reference("reflection_prompt", "lesson", HOTPOTQA, "the reflector writes a reflection paragraph "
              "(hotpotqa_runs/agents.py:123, prompt_reflection)", when=_reflects),
    Reference("reflection_max_tokens", 250, HOTPOTQA, "a reflection of at most 250 tokens "
              "(hotpotqa_runs/agents.py:280 and :47, the reflect LLM's max_tokens=250)", when=_reflects),
    Reference("max_steps", 6, HOTPOTQA, "ReAct stops after 6 steps (hotpotqa_runs/agents.py:268, max_steps=6; "
              "is_halted at :253)", when=_react_hotpotqa, effective=lambda v: 6 if v is None else v),
    Reference("max_prompt_tokens", 3896, HOTPOTQA, "ReAct stops when its prompt passes 3896 tokens "
              "(hotpotqa_runs/agents.py:253; tiktoken there, about 4 characters a token here)",
              when=_react_hotpotqa, effective=lambda v: 3896 if v is None else v),
    Reference("num_trials", 5, HOTPOTQA, "5 trials (hotpotqa_runs/notebooks/ReactQA.ipynb:121, n = 5; "
              "CotQA_context.ipynb:142 and CotQA_no_context.ipynb:130 too)"),
    # ALFWorld (alfworld_runs/alfworld_trial.py, generate_reflections.py, env_history.py)
    Reference("memory_size", 3, ALFWORLD, "the last 3 reflections (alfworld_runs/alfworld_trial.py:48, memory[-3:])",
              when=_reflects),
    Reference("reflector_memory", 3, ALFWORLD, "the reflector sees the last 3 plans ('Plans from past attempts'; "
              "alfworld_runs/generate_reflections.py:40, env['memory'][-3:])", when=_reflects),
    Reference("reflection_prompt", "plan", ALFWORLD, "the reflection prompt ends with 'New plan:' "
              "(alfworld_runs/generate_reflections.py:26)", when=_reflects),
    Reference("reflection_max_tokens", 256, ALFWORLD, "a plan of at most 256 tokens (alfworld_runs/utils.py:22, "
              "get_completion's max_tokens=256, called at generate_reflections.py:44)", when=_reflects),
    Reference("alfworld_demos", 2, ALFWORLD, "two demonstrations of the task's type "
              "(alfworld_runs/alfworld_trial.py:124, react_{v}_1 + react_{v}_0)", when=_react_alfworld),
    Reference("alfworld_loop", "repeat", ALFWORLD, "the episode ends when an action repeats the one before it "
              "(alfworld_runs/alfworld_trial.py:69, check_is_exhausted)", when=_react_alfworld),
    Reference("max_steps", 49, ALFWORLD, "49 steps (alfworld_runs/alfworld_trial.py:56, while cur_step < 49)",
              when=_react_alfworld, effective=lambda v: 50 if v is None else v),
    Reference("short_reply_retries", 5, ALFWORLD,
              "a reply under 5 characters asked again, up to 6 tries, temperature 0.2 warmer each "
              "(alfworld_runs/alfworld_trial.py:25-31)", when=_react_alfworld),
    Reference("num_trials", 10, ALFWORLD, "10 trials (alfworld_runs/run_reflexion.sh:2 and run_simple.sh:2, "
              "--num_trials 10)"),
    # HumanEval, MBPP (programming_runs/reflexion.py): only the latest reflection, next to the
    # previous implementation and its feedback
    Reference("strategy", "last_attempt_and_reflexion", PROGRAMMING, "each retry's prompt holds the previous "
              "implementation, its test feedback and the latest reflection (programming_runs/reflexion.py:64-70, "
              "func_impl(strategy='reflexion', prev_func_impl, feedback, self_reflection))",
              when=_strategy("reflexion", "last_attempt_and_reflexion")),
    Reference("memory_size", 1, PROGRAMMING, "the latest reflection only (programming_runs/reflexion.py:70, "
              "self_reflection=reflection)", when=_reflects),
    # the Evaluator: the program's own tests end the loop, the hidden ones judge the final program once
    Reference("evaluator", "internal", PROGRAMMING, "the model's own tests decide; hidden tests judge once "
              "(programming_runs/reflexion.py:47-48 and :81-82)"),
    Reference("internal_tests_kept", 1, PROGRAMMING,
              "1 internal test kept, picked at random (programming_runs/reflexion.py:37, internal_tests(..., 1))"),
    Reference("reflection_max_tokens", 1024, PROGRAMMING, "a reflection of at most 1024 tokens "
              "(programming_runs/generators/model.py:98, generate_chat's max_tokens=1024, called at "
              "generators/generator_utils.py:169)", when=_reflects),
    Reference("num_trials", 2, PROGRAMMING, "2 implementations: the first and one after a reflection "
              "(programming_runs/run_reflexion.sh:9, --max_iters 2; reflexion.py:57)", when=_reflects),
    # tot/mcts: the search's reflections, as LATS keeps them
    Reference("search_reflections", 3, HOTPOTQA, "LATS's HotpotQA search reflects on at most 3 distinct failed "
              "trajectories (LATS hotpot/lats.py:62, len(unique_trajectories) < 4)", when=_search),
    Reference("search_reflections", None, PROGRAMMING, "LATS's programming search keeps every reflection "
              "(LATS programming/mcts.py:195-197, reflections.append(reflection))", when=_mcts),
    Reference("search_reflect_on", "every_failure", PROGRAMMING, "LATS's programming search reflects on every "
              "program failing its own tests (LATS programming/mcts.py:195-196)", when=_mcts),
    # every benchmark: the reference decodes greedily, in every trial
    Reference("temperature", 0.0, BENCHMARKS, "greedy decoding, temperature 0 (hotpotqa_runs/agents.py:163; "
              "alfworld_runs/utils.py:22; programming_runs/generators/py_generate.py:267; its programming "
              "reflections and tests are sampled at 0.2, generators/model.py:98, which no setting here follows)"),
    Reference("first_trial_temperature", 0.0, BENCHMARKS, "the first trial as greedy as the others (the same "
              "LLMs and temperatures every trial: hotpotqa_runs/agents.py:163, alfworld_runs/alfworld_trial.py:27, "
              "programming_runs/reflexion.py:40)", equivalent=_greedy_first_trial),
)


def known_settings() -> set[str]:
    from reinagent.config import RunConfig

    return set(RunConfig.model_fields)


def pending() -> set[str]:
    """Settings of the table that RunConfig does not have yet (skipped until they exist)."""
    return {r.setting for r in REFERENCES} - known_settings()


def references(cfg: Config) -> list[Reference]:
    """The reference's settings that apply to this run (benchmark, agent, strategy, rollout)."""
    known = known_settings()
    return [r for r in REFERENCES
            if cfg.get("benchmark") in r.benchmarks and r.setting in known and r.when(cfg)]


@dataclass(frozen=True)
class Departure:
    setting: str
    value: Any  # what the run used
    reference: Any
    source: str

    def line(self) -> str:
        shown = shown_value
        return (f"{self.setting} = {shown(self.setting, self.value)} "
                f"(reference: {shown(self.setting, self.reference)}; {self.source})")

    def as_dict(self) -> dict[str, Any]:
        return {"setting": self.setting, "value": self.value, "reference": self.reference, "source": self.source}


def shown_value(setting: str, value: Any) -> str:
    """A setting's value as a report shows it: None is every reflection for the memory window,
    no cut for the truncation, the agent's default elsewhere."""
    if value is None:
        return {"memory_size": "all", "truncate_attempts": "none"}.get(setting, "default")
    return str(value)


def departures(config: Config) -> list[Departure] | None:
    """Where this run's settings differ from the reference's ([] for none); None when the
    reference code has no run of this benchmark. Settings missing from an older spec.json read as
    their default, which is what that version of reinagent did."""
    from reinagent.config import RunConfig
    from reinagent.records import recorded_evaluator

    # a coder run from before `--evaluator` was judged by the hidden tests (records.recorded_evaluator)
    cfg = {name: f.default for name, f in RunConfig.model_fields.items()} | dict(config) | {
        "evaluator": recorded_evaluator(dict(config))}
    if cfg.get("benchmark") not in BENCHMARKS:
        return None
    return [Departure(r.setting, r.effective(cfg.get(r.setting)), r.value, r.source)
            for r in references(cfg) if not r.holds(cfg)]


def departures_summary(config: Config) -> dict[str, Any]:
    """What reports show: the preset, and the departures (a list, possibly empty) or None."""
    found = departures(config)
    return {"preset": config.get("preset"), "departures": None if found is None else [d.as_dict() for d in found]}
