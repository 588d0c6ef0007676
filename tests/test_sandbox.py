"""The sandbox against hostile and broken programs: real processes, no mocks.

Every hostile kind runs in each containment mode this machine offers (bubblewrap; the
dedicated-uid fallback when root) and must end as a failed run with a clear reason, within its
time limit, leaving a canary file outside the scratch dir and an environment secret untouched.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import stat
import tempfile
import time
from pathlib import Path

import pytest

from reinagent.sandbox import ExecJob, Sandbox
from reinagent.sandbox.modes import UID_BASE

MODES = []
if shutil.which("bwrap"):
    MODES.append("bwrap")
if os.geteuid() == 0:
    MODES.append("uid")
else:
    MODES.append("rlimits")

TIMEOUT = 2.0
GRACE = 4.0  # start-up, teardown and a loaded 2-core machine


@pytest.fixture(scope="module", params=MODES)
def sandbox(request):
    # The weak-mode warning is said once per process; another test may have used the mode first.
    from reinagent.sandbox import modes, process

    modes._WARNED.clear()
    getattr(process, "_PROBED", {}).clear()
    with pytest.warns(RuntimeWarning) if request.param != "bwrap" else _nothing():
        box = Sandbox(2, mode=request.param)
    yield box
    box.close()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture(scope="module")
def canary():
    """A file outside any scratch dir: world-readable (so the uid mode can see it), root-owned."""
    folder = Path(tempfile.mkdtemp(prefix="reinagent-canary-"))
    folder.chmod(0o755)
    path = folder / "canary.txt"
    path.write_text("canary\n")
    path.chmod(0o644)
    yield path
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def secret(monkeypatch):
    token = "sk-test-" + secrets.token_hex(12)
    monkeypatch.setenv("REINAGENT_TEST_SECRET", token)
    return token


def _assert_unharmed(result, canary: Path, secret: str, timeout: float = TIMEOUT):
    assert result.duration_s < timeout + GRACE, result
    assert canary.read_text() == "canary\n"
    assert stat.S_IMODE(canary.stat().st_mode) == 0o644
    assert secret not in result.output and secret not in result.message
    assert not running_sandbox_processes(), "a sandboxed process outlived its run"


def running_sandbox_processes(wait_s: float = 5.0) -> list[int]:
    """Live (non-zombie) processes of the sandbox uids, after giving teardown a moment."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat().st_uid < UID_BASE:
                    continue
                state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in ("Z", "X"):
                alive.append(int(entry.name))
        if not alive or time.monotonic() > deadline or os.geteuid() != 0:
            return alive if os.geteuid() == 0 else []
        time.sleep(0.1)


def run(sandbox, code: str, tests=("assert True",), timeout=TIMEOUT):
    return sandbox.run(ExecJob(code=code, tests=list(tests), timeout_s=timeout))


def test_passing_and_failing_programs(sandbox):
    ok = run(sandbox, "def add(a, b):\n    return a + b\n", ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"])
    assert ok.passed and ok.reason == "passed" and ok.num_passed == 2
    bad = run(sandbox, "def add(a, b):\n    return a - b\n", ["assert add(1, 2) == 3", "assert add(0, 0) == 0"])
    assert not bad.passed and bad.reason == "failed"
    assert [t.kind for t in bad.tests] == ["failed", "ok"] and bad.tests[0].actual == "-1"
    syntax = run(sandbox, "def add(a, b) return a")
    assert syntax.reason == "syntax" and "SyntaxError" in syntax.message


def test_infinite_loop_times_out(sandbox, canary, secret):
    result = run(sandbox, "while True:\n    pass\n")
    assert not result.passed and result.reason == "timeout"
    _assert_unharmed(result, canary, secret)


def test_loop_in_c_code_is_killed(sandbox, canary, secret):
    # sum() over a huge range never returns to the bytecode loop, so no Python-level alarm fires:
    # the CPU limit or the wall clock must end it.
    result = run(sandbox, "x = sum(range(10 ** 13))\n")
    assert not result.passed and result.reason == "timeout"
    _assert_unharmed(result, canary, secret)


def test_fork_bomb_is_contained(sandbox, canary, secret):
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    result = run(sandbox, bomb)
    assert not result.passed and result.reason in ("timeout", "crash")
    _assert_unharmed(result, canary, secret)
    after = run(sandbox, "x = 1", ["assert x == 1"])  # the next run is not starved of processes
    assert after.passed


def test_escaped_children_are_killed(sandbox, canary, secret):
    code = "import os\nfor _ in range(3):\n    if os.fork() == 0:\n        os.setsid()\n        while True:\n            pass\n"
    result = run(sandbox, code, ["assert True"])
    assert result.passed  # the program itself behaves; its detached children must still die
    _assert_unharmed(result, canary, secret)


def test_memory_hog_hits_the_limit(sandbox, canary, secret):
    result = run(sandbox, "blocks = []\nwhile True:\n    blocks.append(bytearray(50 * 1024 * 1024))\n", timeout=10)
    assert not result.passed and result.reason == "memory"
    _assert_unharmed(result, canary, secret, timeout=10)


def test_files_outside_scratch_are_untouched(sandbox, canary, secret):
    code = f"""
import os, shutil
attempts = []
for action in (
    lambda: os.remove({str(canary)!r}),
    lambda: open({str(canary)!r}, "w").write("pwned"),
    lambda: os.chmod({str(canary)!r}, 0o777),
    lambda: open({str(canary.parent / "new.txt")!r}, "w").write("x"),
    lambda: shutil.rmtree({str(canary.parent)!r}),
    lambda: open("/etc/reinagent-pwned", "w").write("x"),
    lambda: open({str(Path.cwd() / "reinagent-pwned")!r}, "w").write("x"),
):
    try:
        action()
        attempts.append("done")
    except OSError as err:
        attempts.append(type(err).__name__)
open("inside.txt", "w").write("scratch is writable")
"""
    result = run(sandbox, code, ["assert attempts == ['done'] * 7"])
    assert not result.passed and result.reason == "failed"
    _assert_unharmed(result, canary, secret)
    assert not (canary.parent / "new.txt").exists()
    assert not Path("/etc/reinagent-pwned").exists() and not (Path.cwd() / "reinagent-pwned").exists()


def test_scratch_dir_is_fresh_cwd_and_home(sandbox):
    first = run(sandbox, "import os\nopen('mark.txt', 'w').write('x')\nhome = os.environ['HOME']",
                ["assert os.path.exists(os.path.join(home, 'mark.txt'))", "assert os.getcwd() == home"])
    assert first.passed, first
    second = run(sandbox, "import os", ["assert not os.path.exists('mark.txt')"])
    assert second.passed, second


def test_environment_secrets_are_not_readable(sandbox, canary, secret):
    steal = "import os\nKEY = os.environ['REINAGENT_TEST_SECRET']\n"
    result = run(sandbox, steal)
    assert not result.passed and result.reason == "failed" and "KeyError" in result.message
    scan = """
import glob, os
leaked = [v for k, v in os.environ.items() if k.startswith("REINAGENT")]
for path in glob.glob("/proc/*/environ"):
    try:
        leaked.append(open(path, "rb").read().decode(errors="replace"))
    except OSError:
        pass
print("\\n".join(leaked))
"""
    result = run(sandbox, scan, ["assert not [v for v in leaked if 'sk-test-' in v]"])
    assert result.passed, result
    _assert_unharmed(result, canary, secret)


@pytest.mark.parametrize("exit_call", ["sys.exit(0)", "os._exit(0)", "raise SystemExit"])
def test_early_exit_never_passes(sandbox, exit_call):
    code = f"import os, sys\ndef f():\n    return 1\n{exit_call}\n"
    result = run(sandbox, code, ["assert f() == 2"])
    assert not result.passed and result.reason == "exit", result
    inside = f"import os, sys\ndef f():\n    {exit_call}\n"  # exiting from inside the tested call
    result = run(sandbox, inside, ["assert f() == 2"])
    assert not result.passed and result.reason == "exit", result


def test_fake_success_output_never_passes(sandbox):
    code = "import os\nprint('PASSED')\nprint('{\"tests\": [[\"ok\", \"\", null]]}')\nos._exit(0)\n"
    result = run(sandbox, code, ["assert False"])
    assert not result.passed


def test_huge_output_is_cut(sandbox):
    result = run(sandbox, "for i in range(200000):\n    print('line', i)\n", ["assert True"])
    assert result.passed and len(result.output) <= 2000 and result.output.endswith("line 199999")


@pytest.mark.skipif("bwrap" not in MODES, reason="bubblewrap is not installed")
def test_no_network_under_bubblewrap():
    box = Sandbox(1, mode="bwrap")
    code = "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=1)\n    net = True\nexcept OSError:\n    net = False\n"
    result = box.run(ExecJob(code=code, tests=["assert net is False"], timeout_s=5))
    assert result.passed, result


def test_parallel_runs_from_async_code(sandbox):
    jobs = [ExecJob(code=f"x = {i}", tests=[f"assert x == {i}"], timeout_s=5) for i in range(6)]
    jobs.append(ExecJob(code="while True: pass", tests=[], timeout_s=1))
    results = asyncio.run(sandbox.run_tests(jobs))
    assert [r.passed for r in results] == [True] * 6 + [False]
    assert results[-1].reason == "timeout"


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid fallback needs root")
def test_without_bubblewrap_auto_falls_back_with_a_warning(monkeypatch, tmp_path, canary, secret):
    # A machine without bwrap: nothing named bwrap on PATH, and no cached probe or warning.
    from reinagent.sandbox import modes, process

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(process, "_PROBED", {})
    monkeypatch.setattr(modes, "_WARNED", set())
    with pytest.warns(RuntimeWarning, match="using mode 'uid'.*bubblewrap .*not installed"):
        box = Sandbox(1, mode="auto")
    assert box.mode.value == "uid"
    result = run(box, "while True:\n    pass\n")
    assert result.reason == "timeout" and result.mode == "uid"
    _assert_unharmed(result, canary, secret)
    box.close()
