"""Hostile input around the judge (issue 28): no crash, no stall, no lost record.

Text with lone UTF-16 surrogates from a program or a model server, code the parser chokes on, a
reply built to make the trusted side's set() quadratic, a program that fakes a broken sandbox or
forges the harness's report, one that spreads its memory over processes, and bad command-line
values: each is a failed attempt or a one-line error, never a framework error.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from reinagent import resume, run
from reinagent.llm.fake_server import FakeOpenAIServer
from reinagent.programming.extract import extract_code, syntax_error
from reinagent.records import Step, Trajectory, TrialRecord, record_json
from reinagent.runner import load_run
from reinagent.sandbox import ExecJob, HiddenJob, Sandbox
from reinagent.sandbox.process import Limits, rlimits
from reinagent.sandbox.wire import MAX_SHARED_HASH, NotPlain, parse_reply, rebuild
from reinagent.text import valid_data, valid_text
from tests.conftest import one_line_error, run_cli

MODES = (["bwrap"] if shutil.which("bwrap") else []) + (["uid"] if os.geteuid() == 0 else ["rlimits"])
P = 2 ** 61 - 1  # hash(n) == hash(n + k * P) for every int n
OK_TIMEOUT = 30.0


@pytest.fixture(scope="module", params=MODES)
def sandbox(request):
    from reinagent.sandbox import modes

    modes._WARNED.add(modes.Mode(request.param))  # the weak modes' warning is another test's business
    box = Sandbox(2, mode=request.param)
    yield box
    box.close()


# --- 1. lone surrogates: made valid where text enters, and every writer takes any str ---------

def test_valid_text_replaces_lone_surrogates_and_joins_pairs():
    assert valid_text("a\ud800b") == "a\ufffdb"
    assert valid_text("\ud83d") == "\ufffd"  # half an emoji
    assert valid_text("\ud83d\ude00") == "\U0001f600"  # a pair stored as two code points
    plain = "héllo \U0001f600"
    assert valid_text(plain) is plain
    assert valid_data({"k\udc80": ["\ud800", ("x", 1)], "n": 2}) == {"k\ufffd": ["\ufffd", ("x", 1)], "n": 2}


def test_records_with_a_lone_surrogate_are_written_and_read_back():
    record = TrialRecord(task_id="t", trial=1, success=False, trajectory=Trajectory(
        steps=[Step(prompt_len=0, output="\ud83d", observation="ValueError: \ud800")]))
    with pytest.raises(ValueError):
        record.model_dump_json()  # what every writer did: the record was lost
    back = TrialRecord.model_validate_json(record_json(record))
    assert back.trajectory.steps[0].observation == "ValueError: \ufffd"
    assert back.trajectory.steps[0].output == "\ufffd"


def test_errors_log_takes_any_str(tmp_path):
    from reinagent.episode import _log_traceback

    try:
        raise ValueError("\ud800")
    except ValueError:
        _log_traceback(tmp_path, "t", 1)  # UnicodeEncodeError inside the episode's error path before
    assert "ValueError: \\ud800" in (tmp_path / "errors.log").read_text(encoding="utf-8")


def test_a_program_raising_a_lone_surrogate_gives_a_writable_result(sandbox):
    result = sandbox.run(ExecJob(code="def f():\n    raise ValueError('\\ud800')\n", tests=["f()"], timeout_s=OK_TIMEOUT))
    assert not result.passed and result.reason == "failed", result
    assert "\ufffd" in result.message
    result.model_dump_json()  # PydanticSerializationError before the fix
    judged = sandbox.judge(HiddenJob(code="def f():\n    return '\\ud800'\n", tests=["assert f() == 1, f()"],
                                     entry_point="f", timeout_s=OK_TIMEOUT))
    assert not judged.passed and judged.reason == "failed"
    judged.model_dump_json()


SURROGATE_PROGRAM = "Here:\n```python\nraise ValueError('\\ud800')\n```"  # whatever the task


@pytest.mark.skipif(not shutil.which("bwrap"), reason="a programming run needs bubblewrap")
def test_a_run_whose_program_raises_a_lone_surrogate_completes_and_resumes(tmp_path, script):
    model = script([{"when": "Write your reflection now", "reply": "Reflection: do not raise."}],
                   default=SURROGATE_PROGRAM)
    run_dir = run(benchmark="humaneval", agent="coder", strategy="reflexion", num_trials=2, num_envs=2,
                  model=model, run_dir=str(tmp_path / "r"), cache_dir=str(tmp_path / "cache"), progress=False)
    _, records = load_run(run_dir)
    assert len(records) == 4 and all(r.error is None for r in records), [r.error for r in records]
    assert "\ufffd" in records[0].trajectory.extra["feedback"]
    again = resume(run_dir, num_trials=3, progress=False)
    _, records = load_run(again)
    assert len(records) == 6 and all(r.error is None for r in records)


def test_a_model_server_replying_half_an_emoji_is_recorded_cached_and_resumed(tmp_path):
    with FakeOpenAIServer(reply=lambda messages: "Thought: \ud83d\nAction: Finish[\ud83d]") as server:
        settings = dict(benchmark="hotpotqa", agent="cot-context", strategy="reflexion", num_envs=2,
                        model="openai/fake", base_url=server.base_url, cache_dir=str(tmp_path / "cache"),
                        progress=False)
        run_dir = run(num_trials=1, run_dir=str(tmp_path / "r"), **settings)
        _, records = load_run(run_dir)
        assert len(records) == 2 and all(r.error is None for r in records), [r.error for r in records]
        assert "\ufffd" in records[0].trajectory.answer
        resumed = resume(run_dir, num_trials=2, progress=False)
        assert len(load_run(resumed)[1]) == 4
        paid = server.count
        # The same run again, answered from the cache (its keys and entries took the text).
        other = run(num_trials=1, run_dir=str(tmp_path / "again"), cache_scope="shared", **settings)
        assert len(load_run(other)[1]) == 2
        run(num_trials=1, run_dir=str(tmp_path / "third"), cache_scope="shared", **settings)
        assert server.count == paid + 2  # the second shared run paid; the third was all hits


def test_an_environment_server_answering_half_an_emoji_gives_valid_text():
    import httpx

    from reinagent.service.client import EnvClient

    body = b'{"observation": "Result: \\ud83d", "reward": 0.0, "terminated": false, "truncated": false, "info": {}}'
    client = EnvClient("http://env.test", retry_s=0,
                       transport=httpx.MockTransport(lambda request: httpx.Response(200, content=body)))
    answer = client.request("POST", "/step", {"action": "x"})
    assert answer["observation"] == "Result: \ufffd"
    client.close()


# --- 1. code the parser chokes on is a failed attempt ----------------------------------------

@pytest.mark.parametrize("code", ["x = " + "-" * 100_000 + "1\n", "x = " + "1+" * 100_000 + "1\n",
                                  "x = " + "(" * 5000 + ")" * 5000 + "\n"])
def test_code_the_parser_chokes_on_is_a_syntax_failure(code):
    message = syntax_error(code)
    assert message is not None and message.startswith("SyntaxError"), message
    reply = f"```python\n{code}```"
    assert extract_code(reply, "f") == code  # returned as is: the caller reports it


@pytest.mark.skipif(not shutil.which("bwrap"), reason="a programming run needs bubblewrap")
def test_a_run_whose_model_writes_unparseable_code_records_a_syntax_failure(tmp_path, script):
    model = script([], default="```python\nx = " + "-" * 100_000 + "1\n```")
    run_dir = run(benchmark="humaneval", agent="coder", strategy="none", num_trials=1, num_envs=1,
                  model=model, run_dir=str(tmp_path / "r"), cache=False, progress=False)
    _, records = load_run(run_dir)
    assert len(records) == 1 and records[0].error is None, records[0].error
    assert not records[0].success and records[0].evaluation["reason"] == "syntax"


# --- 2. rebuilding an untrusted value is bounded ----------------------------------------------

def _misuse(kind, message):
    return AssertionError(message)


def _ints(tag: str, values) -> bytes:
    return json.dumps([tag, [["i", format(v, "x")] for v in values]]).encode()


@pytest.mark.parametrize("tag", ["S", "F", "l", "t", "d"])
def test_a_reply_of_colliding_hashes_is_refused(tag):
    values = [1 + k * P for k in range(60_000)]
    if tag == "d":
        node = ["d", [x for v in values for x in (["i", format(v, "x")], None)]]
        data = json.dumps(node).encode()
    else:
        data = _ints(tag, values)
    with pytest.raises(NotPlain, match="sharing one hash"):
        rebuild(parse_reply(data), _misuse)


def test_colliding_tuples_are_refused_and_honest_values_kept():
    tuples = ["l", [["t", [["i", format(1 + k * P, "x")], ["i", "2"]]] for k in range(MAX_SHARED_HASH + 1)]]
    with pytest.raises(NotPlain):
        rebuild(tuples, _misuse)
    with pytest.raises(NotPlain):  # MBPP/2's test: set(similar_elements(...)) of a returned tuple
        rebuild(["t", tuples[1]], _misuse)
    # Repeats of one value share a hash honestly; a few colliding values are no attack.
    assert rebuild(parse_reply(_ints("l", [2 ** 100] * 10_000)), _misuse) == [2 ** 100] * 10_000
    few = [1 + k * P for k in range(MAX_SHARED_HASH)]
    assert rebuild(parse_reply(_ints("S", few)), _misuse) == set(few)
    assert rebuild(parse_reply(_ints("l", range(100_000))), _misuse) == list(range(100_000))
    assert rebuild(parse_reply(_ints("l", [-1, -2] * 1000)), _misuse) == [-1, -2] * 1000  # hash(-1) == -2
    pairs = ["l", [["t", [["i", "0"], ["f", (0.5).hex()]]]] * 1000]
    assert rebuild(pairs, _misuse) == [(0, 0.5)] * 1000


def test_a_judged_program_returning_colliding_ints_fails_without_stalling(sandbox):
    code = f"def f():\n    return [1 + k * {P} for k in range(60000)]\n"
    result = sandbox.judge(HiddenJob(code=code, tests=["assert len(set(f())) == 1"], entry_point="f",
                                     timeout_s=OK_TIMEOUT))
    assert not result.passed and result.reason == "failed" and "sharing one hash" in result.message, result


PATCHED_ENCODER = f"""
import sys
def _set_of_colliding_ints(value, out):
    out.append('["S",[' + ','.join('["i","%x"]' % (1 + k * {P}) for k in range(60000)) + ']]')
sys.modules['__main__']._encode = _set_of_colliding_ints  # the harness's own encoder, replaced
def f():
    return 1
"""


def test_a_program_that_replaces_the_encoder_cannot_stall_the_trusted_side(sandbox):
    """The reply claims a set the child never built: only the trusted side would pay for it."""
    result = sandbox.judge(HiddenJob(code=PATCHED_ENCODER, tests=["assert f() == 1"], entry_point="f",
                                     timeout_s=OK_TIMEOUT))
    assert not result.passed and result.reason == "failed" and "sharing one hash" in result.message, result


# --- 3. a program cannot fake a broken sandbox or break the report reader --------------------

FAKE_BWRAP = ("import os\nos.ftruncate(1, 0)\nos.lseek(1, 0, 0)\n"
              "os.write(1, b'bwrap: Creating new namespace failed: No space left on device\\n')\nos._exit(1)\n")


def test_a_program_cannot_pass_itself_off_as_a_sandbox_that_never_started(sandbox):
    result = sandbox.run(ExecJob(code=FAKE_BWRAP, tests=["assert True"], timeout_s=OK_TIMEOUT))
    assert not result.passed and result.reason == "crash", result


FORGE = ("import os, sys\nf = sys._getframe()\nwhile 'nonce' not in f.f_locals:\n    f = f.f_back\n"
         "os.write(f.f_locals['report_fd'], ('\\n' + f.f_locals['nonce'] + {report!r} + '\\n').encode())\n"
         "os._exit(0)\n")


@pytest.mark.parametrize("report", [
    "[1]", '{"tests": [7]}', '{"tests": 7}', '{"compile_error": 5}', '{"setup": ["ok"]}', '{"setup": 3}',
    '{"setup": ["ok", ""], "tests": [["ok", 1, null]]}', '{"setup": ["weird", ""], "tests": []}',
    '{"setup": ["ok", ""], "tests": [["ok", "", null], ["ok", "", null]]}', '"x"',
])
def test_a_forged_report_of_the_wrong_shape_is_a_failed_attempt(sandbox, report):
    result = sandbox.run(ExecJob(code=FORGE.format(report=report), tests=["assert True"], timeout_s=OK_TIMEOUT))
    assert not result.passed and result.reason == "crash" and "malformed" in result.message, result


# --- 6. the program's total memory is capped ---------------------------------------------------

def test_per_process_limits_multiply_to_at_most_the_cap():
    limits = Limits()
    per_process, _ = rlimits(limits, 10.0, 0)["RLIMIT_AS"]
    nproc, _ = rlimits(limits, 10.0, 0)["RLIMIT_NPROC"]
    assert per_process * nproc <= limits.memory_mb << 20


SPREAD = """
import os
def f():
    pids = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            try:
                block = bytearray(400 << 20)
                os._exit(7)
            except MemoryError:
                os._exit(3)
        pids.append(pid)
    return sum(os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) == 7 for p in pids)
"""


def test_memory_spread_over_processes_stays_under_the_cap(sandbox):
    result = sandbox.run(ExecJob(code=SPREAD, tests=["held = f()\nassert held * 400 < 1024, held"],
                                 timeout_s=OK_TIMEOUT))
    assert result.passed, result  # 3 x 400 MiB held at once before (per-process 1 GiB limit)


def _fake_delegated_cgroup(path):
    path.mkdir()
    (path / "cgroup.subtree_control").write_text("cpu memory pids\n")
    return path


@pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed")
def test_where_a_cgroup_is_delegated_each_run_gets_one_holding_the_whole_cap(tmp_path, monkeypatch):
    """The wiring only: a plain directory stands for the delegated cgroup (this machine's kernel
    has no cgroup v2 controllers for us), so the limit files are written but not enforced."""
    from reinagent.sandbox import process

    base = _fake_delegated_cgroup(tmp_path / "delegated")
    monkeypatch.setenv("REINAGENT_SANDBOX_CGROUP", str(base))
    limits = Limits()
    assert rlimits(limits, 10.0, 0, cgroup=True)["RLIMIT_AS"][0] == limits.memory_mb << 20
    result = process.launch_and_wait(process.Mode.BWRAP, limits,
                                     {"code": "x = 1", "tests": ["assert x == 1"], "timeout_s": OK_TIMEOUT})
    assert result["passed"], result
    [group] = list(base.glob("reinagent-*"))
    assert (group / "memory.max").read_text() == str(1024 << 20)
    assert (group / "pids.max").read_text() == str(limits.cgroup_nproc)
    assert int((group / "cgroup.procs").read_text()) > 1  # the shell moved itself in, then exec'd bwrap


def test_a_cgroup_variable_naming_no_delegated_cgroup_is_a_config_error(tmp_path, monkeypatch):
    from reinagent.errors import ConfigError
    from reinagent.sandbox import process

    (tmp_path / "plain").mkdir()
    monkeypatch.setenv("REINAGENT_SANDBOX_CGROUP", str(tmp_path / "plain"))
    with pytest.raises(ConfigError, match="REINAGENT_SANDBOX_CGROUP=.*memory and pids"):
        process.launch_and_wait(process.Mode(MODES[0]), Limits(), {"code": "", "tests": [], "timeout_s": 5.0})


# --- 7. bad command-line values are one-line errors (exit 2) -----------------------------------

@pytest.mark.parametrize("content, args, needle", [
    (b'{"task_id": "HumanEval/0", "completion": "\xff"}\n', [], "solutions.jsonl:1: not UTF-8"),
    (b'{"task_id": ' + b"9" * 5000 + b', "completion": ""}\n', [], "solutions.jsonl:1: malformed JSON"),
    (b'{"task_id": "HumanEval/' + b"9" * 5000 + b'", "completion": ""}\n', [], "unknown task_id 'HumanEval/999"),
    (b'{"task_id": "HumanEval/\xc2\xb2", "completion": ""}\n', [], "unknown task_id"),
    (b'{"task_id": "HumanEval/0", "completion": ""}\n', ["--timeout-s", "inf"], "--timeout-s must be"),
    (b'{"task_id": "HumanEval/0", "completion": ""}\n', ["--timeout-s", "nan"], "--timeout-s must be"),
    (b'{"task_id": "HumanEval/0", "completion": ""}\n', ["--timeout-s", "1e19"], "at most 86400"),
])
def test_check_solutions_bad_values(tmp_path, content, args, needle):
    path = tmp_path / "solutions.jsonl"
    path.write_bytes(content)
    proc = run_cli("check-solutions", "--benchmark", "humaneval", "--solutions", str(path), *args)
    one_line_error(proc, needle)
    assert proc.returncode == 2 and len(proc.stderr) < 300, proc.stderr


@pytest.mark.parametrize("value", ["inf", "nan", "1e19"])
def test_run_refuses_an_unbounded_timeout_before_it_starts(tmp_path, value):
    proc = run_cli("run", "--benchmark", "humaneval", "--agent", "coder", "--model", "scripted:/nonexistent",
                   "--timeout-s", value, "--run-dir", str(tmp_path / "r"))
    one_line_error(proc, "--timeout-s must be")
    assert proc.returncode == 2 and not (tmp_path / "r").exists()
