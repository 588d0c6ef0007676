"""Issue 35 §3-5: the reference code's rules as settings, `--preset paper`, and every report's
departures from the reference. Runs use the scripted model on real HotpotQA tasks."""

import json

import pytest

from reinagent import reference, resume, run
from reinagent.config import RunConfig, build_config
from reinagent.errors import ConfigError
from reinagent.plan import resolve
from reinagent.reference import departures, pending
from reinagent.runner import load_run
from tests.conftest import one_line_error, run_cli

WRONG = "Thought: the first guess.\nAction: Finish[wrong answer]"


def _resolved(**flags):
    return resolve(build_config(**flags), task_ids=(), check_models=False).config


def _records(run_dir):
    return {(r.task_id, r.trial): r for r in load_run(run_dir)[1]}


# --- the preset ----------------------------------------------------------------------------------

def test_preset_sets_every_reference_setting_of_the_benchmark():
    hotpot = _resolved(benchmark="hotpotqa", strategy="reflexion", preset="paper")
    assert hotpot.memory_size is None and hotpot.truncate_attempts == 1600 and hotpot.temperature == 0.0
    both = _resolved(benchmark="hotpotqa", strategy="last_attempt_and_reflexion", preset="paper")
    assert both.memory_size == 1
    alf = _resolved(benchmark="alfworld", strategy="reflexion", preset="paper")
    assert (alf.memory_size, alf.reflector_memory, alf.reflection_prompt, alf.alfworld_demos,
            alf.alfworld_loop, alf.max_steps, alf.short_reply_retries) == (3, 3, "plan", 2, "repeat", 49, 5)
    assert alf.truncate_attempts is None  # a HotpotQA rule only
    code = _resolved(benchmark="humaneval", agent="coder", preset="paper")
    # the reference's programming loop: the previous implementation, its feedback and the latest reflection
    assert (code.strategy.value, code.memory_size, code.num_trials) == ("last_attempt_and_reflexion", 1, 2)
    assert (hotpot.num_trials, alf.num_trials, hotpot.reflection_max_tokens, alf.reflection_max_tokens,
            code.reflection_max_tokens) == (5, 10, 250, 256, 1024)
    for cfg in (hotpot, both, alf, code):
        assert departures(cfg.model_dump(mode="json")) == []
    # asked for by name, REFLEXION (no previous implementation) is a departure the report lists
    named = _resolved(benchmark="humaneval", agent="coder", strategy="reflexion", preset="paper")
    assert [(d.setting, d.value) for d in departures(named.model_dump(mode="json"))] == [("strategy", "reflexion")]
    # without the preset nothing changes
    plain = _resolved(benchmark="alfworld", strategy="reflexion")
    assert (plain.alfworld_demos, plain.alfworld_loop, plain.max_steps, plain.short_reply_retries) == (1, "cycle", None, 0)


def test_flags_and_yaml_keys_win_over_the_preset(tmp_path):
    assert _resolved(benchmark="hotpotqa", preset="paper", memory_size=2).memory_size == 2
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text("benchmark: alfworld\npreset: paper\nmax_steps: 30\n")
    cfg = resolve(build_config(yaml_file, alfworld_demos=1), task_ids=(), check_models=False).config
    assert (cfg.max_steps, cfg.alfworld_demos, cfg.alfworld_loop) == (30, 1, "repeat")
    found = {d.setting: (d.value, d.reference) for d in departures(cfg.model_dump(mode="json"))}
    assert found == {"max_steps": (30, 49), "alfworld_demos": (1, 2)}


def test_preset_refuses_a_benchmark_the_reference_never_ran(script):
    with pytest.raises(ConfigError, match="no gsm8k run; valid benchmarks: alfworld, hotpotqa, humaneval"):
        _resolved(benchmark="gsm8k", preset="paper")
    proc = run_cli("run", "--benchmark", "gsm8k", "--preset", "paper", "--model", script([]), "--num-envs", "1")
    assert proc.returncode == 2
    one_line_error(proc, "--preset paper", "valid benchmarks")


def test_every_problem_the_settings_have_is_reported_at_once():
    """A missing model file and a preset the benchmark has no reference for: both lines, one exit."""
    proc = run_cli("run", "--benchmark", "gsm8k", "--preset", "paper", "--model", "scripted:/nonexistent.yaml")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 2, proc.stderr
    assert "scripted model file /nonexistent.yaml does not exist" in lines[0] and "no gsm8k run" in lines[1]


def test_every_reference_setting_is_a_run_setting():
    """No entry of the table is skipped: each names a RunConfig field (a renamed field fails here)."""
    assert pending() == set()
    names = {r.setting for r in reference.REFERENCES}
    assert {"evaluator", "internal_tests_kept", "search_reflections"} <= names


def test_paper_preset_sets_the_programming_loop_and_the_search_memory():
    """Issue 35 §5: the programming loop of §1 and the bounded search memory of §2 are in the preset;
    a flag still wins over it."""
    coder = _resolved(benchmark="humaneval", agent="coder", strategy="reflexion", preset="paper")
    assert (coder.evaluator, coder.internal_tests_kept) == ("internal", 1)
    assert _resolved(benchmark="humaneval", agent="coder", preset="paper", internal_tests_kept=3).internal_tests_kept == 3
    plain = _resolved(benchmark="humaneval", agent="coder", strategy="reflexion")
    assert plain.internal_tests_kept is None
    assert "internal_tests_kept" in {d.setting for d in departures(plain.model_dump(mode="json"))}
    hidden = _resolved(benchmark="humaneval", agent="coder", evaluator="hidden", preset="paper")
    assert hidden.evaluator == "hidden"
    assert "evaluator" in {d.setting for d in departures(hidden.model_dump(mode="json"))}
    search = _resolved(benchmark="hotpotqa", agent="cot-context", rollout="mcts", strategy="reflexion", preset="paper")
    assert search.search_reflections == 3


def test_departures_of_default_settings_and_of_other_benchmarks():
    default = _resolved(benchmark="alfworld", strategy="reflexion").model_dump(mode="json")
    assert {d.setting for d in departures(default)} == {
        "reflector_memory", "reflection_prompt", "alfworld_demos", "alfworld_loop", "max_steps", "short_reply_retries",
        "reflection_max_tokens", "num_trials"}
    hotpot = _resolved(benchmark="hotpotqa", strategy="reflexion", num_trials=6).model_dump(mode="json")
    assert {d.setting: d.value for d in departures(hotpot)} == {"memory_size": 3, "truncate_attempts": None,
                                                                 "reflection_max_tokens": 200, "num_trials": 6}
    # a window no smaller than the reflections a run can have is every reflection
    assert "memory_size" not in {d.setting for d in departures({**hotpot, "memory_size": 5})}
    assert departures({**hotpot, "temperature": 0.7})[-1].line().startswith("temperature = 0.7 (reference: 0.0")
    assert departures({"benchmark": "gsm8k"}) is None
    # an older spec.json without the new settings reads them as their defaults (what that version did)
    assert {d.setting for d in departures({"benchmark": "hotpotqa", "strategy": "last_attempt", "num_trials": 5})} == {
        "truncate_attempts"}
    assert departures({"benchmark": "hotpotqa", "strategy": "none", "num_trials": 5}) == []  # nothing crosses trials: no cut


# --- HotpotQA: truncation, the context once ------------------------------------------------------

def test_shorten_observations_replaces_the_largest_first_until_it_fits():
    from reinagent.agents.loop import TRUNCATED, shorten_observations

    text = "\n".join(["Question: q", "Thought: t", "Observation: " + "a " * 40, "Action: Search[x]",
                      "Observation: " + "b " * 80, "Observation: short"])
    words = lambda s: len(s.split())  # noqa: E731 - a tokenizer: one token a word
    assert words(text) > 100
    cut = shorten_observations(text, 60, words)
    lines = cut.split("\n")
    assert lines[4] == f"Observation: {TRUNCATED}"  # the largest went first ...
    assert lines[2] == "Observation: " + "a " * 40  # ... and that was enough
    assert words(cut) <= 60
    both = shorten_observations(text, 10, words).split("\n")
    assert both[2] == both[4] == f"Observation: {TRUNCATED}" and both[5] == f"Observation: {TRUNCATED}"
    assert both[:2] == lines[:2] and both[3] == "Action: Search[x]"  # other lines are never cut
    assert shorten_observations(text, 1000, words) == text
    # the boundary: a text of exactly the limit fits and stays whole; one token over is cut
    assert shorten_observations(text, words(text), words) == text
    assert shorten_observations(text, words(text) - 1, words) != text


def test_tokens_are_counted_with_the_models_tokenizer():
    from reinagent.agents.base import text_tokens
    from reinagent.llm.base import LLM

    class WordCounter(LLM):  # a backend with a tokenizer: a word a token, 5 template tokens
        async def generate(self, messages, params, *, rollout_id=None):
            raise AssertionError("not called")

        def count_prompt_tokens(self, messages):
            return 5 + sum(len(m.content.split()) for m in messages)

    assert text_tokens(WordCounter())("one two three " * 10) == 30
    assert text_tokens(None)("x" * 40) == 10  # no tokenizer: about 4 characters a token


def _react_run(tmp_path, script, name, **settings):
    model = script([
        {"when": r"(?s)Your failed attempt.*truncated wikipedia excerpt", "reply": "SAW-CUT"},
        {"when": "Your failed attempt", "reply": "NO-CUT"},
        {"when": "Question", "reply": ["Thought: look it up.\nAction: Search[Nonexistent page about nothing]",
                                       "Thought: look again.\nAction: Search[Another missing page]", WRONG]},
    ], default=WRONG)
    return _records(run(benchmark="hotpotqa", agent="react", num_trials=2, num_envs=1, model=model, cache=False,
                        progress=False, run_dir=str(tmp_path / name), **settings))


def test_last_attempt_and_reflector_input_are_truncated(tmp_path, script):
    cut = _react_run(tmp_path, script, "cut", strategy="last_attempt_and_reflexion", truncate_attempts=40)
    whole = _react_run(tmp_path, script, "whole", strategy="last_attempt_and_reflexion")
    (task_id, _), = [k for k in cut if k[1] == 1]
    prompt = cut[(task_id, 2)].trajectory.messages[1].content
    assert "Observation: [truncated wikipedia excerpt]" in prompt
    assert cut[(task_id, 1)].reflection == "SAW-CUT"
    assert "truncated wikipedia excerpt" not in whole[(task_id, 2)].trajectory.messages[1].content
    assert whole[(task_id, 1)].reflection == "NO-CUT"


def test_cot_context_shows_its_context_once(tmp_path, script):
    model = script([{"when": "Your failed attempt", "reply": "Check both paragraphs."}], default=WRONG)
    records = _records(run(benchmark="hotpotqa", agent="cot-context", strategy="last_attempt", num_trials=2,
                           num_envs=2, model=model, cache=False, progress=False, run_dir=str(tmp_path / "r")))
    assert len(records) == 4
    for (task_id, trial), rec in records.items():
        asked = rec.trajectory.messages[1].content.split("(END OF EXAMPLES)")[1]  # after the few-shot examples
        assert asked.count("Context:") == 1
        assert ("Finish[wrong answer]" in asked) == (trial == 2)  # the last attempt, without a second context


# --- the Reflector: past plans, "New plan:" ------------------------------------------------------

def test_plan_prompt_lists_past_plans_and_ends_with_new_plan():
    from reinagent.reflector import Reflector

    messages = Reflector(None, "an example", style="plan").prompt("the attempt", ["plan A", "plan B"])
    user = messages[1].content
    assert user.endswith("\n\nNew plan:")
    assert "Plans from past attempts:\nTrial #0: plan A\nTrial #1: plan B" in user
    assert "Plans from past attempts" not in Reflector(None, style="plan").prompt("the attempt")[1].content
    lesson = Reflector(None).prompt("the attempt", ["plan A"])[1].content
    assert "Reflections from past attempts:\nTrial #0: plan A" in lesson and not lesson.endswith("New plan:")


def test_alfworld_reflector_gets_plan_examples_with_the_plan_prompt():
    from reinagent.plan import build
    from reinagent.plan import resolve

    def reflector(**settings):
        plan = resolve(RunConfig(benchmark="alfworld", model="scripted:x", **settings), task_ids=(), check_models=False)
        return build(plan, None, models=(None, None, [])).reflector

    plan, lesson = reflector(reflection_prompt="plan"), reflector()
    assert plan.style == "plan" and plan.examples.count("\nNew plan: ") == 2 and "Reflection:" not in plan.examples
    assert lesson.style == "lesson" and lesson.examples.count("\nReflection: ") == 2
    assert reflector(preset="paper").style == "plan"


def _reflector_run(tmp_path, script, name, trials, **settings):
    model = script([
        {"when": "Plans from past attempts:\nTrial #0: FIRST", "reply": "SECOND"},
        {"when": "Your failed attempt", "reply": "FIRST"},
    ], default=WRONG)
    return run(benchmark="hotpotqa", agent="cot-context", strategy="reflexion", num_trials=trials, num_envs=1,
               model=model, cache=False, progress=False, run_dir=str(tmp_path / name),
               reflection_prompt="plan", **settings)


def test_reflector_sees_the_tasks_earlier_reflections(tmp_path, script):
    seen = _records(_reflector_run(tmp_path, script, "seen", 3, reflector_memory=1))
    blind = _records(_reflector_run(tmp_path, script, "blind", 3))
    assert [seen[k].reflection for k in sorted(seen)] == ["FIRST", "SECOND", None]
    assert [blind[k].reflection for k in sorted(blind)] == ["FIRST", "FIRST", None]


def test_resume_writes_the_skipped_reflection_with_past_plans(tmp_path, script):
    run_dir = _reflector_run(tmp_path, script, "extend", 2, reflector_memory=3)
    resume(run_dir, num_trials=3, progress=False)
    records = _records(run_dir)
    assert [records[k].reflection for k in sorted(records)] == ["FIRST", "SECOND", None]


def test_resume_shows_the_reflector_only_its_last_plans(tmp_path, script):
    """The reflection a resume writes for the old last trial sees the last --reflector-memory
    plans, as run_episode's would, not every one the task has."""
    model = script([
        {"when": "Plans from past attempts:\nTrial #0: FIRST\nTrial #1: SECOND", "reply": "SAW-ALL"},
        {"when": "Plans from past attempts:\nTrial #0: SECOND", "reply": "THIRD"},
        {"when": "Plans from past attempts:\nTrial #0: FIRST", "reply": "SECOND"},
        {"when": "Your failed attempt", "reply": "FIRST"},
    ], default=WRONG)
    run_dir = run(benchmark="hotpotqa", agent="cot-context", strategy="reflexion", num_trials=3, num_envs=1,
                  model=model, cache=False, progress=False, run_dir=str(tmp_path / "r"), reflection_prompt="plan",
                  reflector_memory=1)
    resume(run_dir, num_trials=4, progress=False)
    records = _records(run_dir)
    assert [records[k].reflection for k in sorted(records)] == ["FIRST", "SECOND", "THIRD", None]


# --- ALFWorld: demonstrations, the loop rule, short replies ----------------------------------------

def test_two_demonstrations_per_type_from_other_training_games():
    from reinagent.benchmarks.alfworld_data import TASK_TYPES
    from reinagent.agents.prompts.alfworld import DEMO_DIR, demonstration, demonstrations

    first = json.loads((DEMO_DIR / "sources.json").read_text())
    second = json.loads((DEMO_DIR / "sources-2.json").read_text())
    assert set(second) == set(TASK_TYPES.values())
    for kind in second:
        assert second[kind].startswith("valid_train/") and second[kind] != first[kind]
        assert demonstration(kind, 2) != demonstration(kind)
        two = demonstrations(kind, 2)
        assert two.startswith("Here are two examples.") and two.count("(END OF EXAMPLE)") == 2
        assert demonstration(kind) in two and demonstration(kind, 2) in two
        assert demonstrations(kind, 1).count("(END OF EXAMPLE)") == 1


def test_the_reference_loop_rule_ends_at_the_first_repeat():
    from reinagent.agents.alfworld_react import is_loop, repeats_last

    assert repeats_last(["look", "go to desk 1", "go to desk 1"])
    assert repeats_last(["think: hm", "think: hm"])
    assert not repeats_last(["go to desk 1", "look", "go to desk 1"])
    assert not repeats_last(["look"])
    assert not is_loop(["look", "go to desk 1", "go to desk 1"])  # the default waits for a third


class _Game:
    """An ALFWorld-like game: every command is admissible; nothing ever happens."""

    blocking = False

    def reset(self, seed=None):
        return "You are in a room.\nYour task is to: look around.", {"admissible_commands": ["look", "go to desk 1"]}

    def step(self, action):
        return "Nothing happens.", 0.0, False, False, {"admissible_commands": ["look", "go to desk 1"], "won": False}


class _Replies:
    """A model answering from a list, recording each call's temperature."""

    def __init__(self, replies):
        from reinagent.llm.base import LLM, Completion

        outer = self

        class Model(LLM):
            async def generate(self, messages, params, *, rollout_id=None):
                outer.temperatures.append(params.temperature)
                return Completion(text=outer.replies.pop(0) if outer.replies else "go to desk 1")

        self.replies, self.temperatures, self.llm = list(replies), [], Model()


def _play(replies, **settings):
    import asyncio

    from reinagent.agents.alfworld_react import ALFWorldReactAgent
    from reinagent.agents.base import Actor
    from reinagent.benchmarks.alfworld import ALFWorldTask
    from reinagent.memory import MemoryView
    from reinagent.records import Trajectory
    from reinagent.strategy import ReflexionStrategy

    model = _Replies(replies)
    agent = ALFWorldReactAgent(build_config(benchmark="alfworld", max_steps=settings.pop("max_steps", 8), **settings))
    task = ALFWorldTask(task_id="t", question="look around", split="valid_train", game="g", task_type="pick_and_place_simple")
    actor = Actor(model.llm, Trajectory(), "t/trial1")
    traj = asyncio.run(agent.run(task, _Game(), MemoryView(1, ReflexionStrategy.NONE), actor))
    return traj, model.temperatures


def test_short_replies_are_asked_again_warmer():
    traj, temps = _play(["", "ok", "look", "go to desk 1"] + ["look", "go to desk 1"] * 4, short_reply_retries=5)
    assert traj.steps[0].action == "go to desk 1" and temps[:4] == pytest.approx([0.0, 0.2, 0.4, 0.6])
    plain, temps = _play(["", "look", "go to desk 1"] * 4)
    assert plain.steps[0].action is None and temps[:2] == [0.0, 0.0]  # the empty reply was played
    spent, temps = _play(["x"] * 6 + ["look", "go to desk 1"] * 4, short_reply_retries=5)
    assert spent.steps[0].output == "" and temps[:6] == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])


def test_alfworld_loop_setting_picks_the_rule_in_an_episode():
    repeat, _ = _play(["look", "go to desk 1", "go to desk 1", "look"], alfworld_loop="repeat")
    assert repeat.end_reason == "loop" and len(repeat.steps) == 3
    cycle, _ = _play(["look", "go to desk 1", "go to desk 1", "look", "look", "look", "look"])
    assert cycle.end_reason == "loop" and len(cycle.steps) == 6
    budget, _ = _play(["look", "go to desk 1"] * 20, max_steps=5, alfworld_loop="repeat")
    assert budget.end_reason == "step_budget" and len(budget.steps) == 5


def test_alfworld_prompt_holds_two_demonstrations_with_the_setting():
    from reinagent.agents.alfworld_react import ALFWorldReactAgent
    from reinagent.benchmarks.alfworld import ALFWorldTask
    from reinagent.memory import MemoryView
    from reinagent.strategy import ReflexionStrategy

    task = ALFWorldTask(task_id="t", question="q", split="valid_train", game="g", task_type="pick_clean_then_place_in_recep")
    view = MemoryView(1, ReflexionStrategy.NONE)
    two = ALFWorldReactAgent(build_config(benchmark="alfworld", alfworld_demos=2)).prompt(task, "obs", view)[1].content
    one = ALFWorldReactAgent(build_config(benchmark="alfworld")).prompt(task, "obs", view)[1].content
    assert two.count("(END OF EXAMPLE)") == 2 and one.count("(END OF EXAMPLE)") == 1


# --- spec.json, reports, resume --------------------------------------------------------------------

def test_spec_records_the_preset_and_reports_list_departures(tmp_path, script):
    from reinagent.report.html import report_html
    from reinagent.report.loading import load
    from reinagent.report.markdown import report_markdown
    from reinagent.report.summary import summarize

    model = script([{"when": "Your failed attempt", "reply": "Check both."}], default=WRONG)
    common = dict(benchmark="hotpotqa", agent="cot-context", num_envs=1, model=model, cache=False, progress=False)
    paper = run(**common, preset="paper", run_dir=str(tmp_path / "paper"))  # the reference's 5 trials
    default = run(**common, num_trials=1, strategy="last_attempt_and_reflexion", run_dir=str(tmp_path / "default"))
    spec = json.loads((paper / "spec.json").read_text())
    assert spec["config"]["preset"] == "paper" and spec["config"]["truncate_attempts"] == 1600
    assert spec["config"]["memory_size"] is None
    ours, theirs = summarize(paper), summarize(default)
    assert ours["reference"] == {"preset": "paper", "departures": []}
    assert [d["setting"] for d in theirs["reference"]["departures"]] == ["memory_size", "truncate_attempts",
                                                                         "reflection_max_tokens", "num_trials"]
    md = report_markdown([ours, theirs])
    assert "preset `paper`; departures from the reference code: none" in md
    assert "departures from the reference code (4): memory_size = 3 (reference 1); truncate_attempts = none" in md
    html = report_html(load([paper, default]))
    assert "preset paper; departures from the reference code: none" in html
    assert "memory_size = 3 (reference 1)" in html
    proc = run_cli("report", str(default), "--format", "json")
    assert json.loads(proc.stdout)["reference"]["departures"][0]["reference"] == 1


def test_resume_keeps_the_settings_its_preset_set(tmp_path, script, monkeypatch):
    model = script([{"when": "Your failed attempt", "reply": "Check both paragraphs."}], default=WRONG)
    run_dir = run(benchmark="hotpotqa", agent="cot-context", strategy="reflexion", preset="paper", num_trials=2,
                  num_envs=1, model=model, cache=False, progress=False, run_dir=str(tmp_path / "r"))
    # the table changes (a later reinagent): the resumed run must keep what its preset set then
    changed = tuple(reference.Reference(r.setting, 0, r.benchmarks, r.source, when=r.when)
                    if r.setting == "memory_size" else r for r in reference.REFERENCES)
    monkeypatch.setattr(reference, "REFERENCES", changed)
    resume(run_dir, num_trials=5, progress=False)
    records = _records(run_dir)
    assert [len(records[k].memory) for k in sorted(records)] == [0, 1, 2, 3, 4]  # every reflection
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["config"]["memory_size"] is None and spec["config"]["preset"] == "paper"


def test_cli_takes_memory_size_all(tmp_path, script):
    model = script([], default=WRONG)
    proc = run_cli("run", "--benchmark", "hotpotqa", "--agent", "cot-context", "--memory-size", "all",
                   "--num-envs", "1", "--num-trials", "1", "--model", model, "--no-cache", "--quiet",
                   "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "r" / "spec.json").read_text())["config"]["memory_size"] is None
    bad = run_cli("run", "--memory-size", "some", "--model", model)
    assert bad.returncode == 2 and "not a whole number or 'all'" in bad.stderr


# --- docs/strategies.md, line by line ----------------------------------------------------------

STRATEGIES = ("none", "last_attempt", "reflexion", "last_attempt_and_reflexion")


def _table_rows():
    """(benchmark, agent, strategies, flags) of the HotpotQA and ALFWorld rows whose last column
    names flags for the reference behaviour."""
    import re
    import shlex
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "strategies.md").read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith(("HotpotQA", "ALFWorld")) or "`" not in cells[4]:
            continue
        benchmark = cells[0].split()[0].lower()
        agent = "cot-context" if "cot-context" in cells[0] else None
        strategies = STRATEGIES if cells[1] == "every strategy" else tuple(
            s.strip().lower() for s in cells[1].split(","))
        flags = shlex.split(" ".join(re.findall(r"`([^`]+)`", re.sub(r"\(or .*?\)", "", cells[4]))))
        rows.append((benchmark, agent, strategies, flags))
    return rows


def _config_of(flags, **settings):
    from reinagent.cli import run as run_command

    params = {k: v for k, v in run_command.make_context("run", list(flags)).params.items() if v is not None}
    params.pop("quiet", None)
    # 6 trials: a window of 3 reflections is then narrower than "every reflection"
    return _resolved(**{"num_trials": 6, **params, **settings}).model_dump(mode="json")


def test_each_documented_row_gives_the_reference_behaviour():
    """Every HotpotQA and ALFWorld row of docs/strategies.md: its flags remove that departure;
    all rows of a benchmark and strategy together leave none, as --preset paper does."""
    rows = _table_rows()
    assert len(rows) >= 9 and {r[0] for r in rows} == {"hotpotqa", "alfworld"}
    together: dict[tuple[str, str], list[str]] = {}
    for benchmark, agent, strategies, flags in rows:
        named = {f.lstrip("-").replace("-", "_") for f in flags if f.startswith("--")}
        for strategy in strategies:
            extra = {"agent": agent} if agent else {}
            without = {d.setting for d in departures(_config_of([], benchmark=benchmark, strategy=strategy, **extra))}
            assert named & without, f"{benchmark} {strategy}: {flags} names no departure of the defaults"
            left = {d.setting for d in departures(_config_of(flags, benchmark=benchmark, strategy=strategy, **extra))}
            assert not named & left, f"{benchmark} {strategy}: {flags} leaves {named & left}"
            together.setdefault((benchmark, strategy), []).extend(flags)
    for (benchmark, strategy), flags in together.items():
        assert departures(_config_of(flags, benchmark=benchmark, strategy=strategy)) == [], (benchmark, strategy)


# --- every row of the table: its source, the preset, a departure ----------------------------------

OTHER = {"lesson": "plan", "plan": "lesson", "repeat": "cycle", "internal": "hidden", "every_failure": "ended",
         "last_attempt_and_reflexion": "reflexion"}
AGENTS = {"hotpotqa": ("react", "cot-context"), "alfworld": ("react",), "humaneval": ("coder",), "mbpp": ("coder",)}


def _row_config(row):
    """Settings (benchmark, agent, strategy, rollout) under which `row` applies."""
    for benchmark in row.benchmarks:
        for agent in AGENTS[benchmark]:
            for strategy in ("reflexion", "last_attempt_and_reflexion", "last_attempt", "none"):
                for rollout in ("react", "mcts", "tot"):
                    cfg = {"benchmark": benchmark, "agent": agent, "strategy": strategy, "rollout": rollout}
                    if row in reference.references(cfg):
                        return cfg
    raise AssertionError(f"no run to which {row.setting} applies")


@pytest.mark.parametrize("row", reference.REFERENCES, ids=lambda r: f"{r.setting}-{r.benchmarks[0]}")
def test_each_reference_row_names_its_line_is_set_by_the_preset_and_departs_when_changed(row):
    """Issue 44 §5: every value of the table cites the reference file and line it comes from
    (checked by hand against noahshinn/reflexion 218cf0e and LATS 43901ce); `--preset paper`
    gives it, and any other value is a departure the reports list."""
    import re

    assert re.search(r"[\w/]+\.(py|sh|ipynb):\d+", row.source), row.source
    where = _row_config(row)
    flags = {k: v for k, v in where.items() if not (k == "strategy" and row.setting == "strategy")}
    cfg = _resolved(**flags, preset="paper").model_dump(mode="json")
    assert row in reference.references(cfg) and row.holds(cfg)
    assert row.setting not in {d.setting for d in departures(cfg)}
    value = row.value
    other = (OTHER[value] if isinstance(value, str) else 0.5 if isinstance(value, float)
             else 2 if value is None else value + 1)
    changed = {d.setting: d for d in departures({**cfg, row.setting: other})}
    assert row.setting in changed and changed[row.setting].reference == row.value


def test_an_old_coder_run_departs_by_its_hidden_evaluator_not_a_default():
    """A spec.json from before `--evaluator` (judged by the hidden tests) is listed as such."""
    old = {"benchmark": "humaneval", "agent": "coder", "strategy": "last_attempt_and_reflexion", "memory_size": 1}
    [evaluator] = [d for d in departures(old) if d.setting == "evaluator"]
    assert evaluator.value == "hidden" and evaluator.line().startswith("evaluator = hidden (reference: internal")
