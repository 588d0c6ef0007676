"""The CLI contract: verbs, one-line errors naming the valid choices, the JSON report keys."""

from __future__ import annotations

import json

import pytest

from tests.conftest import one_line_error, run_cli



@pytest.mark.parametrize(
    "args, needles",
    [
        (["--benchmark", "webshop"], ["unknown benchmark 'webshop'", "hotpotqa", "alfworld"]),
        (["--agent", "reflexion-bot"], ["unknown agent 'reflexion-bot'", "react", "cot-context", "cot-no-context"]),
        (["--strategy", "always"], ["unknown strategy 'always'", "none", "last_attempt", "last_attempt_and_reflexion"]),
        (["--model", "gpt4"], ["unknown model backend", "local", "scripted:FILE", "--base-url"]),
        (["--num-trials", "0"], ["--num-trials must be a positive whole number, got 0"]),
        (["--num-envs", "-3"], ["--num-envs must be a positive whole number, got -3"]),
        (["--base-url", "notaurl", "--model", "openai/x"], ["--base-url must be an http(s) URL", "'notaurl'"]),
        (["--split", "test"], ["unknown split 'test'", "hard100"]),
        (["--agent", "react", "--split", "dev-qa7405"], ["no paragraphs"]),
        (["--model", "scripted:/nonexistent.yaml"], ["does not exist"]),
        # a model flag the chosen models do not use: refused before the run, not recorded
        (["--model", "local", "--base-url", "http://127.0.0.1:1/v1"],
         ["--base-url is not used by model local", "openai/NAME", "drop --base-url"]),
        (["--model", "hf", "--reflector-model", "local", "--api-key-env", "MY_KEY"],
         ["--api-key-env is not used by model hf and local"]),
    ],
)
def test_bad_run_input(tmp_path, args, needles):
    proc = run_cli("run", "--run-dir", str(tmp_path / "r"), "--num-envs", "1", *args)
    one_line_error(proc, *needles)
    assert not (tmp_path / "r").exists(), "no run directory for a run that never started"


def test_malformed_yaml(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("benchmark: hotpotqa\nstrategy: [reflexion\n")
    one_line_error(run_cli("run", "--config", str(bad)), "malformed YAML", "bad.yaml", "line")
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("benchmark: hotpotqa\nnum_trails: 3\n")
    one_line_error(run_cli("run", "--config", str(unknown)), "unknown setting 'num_trails'", "num_trials")


def test_missing_api_key_reported_before_work(tmp_path):
    env = {"ANTHROPIC_API_KEY": ""}
    proc = run_cli("run", "--model", "anthropic/claude-3-5-haiku-latest", "--run-dir", str(tmp_path / "r"), env=env)
    one_line_error(proc, "ANTHROPIC_API_KEY")
    assert not (tmp_path / "r").exists()


def test_resume_errors(tmp_path):
    one_line_error(run_cli("resume", str(tmp_path / "nope")), "does not exist")
    (tmp_path / "empty").mkdir()
    one_line_error(run_cli("resume", str(tmp_path / "empty")), "not a reinagent run directory")


def test_corrupt_record_file_names_the_line(tmp_path, script):
    model = script([], default="Thought: x\nAction: Finish[wrong]")
    run_dir = tmp_path / "r"
    assert run_cli("run", "--num-envs", "2", "--num-trials", "2", "--model", model, "--run-dir", str(run_dir),
                   "--quiet").returncode == 0
    path = run_dir / "records.jsonl"
    lines = path.read_text().splitlines()
    lines[1] = '{"task_id": "x", "trial": "not a number"'
    path.write_text("\n".join(lines) + "\n")
    one_line_error(run_cli("resume", str(run_dir)), "corrupt record file", "line 2")
    one_line_error(run_cli("report", str(run_dir)), "line 2")


def test_json_report_keys(tmp_path, script):
    model = script([{"when": "Your failed attempt", "reply": "Check the paragraph."},
                    {"when": "Check the paragraph", "reply": "Action: Finish[Gesellschaft mit beschränkter Haftung]"}],
                   default="Thought: x\nAction: Finish[wrong]")
    run_dir = tmp_path / "r"
    assert run_cli("run", "--num-envs", "1", "--num-trials", "4", "--model", model, "--run-dir", str(run_dir),
                   "--quiet").returncode == 0
    proc = run_cli("report", str(run_dir), "--format", "json")
    report = json.loads(proc.stdout)
    for key in ("benchmark", "agent", "strategy", "num_tasks", "trials", "usage", "errors"):
        assert key in report
    assert (report["benchmark"], report["agent"], report["strategy"]) == ("hotpotqa", "cot-context", "reflexion")
    assert report["num_tasks"] == 1
    assert [t["trial"] for t in report["trials"]] == [1, 2, 3, 4]  # every trial, even with nothing attempted
    assert [t["attempted"] for t in report["trials"]] == [1, 1, 0, 0]
    assert [t["solved"] for t in report["trials"]] == [0, 1, 0, 0]
    assert [t["solved_cumulative"] for t in report["trials"]] == [0, 1, 1, 1]
    assert set(report["usage"]) >= {"calls", "prompt_tokens", "completion_tokens", "cost_usd"}
    assert report["usage"]["calls"] == 3  # actor + reflector in trial 1, actor in trial 2
    assert report["errors"] == []
    md = run_cli("report", str(run_dir)).stdout
    assert "| trial |" in md


def test_list_and_help():
    proc = run_cli("list")
    assert proc.returncode == 0
    for word in ("hotpotqa", "humaneval", "mbpp", "alfworld", "last_attempt_and_reflexion", "scripted", "litellm"):
        assert word in proc.stdout
    assert run_cli("--help").returncode == 0


def test_every_setting_a_resume_may_move_is_a_resume_option_declared_as_run_declares_it():
    """`resume` takes each OVERRIDABLE setting (and --store, --num-trials, --quiet) with the type
    `run` gives it; only the help text differs. A setting missing from resume, or typed apart
    from run's, fails here."""
    import click

    from reinagent.cli import cli
    from reinagent.resuming import OVERRIDABLE

    ctx = click.Context(cli)
    run, resume = (cli.get_command(ctx, name) for name in ("run", "resume"))

    def declared(command) -> dict:
        return {p.name: {k: v for k, v in p.to_info_dict().items() if k != "help"}
                for p in command.params if isinstance(p, click.Option)}

    of_run, of_resume = declared(run), declared(resume)
    for name in (*OVERRIDABLE, "store", "num_trials", "quiet"):
        assert name in of_resume, f"resume has no --{name.replace('_', '-')}"
        assert of_resume[name] == of_run[name], name
