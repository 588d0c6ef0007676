"""The framework's own resources against a sandboxed program (issue 38, sections 1 and 6): what a
reply may decode to, whose uids the sandbox may use, and what a program can import."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from reinagent.errors import ConfigError
from reinagent.sandbox import HiddenJob, Sandbox
from reinagent.sandbox.modes import MAX_UID, PID_LIMIT, UID_BASE_ENV, python_paths, site_package_dirs, uid_base, \
    uids_per_process
from reinagent.sandbox.wire import MAX_REPLY_VALUES, REPLY_MEMORY_MB, NotPlain, parse_reply
from tests.conftest import ROOT

# The program finds its reply descriptor through the harness's frames and writes one hand-made
# 16 MiB reply: 1.9 million empty frozensets (`body` "bomb"), or ~100,000 of them padded with
# spaces (`body` "fits": just inside MAX_REPLY_VALUES).
FORGED_REPLY = '''
import os, sys
def f(x):
    frame = sys._getframe(1)
    while not ("fd" in frame.f_locals and "seq" in frame.f_locals):
        frame = frame.f_back
    fd, seq = frame.f_locals["fd"], frame.f_locals["seq"]
    size = 16 * 1024 * 1024 - 64
    item = '["F",[]],'
    count = size // len(item) if BODY == "bomb" else 99_990
    text = '["r",%d,["l",[' % seq + item * (count - 1) + '["F",[]]]]]'
    text += " " * (size - len(text))
    data = text.encode()
    view = memoryview(len(data).to_bytes(4, "big") + data)
    while view:
        view = view[os.write(fd, view):]
    return 1
'''

MEASURE = """
import json, resource, sys
from reinagent.sandbox import HiddenJob, Sandbox
sandbox = Sandbox(workers=1, warn=False)
job = HiddenJob(code=sys.argv[1], tests=["r = f(1)", "assert r == 1 or len(r) > 0"], entry_point="f", timeout_s=60)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = sandbox.judge(job)
grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps({"grew_mb": grew, "passed": result.passed, "message": result.message}))
"""


def _judged_in_a_fresh_process(code: str) -> dict:
    """The judgement and how much the judging process grew (its own peak RSS, from a clean start)."""
    done = subprocess.run([sys.executable, "-c", MEASURE, code], capture_output=True, text=True, timeout=600,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("body", ["bomb", "fits"])
def test_a_forged_reply_cannot_inflate_the_framework(body):
    judged = _judged_in_a_fresh_process(FORGED_REPLY.replace("BODY", repr(body)))
    assert judged["grew_mb"] < REPLY_MEMORY_MB, judged  # it was 770 MB for the bomb
    if body == "bomb":
        assert not judged["passed"] and f"over {MAX_REPLY_VALUES:,} values" in judged["message"], judged
    else:  # a large reply within the bounds still crosses
        assert judged["passed"], judged


def test_reply_bounds_are_checked_before_parsing():
    with pytest.raises(NotPlain, match="values"):
        parse_reply(b'["r",1,["l",[' + b'["F",[]],' * MAX_REPLY_VALUES + b'["F",[]]]]]')
    deep = b'["r",1,' + b'["l",[' * 150 + b"null" + b"]]" * 150 + b"]"
    from reinagent.sandbox.wire import rebuild

    with pytest.raises(NotPlain, match="nested over"):
        rebuild(parse_reply(deep)[2], None)


# --- uids (section 6) ---------------------------------------------------------------------------------

def test_every_pid_the_kernel_can_hand_out_has_its_own_uid_block(monkeypatch):
    from reinagent.sandbox import modes

    monkeypatch.delenv(UID_BASE_ENV, raising=False)
    assert uids_per_process(uid_base()) >= 256

    def uids_of(pid: int, runs: int = 3) -> set[int]:
        monkeypatch.setattr(modes.os, "getpid", lambda: pid)
        uids = modes.FreshUids()
        return {uids.fresh() for _ in range(runs)} | {uids.block, uids.block + uids.size - 1}

    # the old blocks were keyed on pid % 32768: pids 1234 and 1234 + 32768 shared one
    first, second = uids_of(1234), uids_of(1234 + 32768)
    assert not set(range(min(first), max(first) + 1)) & set(range(min(second), max(second) + 1))
    assert max(uids_of(PID_LIMIT - 1)) <= MAX_UID  # the highest pid's block is still valid uids
    assert min(uids_of(1)) > 65536 * 1000  # far from system, login and container users


@pytest.mark.parametrize("value", ["0", "1000", "65534", "99999999", "4294967000", "abc"])
def test_a_uid_base_that_could_reach_real_users_is_refused(monkeypatch, value):
    monkeypatch.setenv(UID_BASE_ENV, value)
    with pytest.raises(ConfigError, match=UID_BASE_ENV):
        uid_base()


@pytest.mark.skipif(os.geteuid() != 0, reason="sandbox uids are used as root only")
def test_the_sandbox_refuses_a_bad_uid_base_before_any_run(monkeypatch):
    monkeypatch.setenv(UID_BASE_ENV, "0")
    with pytest.raises(ConfigError, match="system or login user"):
        Sandbox(workers=1, warn=False)


# --- what a program can import (section 6) --------------------------------------------------------

def _installed_here() -> tuple[list[str], str]:
    """The site-packages folders bubblewrap covers, and one package installed in them."""
    folders = site_package_dirs(python_paths()[0])
    for folder in folders:
        for entry in sorted(os.listdir(folder)):
            if entry.isidentifier() and os.path.isfile(os.path.join(folder, entry, "__init__.py")):
                return folders, entry
    pytest.skip("no package installed in the interpreter's site-packages")


@pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap hides site-packages; other modes cannot")
def test_under_bubblewrap_a_program_sees_the_standard_library_only():
    folders, package = _installed_here()
    program = (f"import sys, importlib.util\nsys.path[:0] = {folders!r}\n"
               f"def seen():\n    return [importlib.util.find_spec({package!r}) is not None, "
               f"sum(len(__import__('os').listdir(d)) for d in {folders!r}), __import__('json').dumps(1)]\n")
    sandbox = Sandbox(workers=1, mode="bwrap", warn=False)
    result = sandbox.judge(HiddenJob(code=program, tests=["assert seen() == [False, 0, '1']"], entry_point="seen"))
    assert result.passed, result.message  # the folders are there but empty; the standard library works
