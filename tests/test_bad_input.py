"""Bad input, round 4 (issue 38 §7 and the small ones of §12): each is one line and exit 2, never
"internal error", a traceback, a silently ignored setting or a loop that never ends.

Every case runs the real CLI in a subprocess. The run commands use a scripted model, so a case
that got past its check would start a run: a test then also checks that no run directory appeared.
"""

from __future__ import annotations

import pytest

from tests.conftest import one_line_error, run_cli

SCRIPT_RULES: list[dict] = []


def _run(tmp_path, *args: str, env: dict | None = None, timeout: float = 120):
    return run_cli("run", "--run-dir", str(tmp_path / "r"), "--num-envs", "1", *args, env=env, timeout=timeout)


# --- YAML configs --------------------------------------------------------------------------------

@pytest.mark.parametrize("content, needles", [
    (b"benchmark: hotpotqa\nmodel: \"\xff\xfe\"\n", ["not UTF-8 text", "bad.yaml"]),
    (b"a: " + b"[" * 10_000 + b"]" * 10_000 + b"\n", ["nested too deeply", "bad.yaml"]),
    (b"num_trials: 3\nstrategy: none\nnum_trials: 5\n", ["'num_trials' given twice", "lines 1 and 3", "line 3"]),
    (b"{num_envs: 1, num_envs: 2}\n", ["'num_envs' given twice"]),
    (b"num_trails: 3\n", ["unknown setting 'num_trails'", "did you mean 'num_trials'?"]),
    (b"[rl]\nenv_name = \"arithmetic\"\n", ["it looks like TOML", "takes YAML", "reinagent rl run|train|eval"]),
    (b"model = \"local\"\n", ["it looks like TOML", "takes YAML"]),
])
def test_bad_yaml_configs(tmp_path, content, needles):
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    proc = _run(tmp_path, "--config", str(path))
    one_line_error(proc, *needles)
    assert proc.returncode == 2 and not (tmp_path / "r").exists()


def test_a_toml_file_given_to_run_says_yaml_is_expected(tmp_path):
    from tests.conftest import ROOT

    proc = _run(tmp_path, "--config", str(ROOT / "examples" / "rl.toml"))
    one_line_error(proc, "rl.toml is TOML", "takes a YAML file", "reinagent rl run|train|eval --config")
    assert proc.returncode == 2


# --- numbers: bounded, finite, whole ---------------------------------------------------------------

@pytest.mark.parametrize("args, needles", [
    (["--temperature", "inf"], ["--temperature must be a finite number"]),
    (["--temperature", "nan"], ["--temperature must be a finite number"]),
    (["--temperature", "1e9"], ["--temperature must be at most 2.0"]),
    (["--search-temperature", "inf", "--rollout", "tot"], ["--search-temperature must be a finite number"]),
    (["--mcts-exploration", "inf", "--rollout", "mcts"], ["--mcts-exploration must be a finite number"]),
    (["--max-tokens", "1e20"], ["'1e20' is not a valid integer", "--help"]),
    (["--max-tokens", "100000000000000000000"], ["--max-tokens must be at most 1000000"]),
    (["--seed", "12345678901234567890123"], ["--seed must be at most 9223372036854775807"]),
    (["--num-envs", "100000000000"], ["--num-envs must be at most"]),
    (["--max-concurrency", "100000000000"], ["--max-concurrency must be at most"]),
    (["--bogus-flag"], ["No such option '--bogus-flag'", "run --help"]),  # click's own: one line too
])
def test_out_of_range_numbers_are_one_line_errors(tmp_path, script, args, needles):
    proc = _run(tmp_path, "--model", script(SCRIPT_RULES), *args)
    one_line_error(proc, *needles)
    assert proc.returncode == 2 and not (tmp_path / "r").exists()


@pytest.mark.timeout(120)
def test_a_huge_trial_count_is_refused_at_once(tmp_path, script):
    """100,000,000,000 trials hung at 100% CPU in the scheduler's quadratic loop, deaf to Ctrl-C."""
    proc = _run(tmp_path, "--model", script(SCRIPT_RULES), "--num-trials", "100000000000", timeout=60)
    one_line_error(proc, "--num-trials must be at most 1000")
    assert not (tmp_path / "r").exists()
    done = run_cli("run", "--run-dir", str(tmp_path / "ok"), "--num-envs", "1", "--num-trials", "1", "--quiet",
                   "--model", script(SCRIPT_RULES), "--agent", "cot-context", "--no-cache")
    assert done.returncode == 0, done.stderr
    proc = run_cli("resume", str(tmp_path / "ok"), "--num-trials", "100000000000", timeout=60)
    one_line_error(proc, "--num-trials must be at most 1000")


# --- the environment, the run directory, the shell's arguments -------------------------------------

@pytest.mark.parametrize("value", ["0", "abc", "\u00b2", "-3", "99999999999"])
def test_sandbox_workers_from_the_environment_are_checked(tmp_path, script, value):
    proc = _run(tmp_path, "--benchmark", "humaneval", "--agent", "coder", "--model", script(SCRIPT_RULES),
                "--allow-weak-sandbox", env={"REINAGENT_SANDBOX_WORKERS": value})
    one_line_error(proc, "REINAGENT_SANDBOX_WORKERS must be a whole number from 1 to 1024", repr(value))
    assert proc.returncode == 2 and not (tmp_path / "r").exists()


def test_env_count_refuses_zero_and_other_digits(monkeypatch):
    from reinagent.errors import ConfigError, env_count

    monkeypatch.setenv("REINAGENT_X", "7")
    assert env_count("REINAGENT_X", 1) == 7
    for bad in ("0", "\u00b2", "\u0663", "1" * 4400):  # superscript two, Arabic-Indic three, past int()'s limit
        monkeypatch.setenv("REINAGENT_X", bad)
        with pytest.raises(ConfigError, match="REINAGENT_X must be a whole number"):
            env_count("REINAGENT_X", 1)


@pytest.mark.parametrize("run_dir", ["/proc/x", "/proc/self/x/y"])
def test_a_run_directory_that_cannot_be_made_is_one_line(tmp_path, script, run_dir):
    proc = run_cli("run", "--run-dir", run_dir, "--num-envs", "1", "--model", script(SCRIPT_RULES),
                   "--agent", "cot-context")
    one_line_error(proc, f"cannot create run directory {run_dir}", "--run-dir")
    assert proc.returncode == 2


@pytest.mark.parametrize("key, needle", [
    ("\u00b2", "no task of"),  # isdigit() is True for it, int() refused it: "internal error"
    ("9" * 5000, "out of range"),
    ("0", "out of range"),
])
def test_show_with_a_strange_task_number(tmp_path, script, key, needle):
    run_dir = tmp_path / "run"
    done = run_cli("run", "--run-dir", str(run_dir), "--num-envs", "2", "--num-trials", "1", "--quiet",
                   "--model", script(SCRIPT_RULES), "--agent", "cot-context", "--no-cache")
    assert done.returncode == 0, done.stderr
    proc = run_cli("show", str(run_dir), key)
    one_line_error(proc, needle)
    assert proc.returncode == 2


# --- search and multi-turn settings the run's rollout does not read ----------------------------

@pytest.mark.parametrize("args, needles", [
    (["--mcts-iterations", "3"], ["--mcts-iterations is read only by --rollout mcts", "rollout is react"]),
    (["--tot-breadth", "2"], ["--tot-breadth is read only by --rollout tot", "add --rollout tot"]),
    (["--value-samples", "2"], ["--value-samples is read only by --rollout tot or mcts"]),
    (["--tot-breadth", "2", "--rollout", "mcts"], ["--tot-breadth is read only by --rollout tot", "rollout is mcts"]),
    (["--max-turns", "3", "--rollout", "tot"], ["--max-turns is read only by --rollout multi-turn"]),
])
def test_search_settings_without_their_rollout_are_refused(tmp_path, script, args, needles):
    proc = _run(tmp_path, "--model", script(SCRIPT_RULES), *args)
    one_line_error(proc, *needles)
    assert proc.returncode == 2 and not (tmp_path / "r").exists()


def test_a_search_setting_from_yaml_names_its_file(tmp_path, script):
    path = tmp_path / "c.yaml"
    path.write_text("mcts_children: 3\n")
    proc = _run(tmp_path, "--config", str(path), "--model", script(SCRIPT_RULES))
    one_line_error(proc, "mcts_children (in", "c.yaml) is read only by --rollout mcts")


# --- stores ------------------------------------------------------------------------------------------

def test_a_three_slash_sqlite_url_meant_absolute_gets_the_four_slash_hint(tmp_path):
    relative = str(tmp_path / "runs.db").lstrip("/")  # sqlite:///tmp/.../runs.db: relative to the current directory
    proc = run_cli("store", "ls", f"sqlite:///{relative}")
    one_line_error(proc, "does not exist", f"four: sqlite:////{relative}")
    assert proc.returncode == 2
    nowhere = run_cli("store", "ls", "sqlite:///no-such-folder-38/x.db")  # no absolute reading either
    assert "four" not in one_line_error(nowhere, "does not exist")
