"""A run directory is data, never a path to your files (issue 54, items 2, 4 and 6).

The red team's findings, each a test here: a link planted at `.report.md.partial` (or any name a
run writes) made `run --run-dir` / `resume` overwrite the file it named (a stand-in for ~/.bashrc;
a dangling one created ~/.ssh/rc); a run directory's name reached a printed command unquoted; a
YAML alias bomb or a 100,000-digit number in one setting took 57 s and 2.9 GB, or an "internal
error"; `http://api.openai.com:PORT` counted as OpenAI's endpoint; a planted `cache_dir` and
`cache_scope: shared` were obeyed; `show`, `runs` and the viewer printed OSC 52 / OSC 0 / U+202E
from a planted spec, and the viewer served runs linked in from outside its folder.

The names a run writes are enumerated from the code as it runs, not from a list kept by hand: a
launcher installs an audit hook (sys.addaudithook) and records every open for writing inside the
run directory while `run`, `resume`, `repair` and `report --output` work on it.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reinagent.store import RECORDS, SPEC
from tests.conftest import CLI, ROOT, one_line_error, run_cli, write_script

ESCAPES = ("\x1b", "\x07", "\u202e", "\x9d")
PLANTED_MODEL = "gpt\x1b]52;c;cHduZWQ=\x07-x\x1b]0;owned title\x07\u202eevil"

LAUNCHER = textwrap.dedent('''
    """Run the reinagent CLI, recording every open for writing inside one folder (audit hook)."""
    import atexit, json, os, sys
    out, watch, *args = sys.argv[1:]
    watch = os.path.realpath(watch)
    seen = []
    WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def hook(event, a):
        if event == "open" and isinstance(a[0], (str, bytes, os.PathLike)) and a[2] is not None and a[2] & WRITE:
            path = os.fsdecode(a[0])
            if os.path.realpath(os.path.dirname(os.path.abspath(path))) == watch:
                seen.append([os.path.basename(path), a[2]])

    atexit.register(lambda: open(out, "a").write("".join(json.dumps(s) + "\\n" for s in seen)))
    sys.addaudithook(hook)
    sys.argv = ["reinagent", *args]
    from reinagent.cli import main
    main()
''')
RANDOM_SCRATCH = re.compile(r"^\.(.+)\.[0-9a-f]{12}\.tmp$")  # runfiles.replace_file's fresh names


def _model(tmp: Path) -> str:
    return write_script(tmp / "script.yaml", [], default="Thought: x\nAction: Finish[wrong]")


def _run_args(model: str, run_dir: Path, *extra: str) -> list[str]:
    return ["run", "--num-envs", "2", "--num-trials", "2", "--model", model, "--run-dir", str(run_dir),
            "--quiet", "--no-cache", *extra]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, list[tuple[str, int]]]:
    """A finished run, and every (name, open flags) that run, resume, repair and report --output
    opened for writing in its directory."""
    tmp = tmp_path_factory.mktemp("written")
    launcher, log, run_dir = tmp / "launch.py", tmp / "opens.jsonl", tmp / "run"
    launcher.write_text(LAUNCHER)
    model = _model(tmp)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REINAGENT_STATE_DIR": str(tmp / "state")}

    def launch(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(launcher), str(log), str(run_dir), *args],
                              capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)

    run_dir.mkdir()
    assert launch(*_run_args(model, run_dir)).returncode == 0
    assert launch("resume", str(run_dir), "--num-trials", "3", "--quiet").returncode == 0
    good = (run_dir / RECORDS).read_bytes()
    (run_dir / RECORDS).write_bytes(b"not a record\n" + good)
    assert launch("repair", str(run_dir)).returncode == 0
    assert (run_dir / RECORDS).read_bytes() == good
    assert launch("report", str(run_dir), "--output", str(run_dir / "report.md")).returncode == 0
    opens = [tuple(json.loads(line)) for line in log.read_text().splitlines()]
    return run_dir, opens


def test_every_write_in_a_run_directory_refuses_links(written):
    """Each open for writing inside a run directory either refuses a link (O_NOFOLLOW) or creates
    a new file that cannot be one (O_CREAT|O_EXCL); whole files are then renamed into place."""
    _, opens = written
    becomes = {(m.group(1) if (m := RANDOM_SCRATCH.match(name)) else name) for name, _ in opens}
    assert {SPEC, RECORDS, "run.lock", "records.quarantine.jsonl", "report.md", "report.html"} <= becomes, becomes
    unsafe = sorted({name for name, flags in opens
                     if not flags & os.O_NOFOLLOW and not (flags & os.O_CREAT and flags & os.O_EXCL)})
    assert unsafe == [], f"opened for writing through whatever link is there: {unsafe}"


def _planted_names(opens) -> list[str]:
    """Every name a run writes (scratch names by the file they become), the fixed names the old
    code wrote, and those the writers declare."""
    from reinagent.first_programs import FIRST_PROGRAMS
    from reinagent.report.files import REPORT_FILES
    from reinagent.runlock import WRITTEN

    names = {(m.group(1) if (m := RANDOM_SCRATCH.match(name)) else name) for name, _ in opens}
    names |= set(WRITTEN) | set(REPORT_FILES) | {FIRST_PROGRAMS, ".report.md.partial", ".report.html.partial"}
    return sorted(names)


def _settled(proc: subprocess.CompletedProcess) -> None:
    """Went on (0), or stopped with one line naming the link (2); never a traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr[-800:]
    if proc.returncode != 0:
        one_line_error(proc)
        assert proc.returncode == 2


def test_a_link_at_any_written_name_is_never_written_through(written, tmp_path):
    """For every name: `run --run-dir` into a folder holding only a link there to a file of
    yours, and `resume` of a run with a dangling link there (~/.ssh/rc): the file keeps its
    text, the dangling target is never created, and the resumed run loses nothing."""
    run_dir, opens = written
    model = _model(tmp_path)
    victim = tmp_path / "bashrc"
    outside = tmp_path / "outside"
    outside.mkdir()
    for i, name in enumerate(_planted_names(opens)):
        victim.write_text("keep\n")
        fresh = tmp_path / f"fresh{i}"
        fresh.mkdir()
        (fresh / name).symlink_to(victim)
        _settled(run_cli(*_run_args(model, fresh)))
        assert victim.read_text() == "keep\n", f"run --run-dir wrote through a link at {name}"

        copy = tmp_path / f"copy{i}"
        shutil.copytree(run_dir, copy, symlinks=True)
        (copy / "run.lock").unlink()
        before = (copy / RECORDS).read_bytes()
        if (copy / name).exists():
            (copy / name).unlink()
        (copy / name).symlink_to(outside / name)
        proc = run_cli("resume", str(copy), "--num-trials", "4", "--quiet")
        _settled(proc)
        assert not (outside / name).exists(), f"resume created the target of a dangling link at {name}"
        if name != RECORDS:  # nothing the run had recorded is lost
            assert (copy / RECORDS).read_bytes().startswith(before), name
        if proc.returncode == 2:
            assert "symbolic link" in proc.stderr, proc.stderr


def test_a_printed_command_gives_back_the_run_directory_as_one_word(tmp_path):
    """A run directory's name is data: `x;touch pwned` or `$(...)` in it must not run when the
    command an error line suggests is pasted into a shell."""
    model = _model(tmp_path)
    run_dir = tmp_path / "we$(touch pwned1)ird;touch pwned2;`touch pwned3`"
    assert run_cli(*_run_args(model, run_dir)).returncode == 0
    lines = (run_dir / RECORDS).read_text().splitlines()
    (run_dir / RECORDS).write_text("\n".join([lines[0], "{broken", *lines[1:]]) + "\n")
    line = one_line_error(run_cli("report", str(run_dir)), "reinagent repair")
    command = re.search(r"`(reinagent repair [^`]*'[^']*'[^`]*)`", line) or re.search(r"`(reinagent repair .*?)` moves", line)
    assert command, line
    shell = subprocess.run(["bash", "-c", "reinagent() { printf '%s\\n' \"$@\"; }; " + command.group(1)],
                           capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert shell.stdout.splitlines() == ["repair", str(run_dir)], shell
    assert not any((tmp_path / f"pwned{i}").exists() for i in (1, 2, 3))


LIMIT_BYTES = 2 << 30


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def _bomb(setting: str) -> str:
    rows = ["- &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    rows += [f"- &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    return f"{setting}:\n" + "\n".join("  " + r for r in rows) + "\n"


@pytest.mark.parametrize("text, needle", [
    (_bomb("num_trials"), "num_trials"),
    (_bomb("model"), "model"),
    (_bomb("rollout"), "unknown rollout"),
    ("num_trials: " + "9" * 100_000 + "\n", "a number of 100,000 characters"),
    ("seed: -" + "1" * 5_000 + "\n", "a number of 5,001 characters"),
], ids=["bomb-int", "bomb-str", "bomb-validator", "huge-int", "long-negative"])
def test_a_hostile_setting_is_one_line(tmp_path, text, needle):
    """The value is bounded before any error line is formatted: one line, exit 2 (in a child
    held to 2 GB, where the old error path ran out of memory)."""
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    proc = subprocess.run([*CLI, "run", "--config", str(config)], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, preexec_fn=_limited)
    assert proc.returncode == 2, proc.stderr[-500:]
    line = one_line_error(proc, needle)
    assert len(line) < 600, len(line)


def test_a_huge_number_in_an_rl_toml_is_one_line(tmp_path):
    config = tmp_path / "rl.toml"
    config.write_text("[rl]\nmax_steps = " + "9" * 100_000 + "\n")
    proc = run_cli("rl", "run", "--config", str(config), timeout=60)
    assert proc.returncode == 2
    one_line_error(proc, "more than 4,300 digits")


def test_the_bounded_repr_of_anything():
    from reinagent.text import shown

    bomb: list = ["lol"] * 9
    for _ in range(9):
        bomb = [bomb] * 9
    assert len(shown(bomb)) <= 120
    assert "100,000 digits" in shown(10 ** 99_999)
    assert shown("x" * 10_000).startswith("'xxx") and len(shown("x" * 10_000)) <= 120
    assert shown(3) == "3" and shown("a") == "'a'" and shown(None) == "None"


# --- item 4: provider endpoints ------------------------------------------------------------------

@pytest.mark.parametrize("url, provider", [
    ("https://api.openai.com/v1", True),
    ("https://API.OpenAI.com:443/v1", True),
    ("http://api.openai.com/v1", False),
    ("http://api.openai.com:8080/v1", False),
    ("https://api.openai.com:8443/v1", False),
    ("https://api.openai.com:99999/v1", False),
    ("https://api.openai.com.evil.example/v1", False),
    (None, False),
])
def test_a_provider_endpoint_is_https_on_the_default_port(url, provider, monkeypatch):
    from reinagent.llm.wire import endpoint_key, is_provider_endpoint

    assert is_provider_endpoint(url) is provider
    monkeypatch.setenv("OPENAI_API_KEY", "sk-provider-canary")
    monkeypatch.delenv("REINAGENT_SERVER_API_KEY", raising=False)
    assert (endpoint_key(url) == "sk-provider-canary") is provider  # the provider's key goes nowhere else


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("finished")
    run_dir = tmp / "run"
    proc = run_cli(*_run_args(_model(tmp), run_dir), env={"REINAGENT_STATE_DIR": str(tmp / "state")})
    assert proc.returncode == 0, proc.stderr
    return run_dir


def _copy(run_dir: Path, where: Path, **config) -> Path:
    copy = where / "copy"
    shutil.copytree(run_dir, copy)
    (copy / "run.lock").unlink()
    spec = json.loads((copy / SPEC).read_text())
    spec["config"].update(config)
    (copy / SPEC).write_text(json.dumps(spec))
    return copy


def test_a_planted_plain_http_openai_url_is_asked_for(finished, tmp_path):
    """`http://api.openai.com:PORT/v1` is an ordinary server: a key that would go to it (here the
    server key) needs this user's seal or the command line."""
    copy = _copy(finished, tmp_path, base_url="http://api.openai.com:9/v1")
    before = (copy / RECORDS).read_bytes()
    proc = run_cli("resume", str(copy), "--num-trials", "3", "--quiet",
                   env={"REINAGENT_SERVER_API_KEY": "server-canary", "OPENAI_API_KEY": "sk-canary"})
    one_line_error(proc, "did not seal it", "--base-url URL")
    assert proc.returncode == 2 and (copy / RECORDS).read_bytes() == before


# --- item 2: the response cache is sealed too ----------------------------------------------------

def test_a_planted_cache_is_asked_for(finished, tmp_path):
    poisoned = tmp_path / "poisoned"
    copy = _copy(finished, tmp_path, cache_dir=str(poisoned), cache_scope="shared")
    before = (copy / RECORDS).read_bytes()
    proc = run_cli("resume", str(copy), "--num-trials", "3", "--quiet")
    one_line_error(proc, "did not seal it", "--cache-dir DIR", "--cache-scope shared|run")
    assert proc.returncode == 2 and (copy / RECORDS).read_bytes() == before and not poisoned.exists()
    # named on the command line: used, and sealed for the next resume
    mine = tmp_path / "mine"
    told = run_cli("resume", str(copy), "--num-trials", "3", "--cache-dir", str(mine), "--cache-scope", "run", "--quiet")
    assert told.returncode == 0, told.stderr
    assert json.loads((copy / SPEC).read_text())["config"]["cache_dir"] == str(mine)
    assert run_cli("resume", str(copy), "--num-trials", "4", "--quiet").returncode == 0


def test_a_cache_this_user_chose_is_sealed(tmp_path):
    run_dir = tmp_path / "run"
    cache = tmp_path / "cache"
    assert run_cli(*_run_args(_model(tmp_path), run_dir, "--cache-dir", str(cache), "--cache-scope", "shared")).returncode == 0
    assert run_cli("resume", str(run_dir), "--num-trials", "3", "--quiet").returncode == 0  # sealed: no question
    spec = json.loads((run_dir / SPEC).read_text())
    spec["config"]["cache_dir"] = str(tmp_path / "other")  # an edit the seal does not cover
    (run_dir / SPEC).write_text(json.dumps(spec))
    one_line_error(run_cli("resume", str(run_dir), "--num-trials", "4", "--quiet"), "--cache-dir DIR")


def test_seals_made_before_the_cache_was_sealed_still_verify(monkeypatch, tmp_path):
    """A run on the default cache is sealed exactly as before (issue 45's message): a resume of
    one started by an older version does not ask again."""
    import hashlib
    import hmac

    from reinagent import seal

    monkeypatch.setenv("REINAGENT_STATE_DIR", str(tmp_path / "state"))
    config = {"base_url": "http://127.0.0.1:1/v1", "api_key_env": "K", "env_url": None, "ray_address": None,
              "cache_dir": None, "cache_scope": "run"}
    key = seal._key(create=True)
    old = hmac.new(key, b"reinagent endpoints v1\n" + json.dumps(
        {n: config[n] for n in seal.DESTINATIONS}, sort_keys=True).encode(), hashlib.sha256).hexdigest()
    assert seal.is_sealed(config, {seal.SEAL_FIELD: old})
    assert not seal.is_sealed({**config, "cache_scope": "shared"}, {seal.SEAL_FIELD: old})


# --- item 6: terminal and viewer output ----------------------------------------------------------

@pytest.fixture(scope="module")
def hostile(tmp_path_factory, finished) -> Path:
    """A folder of runs: one whose spec names a model with OSC 52, OSC 0 and U+202E, and whose
    reflection and answer carry them too."""
    root = tmp_path_factory.mktemp("hostile")
    run = root / "hostile"
    shutil.copytree(finished, run)
    (run / "run.lock").unlink()
    spec = json.loads((run / SPEC).read_text())
    spec["config"].update(model=PLANTED_MODEL)
    (run / SPEC).write_text(json.dumps(spec))
    records = [json.loads(line) for line in (run / RECORDS).read_text().splitlines()]
    for record in records:
        record["reflection"] = "I failed\x1b]0;pwned\x07 \u202eterces"
        record["answer"] = "ans\x1b[31mwer"
    (run / RECORDS).write_text("".join(json.dumps(r) + "\n" for r in records))
    return root


def _clean(text: str, where: str) -> None:
    found = [repr(c) for c in ESCAPES if c in text]
    assert not found, f"{where} passed {found}"


def test_show_and_runs_print_no_control_sequences(hostile):
    run = hostile / "hostile"
    for args in (("show", str(run)), ("show", str(run), "1"), ("runs", str(hostile)), ("runs", str(hostile), "--json"),
                 ("report", str(run))):
        proc = run_cli(*args)
        assert proc.returncode == 0, proc.stderr
        out = json.dumps(json.loads(proc.stdout), ensure_ascii=False) if "--json" in args else proc.stdout
        _clean(out + proc.stderr, " ".join(args[:1]))
    shown = run_cli("show", str(run), "1").stdout
    assert "gpt-x" in shown and "evil" in shown and "terces" in shown  # the text stays, the sequences go


def test_report_files_are_plain(hostile, tmp_path):
    from reinagent.report.files import write_report_files

    copy = tmp_path / "run"
    shutil.copytree(hostile / "hostile", copy)
    for path in write_report_files(copy):
        _clean(path.read_text(encoding="utf-8"), path.name)


@pytest.fixture
def client(hostile, tmp_path):
    from fastapi.testclient import TestClient

    from reinagent.viewer.app import create_app

    return TestClient(create_app(hostile, allow_hosts=("testserver",)))


def test_the_viewer_shows_no_control_sequences(client):
    for path in ("/", "/runs/hostile", "/runs/hostile/tasks/1", "/api/runs", "/api/runs/hostile",
                 "/api/runs/hostile/tasks/1"):
        response = client.get(path)
        assert response.status_code == 200, (path, response.text[:300])
        text = json.dumps(response.json(), ensure_ascii=False) if path.startswith("/api") else response.text
        _clean(text, path)
    assert "terces" in client.get("/runs/hostile/tasks/1").text


def test_the_viewer_refuses_runs_outside_its_root(hostile, finished, tmp_path):
    from fastapi.testclient import TestClient

    from reinagent.viewer.app import create_app

    root = tmp_path / "root"
    shutil.copytree(hostile, root)
    (root / "linked").symlink_to(finished)  # a whole run elsewhere
    half = root / "half"  # a folder here whose spec.json and records are files elsewhere
    half.mkdir()
    (half / SPEC).symlink_to(finished / SPEC)
    (half / RECORDS).symlink_to(finished / RECORDS)
    viewer = TestClient(create_app(root, allow_hosts=("testserver",)))
    listed = viewer.get("/api/runs").json()
    assert [r["run_id"] for r in listed["runs"]] == ["hostile"]
    assert len(listed["problems"]) == 2 and all("leads outside" in p for p in listed["problems"])
    for name in ("linked", "half"):
        assert viewer.get(f"/runs/{name}").status_code == 404
        assert viewer.get(f"/api/runs/{name}/tasks/1").status_code == 404
    assert "leads outside" in viewer.get("/").text
