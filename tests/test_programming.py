"""HumanEval and MBPP: data, canonical and wrong solutions through the real sandbox, code
extraction from messy model output, internal-test feedback, and the check-solutions verb."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from reinagent import benchmarks
from reinagent.benchmarks.programming import build_program, render_feedback
from reinagent.config import RunConfig
from reinagent.records import Trajectory
from reinagent.env import check_env
from reinagent.programming.extract import doctest_asserts, extract_code, extract_tests, syntax_error
from reinagent.sandbox import ExecJob, Sandbox
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def humaneval():
    bench = benchmarks.make("humaneval")
    yield bench
    bench.close()


@pytest.fixture(scope="module")
def mbpp():
    bench = benchmarks.make("mbpp-v1")
    yield bench
    bench.close()


def test_data(humaneval, mbpp):
    he = humaneval.load_tasks("test")
    assert len(he) == 164 and he[0].task_id == "HumanEval/0" and he[0].entry_point == "has_close_elements"
    tasks = mbpp.load_tasks("all")
    assert len(tasks) == 427 and tasks[0].task_id == "Mbpp/2"
    assert {s: len(mbpp.load_tasks(s)) for s in ("prompt", "test", "validation", "train")} == {
        "prompt": 7, "test": 257, "validation": 43, "train": 120}
    assert "def similar_elements(test_tup1, test_tup2):" in tasks[0].text
    for task in [*he, *tasks]:  # the hidden tests are never part of what the model is shown
        assert all(test not in task.text for test in task.hidden_tests)
        assert "def check(candidate)" not in task.text


# Correctness, not speed, is checked here: MBPP/123's reference needs ~5 s of CPU, more than the
# default 10 s of wall clock on a machine busy with other work. A generous limit keeps it exact.
CANONICAL_TIMEOUT_S = 120.0


def test_all_humaneval_canonical_solutions_pass(humaneval):
    tasks = humaneval.load_tasks("test")
    results = humaneval.check_solutions({t.task_id: t.canonical for t in tasks}, timeout_s=CANONICAL_TIMEOUT_S)
    failed = {tid: r.message for tid, r in results.items() if not r.passed}
    assert not failed and len(results) == 164


def test_all_mbpp_canonical_solutions_pass(mbpp):
    tasks = mbpp.load_tasks("all")
    results = mbpp.check_solutions({t.task_id: t.canonical for t in tasks}, timeout_s=CANONICAL_TIMEOUT_S)
    failed = {tid: r.message for tid, r in results.items() if not r.passed}
    assert not failed and len(results) == 427


def test_wrong_solutions_fail(humaneval, mbpp):
    he = humaneval.load_tasks("test")[:4]
    wrong = {t.task_id: "    return None\n" for t in he}
    wrong[he[3].task_id] = he[3].canonical.replace("return", "return 1 +", 1)
    assert not any(r.passed for r in humaneval.check_solutions(wrong).values())
    mb = mbpp.load_tasks("test")[:3]
    broken = {t.task_id: t.canonical.replace("def ", "def wrong_", 1) for t in mb}
    results = mbpp.check_solutions(broken)
    assert all(r.reason == "failed" and "NameError" in r.message for r in results.values())


def test_full_redefinition_and_body_both_work(humaneval):
    task = humaneval.load_tasks("test")[2]  # truncate_number
    body = "    return number % 1.0\n"
    full = "def truncate_number(number: float) -> float:\n    return number % 1.0\n"
    results = humaneval.check_solutions({task.task_id: body})
    assert results[task.task_id].passed
    job = humaneval.hidden_job(task, full, 10.0)
    assert humaneval.sandbox.judge(job).passed


MESSY_OUTPUTS = [
    # fenced, with prose around it
    "Sure! Here is the implementation:\n```python\ndef add(a, b):\n    return a + b\n```\nIt adds the numbers.",
    # untagged fence, never closed
    "```\ndef add(a, b):\n    return a + b\n",
    # a usage block first, the implementation second
    "```python\nassert add(1, 2) == 3\n```\nand the code:\n```py\ndef add(a, b):\n    return a + b\n```",
    # bare code with prose before and after
    "Here is my answer.\n\ndef add(a, b):\n    return a + b\n\nThis works because + adds numbers.",
    # bare code with imports and a helper, prose in between
    "import math\n\ndef _helper(x):\n    return x\n\nNow the main function:\ndef add(a, b):\n    return _helper(a) + b\n",
    # a fenced block in another language must not be taken
    "```bash\npip install nothing\n```\n```python\ndef add(a, b):\n    return a + b\n```",
    # Windows line endings
    "```python\r\ndef add(a, b):\r\n    return a + b\r\n```\r\n",
]


@pytest.mark.parametrize("output", MESSY_OUTPUTS)
def test_extract_code_from_messy_output(output, humaneval):
    code = extract_code(output, "add")
    assert syntax_error(code) is None, code
    assert "def add(a, b):" in code and "adds" not in code and "pip" not in code
    result = humaneval.sandbox.run(ExecJob(code=code, tests=["assert add(2, 3) == 5"]))
    assert result.passed, (code, result)


def test_unparseable_code_is_a_failed_attempt_with_the_error(humaneval):
    code = extract_code("```python\ndef add(a, b)\n    return a + b\n```", "add")
    assert syntax_error(code) == "SyntaxError: expected ':' (line 1)"
    env = humaneval.make_env(humaneval.load_tasks("test")[2], RunConfig(benchmark="humaneval"))
    env.set_internal_tests(["assert add(1, 2) == 3"])
    feedback, reward, terminated, truncated, info = env.step(code)
    assert feedback == "The code does not parse: SyntaxError: expected ':' (line 1)"
    assert reward == 0.0 and terminated and not truncated and info["result"] is None


def test_extract_tests_and_doctest_examples(humaneval):
    text = ("Here are tests:\n```python\nassert add(1, 2) == 3\nassert add(1, 2) == 3\n"
            "assert other(1) == 2\nassert add(0,\nassert add(-1, 1) == 0\n```\n`assert add(5, 5) == 10`")
    assert extract_tests(text, "add", 10) == ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(5, 5) == 10"]
    assert extract_tests(text, "add", 1) == ["assert add(1, 2) == 3"]
    task = humaneval.load_tasks("test")[2]
    assert doctest_asserts(task.text, task.entry_point, 4) == ["assert truncate_number(3.5) == 0.5"]


def test_feedback_shows_outputs_and_errors(humaneval):
    job = ExecJob(code="def f(x):\n    return x * 2\n",
                  tests=["assert f(2) == 4", "assert f(3) == 7", "assert f(None) == 0"])
    feedback = render_feedback(humaneval.sandbox.run(job), None)
    assert feedback.splitlines() == [
        "Tests passed:",
        "assert f(2) == 4",
        "Tests failed:",
        "assert f(3) == 7  # output: 6",
        "assert f(None) == 0  # TypeError: unsupported operand type(s) for *: 'NoneType' and 'int'",
    ]


def test_env_checker_and_program_building(humaneval, mbpp):
    task = humaneval.load_tasks("test")[2]
    env = humaneval.make_env(task, RunConfig(benchmark="humaneval", timeout_s=5))
    check_env(env, ["def truncate_number(number):\n    return number % 1.0\n"])
    assert build_program(task, "    return 0\n").startswith(task.header)
    math_task = next(t for t in mbpp.load_tasks("all") if t.setup)
    assert build_program(math_task, "x = 1").startswith("import math\n")


def test_check_solutions_cli(tmp_path, mbpp):
    tasks = mbpp.load_tasks("all")[:6]
    lines = [{"task_id": int(t.task_id.split("/")[1]), "completion": t.canonical} for t in tasks[:5]]
    lines.append({"task_id": tasks[5].task_id, "completion": "def nothing():\n    pass\n"})
    path = tmp_path / "solutions.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    proc = run_cli("check-solutions", "--benchmark", "mbpp", "--solutions", str(path))
    assert proc.returncode == 0, proc.stderr
    verdicts = json.loads(proc.stdout)
    assert verdicts == {**{t.task_id: True for t in tasks[:5]}, tasks[5].task_id: False}
    assert "5/6 solutions passed" in proc.stderr


@pytest.mark.parametrize(
    "content, args, needle",
    [
        (None, ["--benchmark", "webshop"], "unknown benchmark 'webshop' for check-solutions; valid: humaneval or mbpp"),
        (None, ["--benchmark", "mbpp", "--solutions", "/nonexistent.jsonl"], "does not exist"),
        ('{"task_id": "Mbpp/2", "completion": "x"}\n{not json\n', ["--benchmark", "mbpp"], "solutions.jsonl:2: malformed JSON"),
        ('{"task_id": "Mbpp/2"}\n', ["--benchmark", "mbpp"], "solutions.jsonl:1: expected an object with 'task_id' and 'completion'"),
        ('{"task_id": "HumanEval/999", "completion": ""}\n', ["--benchmark", "humaneval"], "unknown task_id 'HumanEval/999'"),
    ],
)
def test_check_solutions_bad_input(tmp_path, content, args, needle):
    path = tmp_path / "solutions.jsonl"
    if content is not None:
        path.write_text(content)
    if "--solutions" not in args:
        args = [*args, "--solutions", str(path)]
    proc = run_cli("check-solutions", *args)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid fallback needs root")
def test_canonical_solutions_that_import_pass_in_the_uid_fallback(humaneval, mbpp, recwarn):
    # The fallback drops to a uid that may not read the interpreter's directory (a pyenv under
    # /root): every solution that imports something must still work there.
    box = Sandbox(2, mode="uid")
    try:
        for bench in (humaneval, mbpp):
            tasks = [t for t in bench.all_tasks() if "import" in t.header + t.canonical or t.setup]
            jobs = [bench.hidden_job(t, t.canonical, CANONICAL_TIMEOUT_S) for t in tasks]
            failed = [(t.task_id, r.message) for t, r in zip(tasks, box.judge_many(jobs)) if not r.passed]
            assert not failed and len(tasks) > 20
    finally:
        box.close()


# Completions that return a wrong answer and then try to pass anyway. `{f}` is the entry point.
# Before the hidden tests moved to the trusted side, the first four passed check-solutions.
WRONG = "def {f}(*args, **kwargs):\n    return -1.0\n"
TRICKS = {
    # the harness's own functions, replaced through sys.modules['__main__']
    "patch_main": "import sys\n_m = sys.modules['__main__']\n"
                  "if hasattr(_m, '_run'):\n    _m._run = lambda *a, **k: ('ok', '')\n"
                  "if hasattr(_m, '_exec'):\n    _m._exec = lambda *a, **k: None\n" + WRONG,
    # the nonce and report fd read from the harness's frames, a verdict (or replies) forged, exit 0
    "forge_from_frames": "import os, sys\n"
                  "def _forge():\n"
                  "    f = sys._getframe()\n"
                  "    while f is not None:\n"
                  "        loc = f.f_locals\n"
                  "        if 'nonce' in loc and 'report_fd' in loc:\n"
                  "            report = '{{\"compile_error\":null,\"setup\":[\"ok\",\"\"],\"tests\":[[\"ok\",\"\",null]]}}'\n"
                  "            os.write(loc['report_fd'], ('\\n' + loc['nonce'] + report + '\\n').encode())\n"
                  "            os._exit(0)\n"
                  "        if isinstance(loc.get('reply_fd'), int):\n"
                  "            for seq in range(50):\n"
                  "                data = ('[\"r\",%d,true]' % seq).encode()\n"
                  "                os.write(loc['reply_fd'], len(data).to_bytes(4, 'big') + data)\n"
                  "        f = f.f_back\n"
                  "_forge()\n" + WRONG,
    "eq_always_true": "class Liar:\n"
                  "    def __eq__(self, other): return True\n"
                  "    def __ne__(self, other): return False\n"
                  "    __lt__ = __le__ = __gt__ = __ge__ = __eq__\n"
                  "    def __sub__(self, other): return self\n"
                  "    __rsub__ = __add__ = __radd__ = __mul__ = __sub__\n"
                  "    def __abs__(self): return self\n"
                  "    __hash__ = object.__hash__\n"
                  "def {f}(*args, **kwargs):\n    return Liar()\n",
    "float_subclass": "class F(float):\n"
                  "    def __eq__(self, other): return True\n"
                  "    def __ne__(self, other): return False\n"
                  "    def __lt__(self, other): return True\n"
                  "    def __sub__(self, other): return F(0.0)\n"
                  "    def __abs__(self): return F(0.0)\n"
                  "    __hash__ = float.__hash__\n"
                  "def {f}(*args, **kwargs):\n    return F(-1.0)\n",
    "exit_at_import": WRONG + "import sys\nsys.exit(0)\n",
    "os_exit_at_import": WRONG + "import os\nos._exit(0)\n",
    "exit_in_call": "import sys\ndef {f}(*args, **kwargs):\n    sys.exit(0)\n",
    "os_exit_in_call": "import os\ndef {f}(*args, **kwargs):\n    os._exit(0)\n",
    "atexit_marker": "import atexit, os\n"
                  "atexit.register(lambda: (print('PASSED'), print('3 tests passed'), os._exit(0)))\n" + WRONG,
    "thread_exit": "import os, threading, time\n"
                  "def _bye():\n    print('PASSED', flush=True)\n    os._exit(0)\n"
                  "def {f}(*args, **kwargs):\n    threading.Thread(target=_bye).start()\n    time.sleep(5)\n    return -1.0\n",
    "excepthook_exit": "import os, sys\n"
                  "sys.excepthook = lambda *a: os._exit(0)\n"
                  "threading_excepthook = None\n"
                  "def {f}(*args, **kwargs):\n    raise ValueError('no')\n",
    "printed_markers": "print('PASSED')\n"
                  "print('{{\"compile_error\": null, \"setup\": [\"ok\", \"\"], \"tests\": [[\"ok\", \"\", null]]}}')\n"
                  "print('all tests passed', flush=True)\n" + WRONG,
}


def test_tricks_fail_through_check_solutions(tmp_path, humaneval):
    """Each trick on its own HumanEval task, all in one check-solutions run, beside an honest one."""
    tasks = humaneval.load_tasks("test")
    lines = [{"task_id": t.task_id, "completion": code.format(f=t.entry_point)}
             for t, code in zip(tasks, TRICKS.values())]
    honest = tasks[len(TRICKS)]
    lines.append({"task_id": honest.task_id, "completion": honest.canonical})
    path = tmp_path / "tricks.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    proc = run_cli("check-solutions", "--benchmark", "humaneval", "--solutions", str(path), "--timeout-s", "30")
    assert proc.returncode == 0, proc.stderr
    verdicts = json.loads(proc.stdout)
    tricked = {name for name, t in zip(TRICKS, tasks) if verdicts[t.task_id]}
    assert not tricked and verdicts[honest.task_id] is True


@pytest.mark.parametrize("name", list(TRICKS))
def test_tricks_fail_through_evaluate(name, humaneval, mbpp):
    config = RunConfig(benchmark="humaneval", timeout_s=30)
    for bench, task in ((humaneval, humaneval.load_tasks("test")[2]), (mbpp, mbpp.load_tasks("all")[0])):
        code = TRICKS[name].format(f=task.entry_point)
        evaluation = asyncio.run(bench.evaluate(task, Trajectory(answer=code), config))
        assert not evaluation.success and evaluation.reward == 0.0, (bench.name, evaluation)
        assert evaluation.detail["hidden_passed"] == 0, evaluation
    honest = "def truncate_number(number):\n    return number % 1.0\n"
    evaluation = asyncio.run(humaneval.evaluate(humaneval.load_tasks("test")[2], Trajectory(answer=honest), config))
    assert evaluation.success and evaluation.detail["hidden_passed"] == 1


def test_benchmark_helpers_come_from_the_benchmark_not_the_program(humaneval):
    """HumanEval/38's check uses encode_cyclic from the prompt: a program redefining it (so that
    its own wrong decoder round-trips) must still fail."""
    task = humaneval.task_by_id()["HumanEval/38"]
    code = ("def encode_cyclic(s):\n    return s\n"
            "def decode_cyclic(s):\n    return s\n")
    result = humaneval.check_solutions({task.task_id: code})[task.task_id]
    assert not result.passed and result.reason == "failed", result
    assert humaneval.check_solutions({task.task_id: task.canonical})[task.task_id].passed


def test_weak_sandbox_is_refused_without_the_flag(tmp_path, mbpp):
    task = mbpp.load_tasks("all")[0]
    path = tmp_path / "solutions.jsonl"
    path.write_text(json.dumps({"task_id": task.task_id, "completion": task.canonical}) + "\n")
    weak = {"REINAGENT_SANDBOX": "uid" if os.geteuid() == 0 else "rlimits"}
    proc = run_cli("check-solutions", "--benchmark", "mbpp", "--solutions", str(path), env=weak)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "--allow-weak-sandbox" in lines[0] and "apt-get install bubblewrap" in lines[0]
    proc = run_cli("check-solutions", "--benchmark", "mbpp", "--solutions", str(path), "--allow-weak-sandbox", env=weak)
    assert proc.returncode == 0 and json.loads(proc.stdout) == {task.task_id: True}, proc.stderr
    (tmp_path / "model.yaml").write_text("default: x\n")  # a model that exists: the sandbox is the one problem
    run = run_cli("run", "--benchmark", "mbpp", "--model", f"scripted:{tmp_path / 'model.yaml'}", "--num-envs", "1",
                  "--run-dir", str(tmp_path / "run"), env=weak)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == 2 and len(lines) == 1 and "--allow-weak-sandbox" in lines[0], run.stderr
    assert not (tmp_path / "run").exists()
