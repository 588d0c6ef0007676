"""Reports on hand-made run directories: complete, killed mid-write, and with errored records.

The directories are written with the real RunStore and TrialRecord classes, so a change in the
store's format that the reports do not follow fails here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reinagent.records import Message, ModelCall, RunSpec, Step, TrialRecord, Trajectory
from reinagent.report.frames import load_frames
from reinagent.report.loading import load
from reinagent.report.markdown import report_markdown
from reinagent.report.stats import format_rate, wilson_interval
from reinagent.report.summary import summarize
from reinagent.report.trajectory import pick_task, task_story
from reinagent.store import RECORDS, RunStore
from tests.conftest import run_cli

T0 = 1_700_000_000.0


def make_record(task_id: str, trial: int, *, success: bool, error: str | None = None,
                reflection: str | None = None, memory: tuple[str, ...] = (), f1: float | None = None,
                cost: float = 0.001) -> TrialRecord:
    """One (task, trial) as an agent would leave it: a one-step trajectory and its model calls."""
    answer = "Paris" if success else "Lyon"
    prompt = [Message(role="system", content="Answer the question."),
              Message(role="user", content=f"(END OF EXAMPLES)\nQuestion: capital of {task_id}?")]
    step = Step(prompt_len=2, output=f"Thought: think.\nAction: Finish[{answer}]", thought="think.",
                action=f"Finish[{answer}]", observation=f"Answer submitted: {answer}")
    calls = [ModelCall(role="actor", model="scripted:x", prompt_tokens=100, completion_tokens=10,
                       latency_s=0.5, cost_usd=cost)]
    reflection_calls = []
    if reflection:
        reflection_calls = [ModelCall(role="reflector", model="scripted:x", prompt_tokens=50,
                                      completion_tokens=20, latency_s=0.25, cost_usd=cost)]
    start = T0 + 10 * trial + hash(task_id) % 5
    return TrialRecord(
        task_id=task_id, trial=trial, success=success, reward=float(success),
        f1=(1.0 if success else 0.0) if f1 is None else f1, answer=None if error else answer,
        trajectory=Trajectory(messages=[*prompt, Message(role="assistant", content=step.output)],
                              steps=[] if error else [step], answer=answer, end_reason="finished",
                              calls=calls),
        reflection=reflection, reflection_calls=reflection_calls, memory=list(memory),
        evaluation={"gold": "Paris"}, error=error, started_at=start, finished_at=start + 2.0,
    )


def make_run(run_dir: Path, outcomes: dict[str, list[bool]], *, num_trials: int = 3,
             strategy: str = "reflexion", agent: str = "cot-context", model: str = "scripted:x",
             benchmark: str = "hotpotqa", errors: dict[tuple[str, int], str] | None = None) -> Path:
    """A run whose task `t` has outcome `outcomes[t][k]` in trial k+1 (lists may stop early)."""
    errors = errors or {}
    spec = RunSpec(config={"benchmark": benchmark, "agent": agent, "strategy": strategy,
                           "split": "hard100", "num_trials": num_trials, "model": model},
                   task_ids=list(outcomes), created_at=T0, reinagent_version="test",
                   python_version="3", git_commit="abc123")
    store = RunStore.create(run_dir, spec)
    for trial in range(1, num_trials + 1):
        for task_id, results in outcomes.items():
            if trial > len(results):
                continue
            memory = tuple(f"lesson {t} for {task_id}" for t in range(1, trial))
            success = results[trial - 1]
            store.append(make_record(
                task_id, trial, success=success, error=errors.get((task_id, trial)),
                reflection=None if success or trial == num_trials else f"lesson {trial} for {task_id}",
                memory=memory if strategy == "reflexion" else ()))
    return run_dir


# A complete run of 5 tasks: 2 solved in trial 1, 1 more in trial 2, 2 never.
COMPLETE = {"a": [True], "b": [True], "c": [False, True], "d": [False, False, False], "e": [False, False, False]}


@pytest.fixture
def complete(tmp_path) -> Path:
    return make_run(tmp_path / "complete", COMPLETE)


@pytest.fixture
def killed(tmp_path) -> Path:
    """Killed in trial 2: two records of trial 2 written, a third cut off mid-line."""
    run = make_run(tmp_path / "killed", {"a": [True], "b": [False, True], "c": [False, False], "d": [False]})
    half = make_record("d", 2, success=True).model_dump_json()[:70]
    with open(run / RECORDS, "a", encoding="utf-8") as fh:
        fh.write(half)  # no newline: a write cut short by SIGKILL
    return run


@pytest.fixture
def errored(tmp_path) -> Path:
    errors = {("b", 1): "model error: HTTP 500 after 5 attempts", ("c", 2): "TimeoutError: env"}
    run = make_run(tmp_path / "errored", {"a": [True], "b": [False, False], "c": [False, False]},
                   num_trials=2, errors=errors)
    # A retried (task, trial) supersedes the errored record written before it.
    RunStore(run).append(make_record("b", 1, success=False, reflection="lesson 1 for b"))
    return run


def test_wilson_interval_known_values():
    # Newcombe (1998), Statistics in Medicine 17:857, table I, method 3 (Wilson score, no correction).
    for (k, n), expected in {(81, 263): (0.2553, 0.3662), (15, 148): (0.0624, 0.1605),
                             (0, 20): (0.0, 0.1611), (1, 29): (0.0061, 0.1718)}.items():
        assert wilson_interval(k, n) == pytest.approx(expected, abs=6e-5)
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=6e-5)
    assert wilson_interval(10, 10) == (pytest.approx(0.7225, abs=6e-5), 1.0)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert format_rate(3, 10) == "3/10 30.0% [10.8, 60.3]"
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_complete_run_summary(complete):
    s = summarize(complete)
    assert s["status"] == "complete" and s["num_tasks"] == 5 and s["num_errors"] == 0
    assert [(t["attempted"], t["solved"], t["solved_cumulative"]) for t in s["trials"]] == [
        (5, 2, 2), (3, 1, 3), (2, 0, 3)]
    assert s["trials"][2]["success_rate_cumulative"] == pytest.approx(0.6)
    assert (s["trials"][2]["ci_low"], s["trials"][2]["ci_high"]) == pytest.approx(wilson_interval(3, 5))
    assert s["trials"][0]["mean_f1"] == pytest.approx(0.4)
    # Actor: 10 episodes x (100+10) tokens; reflector: one reflection per failure before the last trial.
    actor, reflector = s["usage"]["by_role"]["actor"], s["usage"]["by_role"]["reflector"]
    assert (actor["calls"], actor["prompt_tokens"], actor["completion_tokens"]) == (10, 1000, 100)
    assert (reflector["calls"], reflector["prompt_tokens"]) == (5, 250)
    assert s["usage"]["cost_usd"] == pytest.approx(0.015)
    assert s["wall_s"] > 0


def test_killed_run_reads_and_reports_partial(killed):
    s = summarize(killed)
    assert s["status"] == "partial"
    assert [(t["attempted"], t["solved_cumulative"]) for t in s["trials"]] == [(4, 1), (2, 2), (0, 2)]
    proc = run_cli("report", str(killed), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["trials"][2] == {**s["trials"][2]}
    assert "status **partial**" in run_cli("report", str(killed)).stdout
    frames = load_frames(killed)
    assert len(frames.trials) == 6  # the cut-off line is not a record
    assert frames.tasks.set_index("task_id").loc["d", "attempts"] == 1


def test_errored_records(errored):
    s = summarize(errored)
    assert s["errors"] == [{"task_id": "c", "trial": 2, "error": "TimeoutError: env"}]
    assert s["trials"][1]["errors"] == 1 and s["trials"][0]["errors"] == 0  # (b, 1) was retried
    md = run_cli("report", str(errored)).stdout
    assert "Errors (1)" in md and "TimeoutError: env" in md
    frames = load_frames(errored)
    assert frames.trials["errored"].sum() == 1
    assert frames.tasks.set_index("task_id").loc["c", "errors"] == 1


def test_corrupt_middle_line_is_a_clear_error(complete):
    lines = (complete / RECORDS).read_text().splitlines(keepends=True)
    lines[2] = "{not json\n"
    (complete / RECORDS).write_text("".join(lines))
    proc = run_cli("report", str(complete))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "line 3" in proc.stderr


def test_json_contract_keys(complete, killed):
    one = json.loads(run_cli("report", str(complete), "--format", "json").stdout)
    for key in ("benchmark", "agent", "strategy", "num_tasks", "trials", "usage", "errors"):
        assert key in one
    assert set(one["usage"]) >= {"calls", "prompt_tokens", "completion_tokens", "cost_usd"}
    for t in one["trials"]:
        assert set(t) >= {"trial", "attempted", "solved", "solved_cumulative"}
    many = json.loads(run_cli("report", str(complete), str(killed), "--format", "json").stdout)
    assert [m["run_dir"] for m in many] == [str(complete), str(killed)]


def test_comparison_of_several_runs(tmp_path):
    base = make_run(tmp_path / "runs" / "1-none", COMPLETE, strategy="none")
    refl = make_run(tmp_path / "runs" / "2-reflexion", {**COMPLETE, "d": [False, False, True]})
    short = make_run(tmp_path / "runs" / "3-react", {"a": [False, True]}, num_trials=2, agent="react")
    md = run_cli("report", str(tmp_path / "runs")).stdout  # a folder of runs stands for them all
    header = next(line for line in md.splitlines() if line.startswith("|  |"))
    assert header.split(" | ")[1:] == ["cot-context/none/scripted:x", "cot-context/reflexion/scripted:x",
                                       "react/reflexion/scripted:x |"]
    row = next(line for line in md.splitlines() if line.startswith("| solved by trial 3"))
    assert row == "| solved by trial 3 [95% CI] | 3/5 60.0% [23.1, 88.2] | 4/5 80.0% [37.6, 96.4] |  |"
    assert md.count("## hotpotqa / ") == 3
    frames = load_frames([base, refl, short])
    wide = frames.curve.pivot(index="trial", columns="run_id", values="solved_cumulative")
    assert wide.loc[3, "2-reflexion"] == 4 and wide["3-react"].isna().loc[3]
    # The same run twice: columns are told apart by the run directory's name.
    md_twice = report_markdown([r.summary for r in load([base, base])])
    assert "cot-context/none/scripted:x (1-none)" in md_twice


def test_frames_schema(complete):
    f = load_frames(complete)
    assert list(f.runs.columns[:3]) == ["run_id", "label", "run_dir"] and len(f.runs) == 1
    assert f.runs.loc[0, "success_rate"] == pytest.approx(0.6)
    assert len(f.trials) == 10 and len(f.tasks) == 5 and len(f.curve) == 3
    assert f.tasks.set_index("task_id")["solved_at_trial"].tolist()[:3] == [1, 1, 2]
    assert f.tasks.set_index("task_id")["solved_at_trial"].isna().sum() == 2
    assert f.calls.groupby("role").size().to_dict() == {"actor": 10, "reflector": 5}
    assert str(f.trials["started_at"].dtype).startswith("datetime64")
    assert f.run(f.runs.loc[0, "run_id"]).spec.task_ids == list(COMPLETE)


def test_task_story_shows_reflections(complete):
    run = load(complete)[0]
    assert pick_task(run) == "c"  # solved after a reflection: the most telling story
    story = task_story(run)
    assert "Question: capital of c?" in story and "gold answer: Paris" in story
    assert "reflection written: lesson 1 for c" in story
    assert "reflection in prompt: lesson 1 for c" in story
    assert "=== trial 2: solved" in story


def test_html_self_contained_with_drill_down(complete, killed, tmp_path):
    out, plot = tmp_path / "r.html", tmp_path / "curve.png"
    proc = run_cli("report", str(complete), str(killed), "--format", "html", "--output", str(out),
                   "--plot", str(plot))
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert page.count("src='data:image/png;base64,") == 2
    assert page.count("<details class='task'") == 9 and "lesson 1 for c" in page
    assert "id='comparison'" in page
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 5000


def test_html_drill_down_names_tasks_by_question(complete):
    """Issue 14 item 8: a reader scans questions, not hex ids; the id stays, smaller, beside it."""
    from reinagent.report.html import report_html

    page = report_html(load(complete))
    summaries = re.findall(r"<details class='task'[^>]*><summary>(.*?)</summary>", page)
    assert len(summaries) == 5
    assert "capital of c?" in summaries[2] and "<code class='tid'>c</code>" in summaries[2]


def test_plot_title_says_runs_differ_in_size(tmp_path):
    """Issue 14 item 8: "tasks 20/100" read like a ratio; runs of different sizes say so plainly."""
    from reinagent.report.plots import learning_curve_figure

    small = make_run(tmp_path / "small", {"a": [True], "b": [False, True]})
    big = make_run(tmp_path / "big", COMPLETE)
    title = learning_curve_figure([r.summary for r in load([small, big])]).axes[0].get_title()
    assert "runs of 2 and 5 tasks" in title and "/" not in title
    same = learning_curve_figure([r.summary for r in load([big, big])]).axes[0].get_title()
    assert same.endswith("5 tasks per run")


def test_markdown_and_json_do_not_import_pandas_or_matplotlib(complete):
    code = ("import sys; from reinagent.cli import main; sys.argv=['reinagent','report',%r]\n"
            "try: main()\nexcept SystemExit: pass\n"
            "print('HEAVY', sorted(m for m in ('pandas','matplotlib','torch','transformers','litellm') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code % str(complete)], capture_output=True, text=True)
    assert "HEAVY []" in proc.stdout, proc.stdout + proc.stderr


def test_bad_report_input(tmp_path):
    proc = run_cli("report", str(tmp_path / "nope"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    proc = run_cli("report", str(tmp_path))
    assert proc.returncode == 2 and "not a reinagent run directory" in proc.stderr


EXPERIMENT_CONFIGS = sorted(
    p for folder in ("hotpot_runs", "programming_runs", "alfworld_runs")
    for p in (Path(__file__).resolve().parent.parent / folder / "configs").glob("*.yaml"))


def test_experiment_configs_are_valid_run_configs():
    """Each paper experiment (agent x strategy) has a config that `reinagent run --config` accepts."""
    from reinagent.benchmarks import REGISTRY
    from reinagent.config import build_config
    from reinagent.strategy import ReflexionStrategy

    seen = set()
    for path in EXPERIMENT_CONFIGS:
        config = build_config(path)
        assert config.agent in REGISTRY[config.benchmark][2], path
        seen.add((config.benchmark, config.agent, config.strategy))
    strategies = set(ReflexionStrategy)
    for bench, agents in {"hotpotqa": ("react", "cot-context", "cot-no-context"),
                          "humaneval": ("coder",), "mbpp": ("coder",), "alfworld": ("react",)}.items():
        for agent in agents:
            assert {s for b, a, s in seen if (b, a) == (bench, agent)} == strategies, (bench, agent)


def write_training_log(directory: Path, steps: int = 5, name: str = "train_metrics.jsonl", tail: str = "") -> Path:
    """An RL trainer's per-step metrics (issue 18), the last step cut off mid-line when `tail`."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = [{"step": s, "loss": 1.0 / s, "reward_mean": 0.1 * s, "reward_std": 0.05, "kl": 0.01 * s,
             "tokens_per_s": 100.0 + s} for s in range(1, steps + 1)]
    (directory / name).write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)
    return directory


def test_training_log_is_reported_and_plotted(tmp_path):
    out = write_training_log(tmp_path / "rl-out", tail='{"step": 6, "loss": 0.1')  # a killed trainer
    md = run_cli("report", str(out))
    assert md.returncode == 0, md.stderr
    assert "# Training" in md.stdout and "5 steps" in md.stdout
    assert "| loss | 5 | 1 | 0.2 | 0.2 | 1 |" in md.stdout
    assert "| reward_mean | 5 | 0.1 | 0.5 | 0.1 | 0.5 |" in md.stdout
    page, plot = tmp_path / "r.html", tmp_path / "curve.png"
    proc = run_cli("report", str(out), "--format", "html", "-o", str(page), "--plot", str(plot))
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    assert "id='training'" in html and "id='plot-training-0'" in html and "id='plot-success'" not in html
    training_png = tmp_path / "curve-training.png"
    assert training_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not plot.exists()  # no runs: no trial curve


def test_training_figure_draws_loss_reward_and_kl_per_step(tmp_path):
    from reinagent.report.training import read_training_log, training_figure

    log = read_training_log(write_training_log(tmp_path / "o", name="metrics.jsonl") / "metrics.jsonl")
    fig = training_figure(log)
    titles = [ax.get_title() for ax in fig.axes]
    assert [t.split(" ")[0] for t in titles] == ["loss", "reward", "KL"]
    for ax, key in zip(fig.axes, ("loss", "reward_mean", "kl")):
        xs, ys = ax.lines[0].get_data()
        assert list(xs) == [1, 2, 3, 4, 5] and list(ys) == pytest.approx(log.series(key)[1])
    assert len(fig.axes[1].collections) == 1  # the +-std band around the mean reward


def test_run_and_training_log_together(complete, tmp_path):
    out = write_training_log(tmp_path / "rl-out")
    md = run_cli("report", str(complete), str(out)).stdout
    assert md.startswith("# hotpotqa / cot-context / reflexion") and "# Training" in md
    data = json.loads(run_cli("report", str(complete), str(out), "--format", "json").stdout)
    assert data["benchmark"] == "hotpotqa"  # the one-run JSON contract is unchanged


def test_not_a_training_log(tmp_path):
    """A metrics.jsonl of some other tool is not a training log; a corrupt one is a one-line error."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "metrics.jsonl").write_text('{"latency": 1}\n')
    proc = run_cli("report", str(other))
    assert proc.returncode == 2 and "not a reinagent run directory" in proc.stderr
    bad = write_training_log(tmp_path / "bad")
    lines = (bad / "train_metrics.jsonl").read_text().splitlines(keepends=True)
    lines[1] = "{oops\n"
    (bad / "train_metrics.jsonl").write_text("".join(lines))
    proc = run_cli("report", str(bad))
    assert proc.returncode == 2 and "line 2 is not JSON" in proc.stderr and "Traceback" not in proc.stderr
    lines[1] = '{"loss": 0.5}\n'  # a step without its number
    (bad / "train_metrics.jsonl").write_text("".join(lines))
    proc = run_cli("report", str(bad))
    assert proc.returncode == 2 and "line 2 has no numeric 'step'" in proc.stderr


def test_training_steps_without_some_metrics_are_kept(tmp_path):
    from reinagent.report.training import read_training_log

    out = write_training_log(tmp_path / "o", steps=3, tail='{"step": 4, "checkpoint": "saved"}\n')
    log = read_training_log(out / "train_metrics.jsonl")
    assert [r["step"] for r in log.rows] == [1, 2, 3, 4] and log.series("loss")[0] == [1, 2, 3]


def test_rl_output_directory_reports_its_rollouts_and_its_training(tmp_path):
    """`reinagent rl train` leaves OUTPUT/train_metrics.jsonl beside OUTPUT/rollouts/ (a run directory)."""
    out = write_training_log(tmp_path / "rl-out")
    make_run(out / "rollouts", COMPLETE)
    md = run_cli("report", str(out))
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("# hotpotqa / cot-context / reflexion") and "# Training" in md.stdout
    assert "| kl | 5 | 0.01 | 0.05 | 0.01 | 0.05 |" in md.stdout
