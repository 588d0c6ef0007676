"""Issue 45's "newcomer's stumbles": what a new user met on a fresh clone, each as it happened."""

from __future__ import annotations

import re

from reinagent.config import RunConfig
from tests.conftest import run_cli


def test_run_help_shows_the_default_strategy():
    """Was: `--strategy` listed the four values without saying which one a run gets."""
    text = " ".join(run_cli("run", "--help").stdout.split())
    default = RunConfig.model_fields["strategy"].default.value
    assert re.search(rf"--strategy TEXT none, last_attempt, reflexion or last_attempt_and_reflexion \(default {default}\)",
                     text), text[:300]


def test_trials_the_hidden_tests_never_judged_say_so(tmp_path, script):
    """Under --evaluator internal a program that fails its own (wrong) test is not shown to the
    hidden tests while trials are left. Was: those trials read "solved 0, pass rate 0.000" in
    the report, as if the hidden tests had failed them."""
    from tests.test_evaluator import IMPLEMENT, REFLECT, RIGHT, TESTS_PROMPT, WRONG_TEST

    model = script([{"when": REFLECT, "reply": "Reflection: my test may be wrong."},
                    {"when": TESTS_PROMPT, "reply": WRONG_TEST}, {"when": IMPLEMENT, "reply": RIGHT}], default="no")
    run_dir = tmp_path / "run"
    done = run_cli("run", "--benchmark", "humaneval", "--agent", "coder", "--num-envs", "1", "--num-trials", "3",
                   "--model", model, "--run-dir", str(run_dir), "--no-cache", "--quiet")
    assert done.returncode == 0, done.stderr
    md = run_cli("report", str(run_dir)).stdout
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in md.splitlines() if re.match(r"\| [123] \|", line)}
    assert rows["1"][2] == "not judged" and rows["1"][5] == "not judged"
    assert rows["2"][2] == "not judged" and rows["2"][5] == "not judged"
    assert rows["3"][2] == "1" and rows["3"][5] == "1.000"  # the last trial is judged: the right program passes


class V1Only:
    """A loopback server that, like vLLM or llama.cpp, serves its API under /v1 only."""

    def __init__(self, v1: bool = True):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.paths: list[str] = []
        paths, serve_v1 = self.paths, v1

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self):
                paths.append(self.path)
                ok = serve_v1 and self.path.startswith("/v1/")
                body = b'{"data": [{"id": "fake"}]}' if ok else b'{"detail": "Not Found"}'
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _reply

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_a_base_url_without_v1_is_caught_before_the_run_with_the_fix(tmp_path):
    """Was: the check passed (any answer but 401/403), the run directory was made, and every
    episode failed with "HTTP 404", naming neither the URL nor the fix."""
    from tests.conftest import one_line_error

    with V1Only() as url:
        proc = run_cli("run", "--benchmark", "arithmetic", "--num-envs", "1", "--num-trials", "1", "--model",
                       "openai/fake", "--base-url", url, "--run-dir", str(tmp_path / "r"), "--no-cache", "--quiet")
    line = one_line_error(proc, url, "HTTP 404", f"--base-url {url}/v1")
    assert proc.returncode == 2 and not (tmp_path / "r").exists(), line


def test_a_server_without_models_anywhere_gets_a_warning_not_a_refusal(capsys):
    from reinagent.preflight import check_openai_server

    with V1Only(v1=False) as url:
        check_openai_server(url, "openai/fake", None, resuming=False)  # some servers have no /models
    assert f"warning: model server {url} answered HTTP 404 on /models" in capsys.readouterr().err


def test_a_missing_openai_key_is_named_without_importing_litellm(tmp_path):
    """Was: 21 s (litellm's import, under load) before "needs OPENAI_API_KEY". Now the variable is
    checked first: litellm blocked from importing, the same one line comes, exit 2."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT, one_line_error

    code = "import sys; sys.modules['litellm'] = None\nfrom reinagent.cli import main; main()"
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run([sys.executable, "-c", code, "run", "--benchmark", "arithmetic", "--model", "openai/gpt-4o-mini",
                           "--num-envs", "1", "--run-dir", str(tmp_path / "r"), "--quiet"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    one_line_error(proc, "openai/gpt-4o-mini", "OPENAI_API_KEY")
    assert proc.returncode == 2 and not (tmp_path / "r").exists()


def test_the_key_table_names_what_litellm_asks_for(monkeypatch):
    from reinagent.llm import KEY_VARIABLES, import_litellm

    litellm = import_litellm()
    for provider, names in KEY_VARIABLES.items():
        for name in names:
            monkeypatch.delenv(name, raising=False)
        assert set(litellm.validate_environment(model=f"{provider}/some-model")["missing_keys"]) == set(names), provider


def test_hf_on_the_cpu_says_once_that_local_is_faster(capsys, monkeypatch):
    """Was: `--model hf` ran 16 min for 3 episodes on the CPU with no word that `local` (the same
    weights on OpenVINO, batched) is many times faster there."""
    import importlib.util

    import pytest
    import torch

    from reinagent.errors import ConfigError
    from reinagent.llm import make_llm
    from reinagent.llm.local import embedded_gguf

    try:
        embedded_gguf()
    except ConfigError:
        pytest.skip("needs the embedded model")
    if importlib.util.find_spec("openvino_genai") is None or importlib.util.find_spec("transformers") is None:
        pytest.skip("needs the local and hf extras")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("reinagent.llm._SAID", set())
    make_llm("hf")
    make_llm("hf", role="reflector")  # actor and reflector: one line
    lines = [line for line in capsys.readouterr().err.splitlines() if "--model local" in line]
    assert len(lines) == 1 and lines[0].startswith("hf: transformers on the CPU"), lines
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr("reinagent.llm._SAID", set())
    make_llm("hf")
    assert "--model local" not in capsys.readouterr().err  # on a GPU transformers is right


def test_progress_in_a_log_file_is_whole_lines(tmp_path, script, monkeypatch):
    """Was: stderr to a file held tqdm's \\r redraws, glued to each "trial k/N" line. Where stderr
    is no terminal, progress comes as whole lines (at most once a minute) and no \\r is written."""
    import subprocess

    from tests.conftest import CLI, ROOT

    model = script([], default="Thought: guess.\nAction: Finish[1]")
    proc = subprocess.run([*CLI, "run", "--benchmark", "arithmetic", "--num-envs", "3", "--num-trials", "2", "--model",
                           model, "--run-dir", str(tmp_path / "r"), "--no-cache"],  # progress on; stderr is a pipe
                          capture_output=True, cwd=ROOT, timeout=300)  # bytes: text mode would turn \r into \n
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert "\r" not in err
    trial_lines = [line for line in err.split("\n") if "attempted" in line]
    assert len(trial_lines) == 2 and all(line.startswith("trial ") for line in trial_lines), trial_lines

    import io

    from reinagent import schedule

    monkeypatch.setattr(schedule, "LINE_EVERY_S", 0.0)
    monkeypatch.setattr(schedule.sys, "stderr", io.StringIO())
    bar = schedule._bar(True, 3, "trial 1")
    bar.set_postfix_str("4 model calls")
    bar.update(1)
    bar.update(1)
    bar.update(1)  # the last one: the trial's own line says it
    assert schedule.sys.stderr.getvalue().splitlines() == ["progress (trial 1): 1/3 episodes, 4 model calls",
                                                           "progress (trial 1): 2/3 episodes, 4 model calls"]


def test_reinagent_list_columns_line_up():
    """Was: `arithmetic20 cot` stood two columns right of every other row (a fixed width of 10)."""
    from reinagent.benchmarks import REGISTRY

    out = run_cli("list").stdout.splitlines()
    rows = [line for line in out if line[2:].split(" ")[0] in REGISTRY]
    assert len(rows) == len(REGISTRY)
    abouts = {line.index(about) for line, (_, _, _, about) in zip(rows, REGISTRY.values())}
    agents = {line.index(", ".join(entry[2]), 2 + len(name)) for line, (name, entry) in zip(rows, REGISTRY.items())}
    assert len(abouts) == 1 and len(agents) == 1, rows


def test_two_seeds_of_one_setting_get_two_column_names(tmp_path):
    """Was: runs/seed0/r and runs/seed1/r were both "cot-context/reflexion/scripted:x (r)"."""
    from reinagent.report.labels import unique_labels
    from reinagent.report.loading import load
    from reinagent.report.markdown import comparison_markdown
    from tests.test_report import COMPLETE, make_run

    a = make_run(tmp_path / "seed0" / "r", COMPLETE)
    b = make_run(tmp_path / "seed1" / "r", COMPLETE)
    summaries = [r.summary for r in load([a, b])]
    assert unique_labels(summaries) == ["cot-context/reflexion/scripted:x (seed0/r)",
                                        "cot-context/reflexion/scripted:x (seed1/r)"]
    header = comparison_markdown(summaries).splitlines()[2]
    assert "(seed0/r)" in header and "(seed1/r)" in header
    summaries[0]["seed"], summaries[1]["seed"] = 0, 1
    assert unique_labels(summaries)[1] == "cot-context/reflexion/scripted:x (seed 1, seed1/r)"
    assert unique_labels([summaries[0], summaries[0]])[1].endswith("(r)")  # one run given twice


def test_strategies_side_by_side_compares_one_experiment_and_says_what_it_left_out(tmp_path):
    """Was: the notebooks' "Strategies side by side" pooled every run of the benchmark in runs/,
    other models and task sets included, without saying so."""
    from reinagent.report.loading import load, strategy_runs, strategy_runs_line
    from tests.test_report import COMPLETE, make_run

    make_run(tmp_path / "reflexion", COMPLETE, strategy="reflexion")
    make_run(tmp_path / "none", COMPLETE, strategy="none")
    make_run(tmp_path / "other-model", COMPLETE, strategy="none", model="scripted:y")
    make_run(tmp_path / "other-tasks", {"a": [True]}, strategy="none")
    runs = load(tmp_path)
    this = next(r for r in runs if r.run_dir.name == "reflexion")
    same, others = strategy_runs(runs, this)
    assert sorted(r.run_dir.name for r in same) == ["none", "reflexion"] and len(others) == 2
    line = strategy_runs_line(same, others, tmp_path)
    assert "none (none)" in line and "reflexion (reflexion)" in line and "2 other run(s) there left out" in line


def test_the_compare_pages_legend_does_not_claim_three_trials(tmp_path):
    """Was: "no (3): unsolved after 3 trials" above a matrix of 2-trial runs."""
    from fastapi.testclient import TestClient

    from reinagent.viewer.app import create_app
    from tests.test_report import make_run

    make_run(tmp_path / "a", {"x": [False, False]}, num_trials=2)
    make_run(tmp_path / "b", {"x": [False, True]}, num_trials=2)
    page = TestClient(create_app(tmp_path), base_url="http://127.0.0.1").get("/compare?run=a&run=b").text
    assert "no (2)" in page and "after 3 trials" not in page


def test_the_readme_set_up_is_the_facts_and_names_the_scripts_flags():
    """Was: 30 lines of measurement history (commit hashes, suite-under-load figures) around what
    to run, how long and how much disk; run_reinagent.sh's flags only in its --help."""
    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme[readme.index("## Set-up"):readme.index("## A five-minute tour")]
    assert not re.search(r"\b[0-9a-f]{7,40}\b", setup), "a commit hash in the set-up section: history goes to docs/"
    assert len(setup.splitlines()) <= 50
    script = (ROOT / "run_reinagent.sh").read_text(encoding="utf-8")
    flags = set(re.findall(r"^\s+(--[a-z_]+)\)", script, re.M))
    assert flags >= {"--num_trials", "--num_envs", "--run_name", "--use_memory", "--is_resume"}
    assert all(flag in setup for flag in flags), sorted(f for f in flags if f not in setup)
    history = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    assert "## Set-up and the test suite" in history and "1547 passed" in history
