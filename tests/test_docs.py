"""The README and docs/*.md are checked like code: every file they name exists, every `reinagent`
command in their code blocks parses (verb, flags, values, benchmark/agent/split names, config
files), the cheap ones run, and the README's run / resume / report sequence runs end to end
against a loopback model server.
"""

from __future__ import annotations

import glob
import json
import re
import shlex
from pathlib import Path

import click
import pytest

from reinagent.llm.fake_server import FakeOpenAIServer
from tests.conftest import ROOT, run_cli

DOCS = [ROOT / "README.md", *sorted(Path(p) for p in glob.glob(str(ROOT / "docs" / "*.md")))]
# Top-level folders and files of the repository that docs refer to by path.
REPO_PREFIXES = ("hotpot_runs/", "alfworld_runs/", "programming_runs/", "docs/", "notebooks/", "perf/",
                 "scripts/", "reinagent/", "tests/", "examples/")
REPO_FILES = ("run_reinagent.sh", "run_tests.sh", "pyproject.toml")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$")  # DIR, RUN_DIR, DATA_DIR, MODEL_DIR


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[\w-]*\n(.*?)^```", text, re.S | re.M)


def _name(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


def _command_lines() -> list[tuple[str, str]]:
    """(doc, command) for every `reinagent ...` line of a code block, continuations joined and the
    trailing comment dropped."""
    found = []
    for doc in DOCS:
        for block in _code_blocks(doc.read_text(encoding="utf-8")):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"\s+#.*$", "", line.strip())
                if re.match(r"(\.venv/bin/)?reinagent\s", line) or line == "reinagent":
                    found.append((_name(doc), line))
    return found


COMMANDS = _command_lines()


def _referenced_paths() -> list[tuple[str, str]]:
    """(doc, path) for markdown links to local files and repo paths in code (inline or blocks)."""
    refs = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if not re.match(r"[a-z]+://|#|mailto:", target):
                refs.append((_name(doc), str((doc.parent / target.split("#")[0]).resolve().relative_to(ROOT))))
        code = " ".join(re.findall(r"`([^`\n]+)`", text)) + " " + " ".join(_code_blocks(text))
        for token in re.findall(r"[\w./*<>-]+", code):
            token = token.rstrip(".").removeprefix("./")
            if re.search(r"-v\d+$", token) or ".nbconvert." in token:
                continue  # a Gymnasium id (reinagent/hotpotqa-v1), or what nbconvert writes
            if token.startswith(REPO_PREFIXES) or token in REPO_FILES:
                refs.append((_name(doc), token))
    return sorted(set(refs))


def test_the_docs_have_commands_and_paths_to_check():
    assert len(COMMANDS) >= 20 and any(doc != "README.md" for doc, _ in COMMANDS)
    assert len(_referenced_paths()) >= 20


def _config_files() -> list[tuple[str, str]]:
    """(doc, file) for every `--config FILE` in the docs' code (blocks and inline), whatever the
    verb: the README once told readers to run `reinagent rl run --config rl.toml`, a file that
    existed nowhere."""
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for code in [*re.findall(r"`([^`\n]+)`", text), *_code_blocks(text)]:  # each span on its own
            found += [(_name(doc), file) for file in re.findall(r"--config[ =]([^\s`-][^\s`]*)", code)]
    return sorted(set(found))


def test_the_config_files_of_documented_commands_exist():
    files = _config_files()
    assert any(f.endswith(".toml") for _, f in files) and any(f.endswith(".yaml") for _, f in files)
    for doc, file in files:
        if PLACEHOLDER.match(file):
            continue  # FILE: a placeholder
        assert (ROOT / file).is_file(), f"{doc}: --config {file} does not exist"


def test_the_example_rl_toml_has_every_key_and_loads():
    """examples/rl.toml (which the README points at) sets every key of the seed, mentions every key
    of ours (some commented out), and loads without an error."""
    from reinagent.rl.config import SEED_KEYS, valid_keys
    from reinagent.rl.toml import load_rl_config, read_table

    path = ROOT / "examples" / "rl.toml"
    table = read_table(path)
    assert set(SEED_KEYS) <= set(table)
    text = path.read_text(encoding="utf-8")
    for key in valid_keys():
        assert re.search(rf"^#? ?{key} = ", text, re.M), f"examples/rl.toml does not mention {key}"
    config = load_rl_config(path)
    assert config.env_name == "arithmetic" and config.rollout == "react"


@pytest.mark.parametrize("doc, path", _referenced_paths(), ids=lambda v: v)
def test_every_referenced_file_exists(doc, path):
    if "<" in path or ">" in path:  # runs/<name>/...: a template, not a path
        pytest.skip("template")
    if "*" in path:
        assert glob.glob(str(ROOT / path)), f"{doc}: nothing matches {path}"
    else:
        assert (ROOT / path).exists(), f"{doc} names {path}, which does not exist"


def _parse(line: str, tmp_path: Path) -> tuple[list[str], click.Context]:
    """The click context a documented command line makes, without running the command.
    Placeholders (DIR, DATA_DIR, ...) become folders under tmp_path; `...` and [optional] brackets
    of a synopsis are dropped (the first choice of `a|b|c` is taken)."""
    from reinagent.cli import cli

    line = re.sub(r"\[([^\]]*)\]", r"\1", line).replace("...", " ")
    args = []
    for token in shlex.split(line)[1:]:
        token = token.split("|")[0] if "|" in token and not token.startswith("http") else token
        if PLACEHOLDER.match(token) or token == "HOST:PORT":
            if token.endswith("DIR"):
                (tmp_path / token).mkdir(exist_ok=True)
            token = "http://127.0.0.1:9" if token == "HOST:PORT" else str(tmp_path / token)
        args.append(token)
    ctx = cli.make_context("reinagent", list(args), resilient_parsing=False)
    group, path = cli, []
    rest = list(args)
    while isinstance(group, click.Group) and rest:
        name, *rest = rest
        cmd = group.get_command(ctx, name)
        assert cmd is not None, f"unknown verb {name!r}"
        path.append(name)
        if isinstance(cmd, click.Group):
            group = cmd
            continue
        return path, cmd.make_context(name, rest, parent=ctx)
    raise AssertionError(f"no command in {line!r}")


@pytest.mark.parametrize("doc, line", COMMANDS, ids=[f"{d}:{line[:60]}" for d, line in COMMANDS])
def test_every_documented_command_parses(doc, line, tmp_path):
    path, ctx = _parse(line, tmp_path)
    if path == ["run"]:
        _check_run_settings(ctx.params, tmp_path)


def _check_run_settings(params: dict, tmp_path: Path) -> None:
    """The settings a documented `reinagent run` names are valid: the same validation as a run,
    and benchmark, agent and split names checked against the registry (without loading data)."""
    import importlib

    from reinagent.benchmarks import REGISTRY
    from reinagent.config import build_config

    params = dict(params)
    params.pop("quiet", None)
    config_file = params.pop("config_file", None)
    if config_file:
        assert (ROOT / config_file).is_file(), f"--config {config_file} does not exist"
        config_file = ROOT / config_file
    config = build_config(config_file, **params)
    assert config.benchmark in REGISTRY, config.benchmark
    module, cls, agents, _ = REGISTRY[config.benchmark]
    if config.agent:
        assert config.agent in agents, f"agent {config.agent} of {config.benchmark}: {agents}"
    if config.split:
        bench = getattr(importlib.import_module(module), cls)
        assert config.split in bench.splits, f"split {config.split}: {bench.splits}"


def test_cheap_documented_commands_run():
    """`reinagent list`, `runs` and `show` on the committed runs: real runs of the real commands."""
    for doc, line in COMMANDS:
        args = shlex.split(line)[1:]
        if args[:1] == ["list"] or (args[:1] in (["runs"], ["show"]) and all(
                not PLACEHOLDER.match(a) for a in args)):
            proc = run_cli(*args)
            assert proc.returncode == 0, f"{doc}: {line}\n{proc.stderr}"
            assert proc.stdout.strip(), line


def test_the_readme_run_resume_report_sequence_runs_against_a_loopback_server(tmp_path):
    """The README's "Running experiments" block, made small (1 task, 1 trial) and pointed at a
    loopback model server: run with the documented config, resume, report as JSON."""
    block = next(b for b in _code_blocks((ROOT / "README.md").read_text()) if "reinagent run --config" in b)
    run_line = next(re.sub(r"\s+#.*$", "", ln) for ln in block.splitlines() if "run --config" in ln)
    run_dir = tmp_path / "run"
    with FakeOpenAIServer() as server:
        small = ["--num-envs", "1", "--num-trials", "1", "--model", "openai/fake", "--base-url", server.base_url,
                 "--run-dir", str(run_dir), "--no-cache", "--quiet"]
        proc = run_cli(*shlex.split(run_line)[1:], *small)
        assert proc.returncode == 0, proc.stderr
        assert server.count >= 1
        proc = run_cli("resume", str(run_dir), "--num-trials", "2", "--quiet")
        assert proc.returncode == 0, proc.stderr
    proc = run_cli("report", str(run_dir), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["agent"] == "react" and summary["strategy"] == "reflexion" and summary["num_trials"] == 2


def test_paper_script_flags_in_the_docs_exist():
    script = (ROOT / "run_reinagent.sh").read_text()
    known = set(re.findall(r"^\s+(--\w+)\)", script, re.M))
    for doc in DOCS:
        for block in _code_blocks(doc.read_text(encoding="utf-8")):
            for line in block.splitlines():
                if line.strip().startswith("./run_reinagent.sh"):
                    for flag in re.findall(r"(--\w+)", re.sub(r"\s+#.*$", "", line)):
                        assert flag in known, f"{doc.name}: run_reinagent.sh has no {flag}"


def test_notebooks_resolve_runs_relative_to_the_repo_root(monkeypatch):
    """Run from notebooks/ (where Jupyter starts a kernel), each notebook's set-up moves to the
    repository root, so `runs/` is the same folder the CLI writes to, not notebooks/runs/."""
    import os

    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        setup = "".join(cells[1]["source"])  # the cell right after `parameters`
        head = setup[: setup.index("os.chdir(ROOT)") + len("os.chdir(ROOT)")]
        monkeypatch.chdir(ROOT / "notebooks")
        exec(compile(head, str(path), "exec"), {})  # noqa: S102 - the notebook's own lines
        assert Path(os.getcwd()) == ROOT, path.name


def test_docs_speak_to_readers_not_to_the_issue_tracker():
    """A reader has no "issue 2": the docs name the thing itself (they once said "the keys of issue 2")."""
    for doc in DOCS:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            assert not re.search(r"\bissue \d+\b", line, re.I), f"{doc.name}:{number}: {line.strip()}"


def test_every_setting_has_a_flag_in_help_and_a_line_in_the_cli_page():
    """A setting that exists only in RunConfig (as max_prompt_tokens once did) is undocumented."""
    from reinagent.cli import run
    from reinagent.config import RunConfig, flag_name

    flags = {opt for param in run.params for opt in getattr(param, "opts", []) + getattr(param, "secondary_opts", [])}
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for setting in RunConfig.model_fields:
        flag = flag_name(setting)
        assert flag in flags, f"`reinagent run` has no {flag}"
        assert flag in page or f"`{setting}" in page, f"docs/cli.md does not mention {flag}"
    assert all(param.help for param in run.params if isinstance(param, click.Option)), "a flag without help"


def test_the_readme_is_a_landing_page_and_every_page_is_reachable():
    """The README stays short (what it is, set-up, a tour, links); the reference lives in docs/,
    each page linked from the docs index, which the README links."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200, "README.md is over 200 lines: move the reference into docs/"
    assert "](docs/README.md)" in readme
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([\w.-]+\.md)(?:#[\w-]*)?\)", index))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert pages - linked == set(), f"docs pages the index does not link: {sorted(pages - linked)}"
