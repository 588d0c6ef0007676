"""Verdicts that do not depend on load: the sandbox's time limits count the program's CPU time.

A right program on a machine busy with something else (a model generating on every core) gets
less of the CPU, so its wall clock runs long while its CPU clock does not. Before this, a right
HumanEval/31 (`is_prime`) was judged "timeout: no reply within the time limit" while the 1.5B
model generated beside it. The wall clock is now only a backstop (Limits.wall_factor times the
limit) for a program that waits instead of computing.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time

import psutil
import pytest

from reinagent.benchmarks import make
from reinagent.sandbox import ExecJob, Sandbox
from reinagent.sandbox.process import Limits, wall_limit

LIMIT_S = 4.0  # CPU seconds per call: HumanEval/31's canonical solution needs a few milliseconds
STARVED_S = 10.0  # longer than the old wall limit (LIMIT_S + grace 3 s), 13 s inside the backstop (23 s)


@pytest.fixture(scope="module")
def he31():
    bench = make("humaneval")
    task = bench.task_by_id()["HumanEval/31"]
    return bench, task


def _harness_processes() -> list[psutil.Process]:
    """The sandbox's Python processes below this test process (bwrap's and the harness itself);
    not multiprocessing's (a local engine's own process, its resource tracker), which an earlier
    test in this process may have left running."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            cmdline = proc.cmdline()
            if any("python" in part for part in cmdline[:1]) and not any("multiprocessing" in part for part in cmdline):
                found.append(proc)
        except psutil.Error:
            pass
    return found


def _starve_the_child(stop: threading.Event, paused: list[int]) -> None:
    """SIGSTOP the sandboxed program for STARVED_S seconds of wall time: what a fully loaded
    machine does to it, made exact. Waits (with a deadline) for the harness to exist first."""
    deadline = time.monotonic() + 60
    while not stop.is_set() and time.monotonic() < deadline:
        procs = _harness_processes()
        if procs:
            for proc in procs:
                proc.send_signal(signal.SIGSTOP)
            paused.append(len(procs))
            stop.wait(STARVED_S)
            for proc in procs:
                try:
                    proc.send_signal(signal.SIGCONT)
                except psutil.Error:
                    pass
            return
        time.sleep(0.01)


def test_a_right_program_starved_of_cpu_is_judged_on_what_it_computed(he31):
    bench, task = he31
    assert STARVED_S > LIMIT_S + Limits().grace_s  # the old wall-clock limit would have fired
    assert STARVED_S < wall_limit(LIMIT_S, Limits())  # the backstop does not
    box = Sandbox(1)
    try:
        job = bench.hidden_job(task, task.canonical, LIMIT_S)
        stop, paused = threading.Event(), []
        starver = threading.Thread(target=_starve_the_child, args=(stop, paused))
        starver.start()
        try:
            result = box.judge(job)
        finally:
            stop.set()
            starver.join()
    finally:
        box.close()
    assert paused, "the sandboxed program was never found to pause"
    assert result.passed, result.message
    assert result.duration_s >= STARVED_S  # it really waited that long on the wall clock


def test_a_program_that_computes_too_long_is_still_a_timeout_and_says_cpu(he31):
    bench, task = he31
    box = Sandbox(1)
    try:
        spin = "def is_prime(n):\n    while True:\n        pass\n"
        result = box.judge(bench.hidden_job(task, spin, 1.0))
        run = box.run(ExecJob(code="x = 1", tests=["while True:\n    pass"], timeout_s=5.0, test_timeout_s=1.0))
    finally:
        box.close()
    assert not result.passed and result.reason == "timeout", result
    assert "CPU" in result.message
    assert run.tests[0].kind == "timeout" and "CPU time" in run.tests[0].message, run


def test_a_program_that_waits_is_stopped_by_the_wall_clock_backstop(he31):
    bench, task = he31
    box = Sandbox(1)
    try:
        sleeper = "import time\ndef is_prime(n):\n    time.sleep(600)\n"
        result = box.judge(bench.hidden_job(task, sleeper, 0.5))
        run = box.run(ExecJob(code="import time", tests=["time.sleep(600)"], timeout_s=0.5))
    finally:
        box.close()
    assert not result.passed and result.reason == "timeout", result
    assert "wall" in result.message
    assert result.duration_s < 600
    assert run.tests and run.tests[0].kind == "timeout" and "wall time" in run.tests[0].message, run


def test_canonical_is_prime_passes_while_the_embedded_model_generates_on_every_core(he31):
    """The issue's case as it happened: the embedded model decodes 8 long requests on all cores
    while HumanEval/31's canonical solution is judged under a 2 s CPU limit per call (a 13 s wall backstop), with a
    CPU-burning program judged alongside so that the test would see a clock that stopped."""
    pytest.importorskip("openvino_genai")
    from reinagent.llm.base import GenerationParams
    from reinagent.llm.openvino import OpenVINOLLM
    from reinagent.records import Message

    bench, task = he31
    llm = OpenVINOLLM(None, max_batch=8)
    loop = asyncio.new_event_loop()
    judged = threading.Event()

    async def generate_until_judged():
        # batches of 8 sampled requests, one after another, until the judging is over: the model
        # is decoding on every core for the whole of it, however fast either side is
        params = GenerationParams(max_tokens=64, temperature=0.8, seed=1)
        prompt = [Message(role="user", content="Write a long story about a lighthouse keeper.")]
        batch = 0
        while not judged.is_set():
            batch += 1
            await asyncio.gather(*(llm.generate(prompt, params, rollout_id=f"load-{batch}-{i}") for i in range(8)))

    generator = threading.Thread(target=loop.run_until_complete, args=(generate_until_judged(),))
    box = Sandbox(2)
    try:
        generator.start()
        deadline = time.monotonic() + 300  # poll until the engine is loaded and stepping
        while llm._engine is None or not llm._engine.ready:
            assert time.monotonic() < deadline and generator.is_alive(), "the model never started"
            time.sleep(0.1)
        right, spinning = box.judge_many([bench.hidden_job(task, task.canonical, 2.0),
                                          bench.hidden_job(task, "def is_prime(n):\n    while True:\n        pass\n", 2.0)])
    finally:
        judged.set()
        generator.join()
        loop.run_until_complete(llm.aclose())
        loop.close()
        box.close()
    assert right.passed, right.message
    assert not spinning.passed and spinning.reason == "timeout"



def test_a_reply_already_in_the_pipe_is_read_even_past_the_deadline():
    """The judging side can itself be starved or stopped while the program answers: when it wakes
    past its deadline, a reply already in the pipe is read, not called a timeout. A `cat` child
    stands for the sandbox (what goes into its stdin comes out of its stdout)."""
    import subprocess
    from types import SimpleNamespace

    from reinagent.sandbox.judge import Session
    from reinagent.sandbox.modes import Mode
    from reinagent.sandbox.process import frame

    proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        child = SimpleNamespace(proc=proc, kill=proc.kill)
        session = Session(child, Mode.RLIMITS, time.monotonic() + 60, 10.0, 10.0)
        reply = b'["r",1,null]'
        session.send(frame(reply), time.monotonic() + 10)
        deadline = time.monotonic() + 30  # poll until cat has passed it on
        while not session._readable.poll(10):
            assert time.monotonic() < deadline
        assert session.receive(time.monotonic() - 1.0) == ["r", 1, None]  # late, but it was there
        # ... and with nothing in the pipe, late is a timeout
        from reinagent.sandbox.wire import CandidateFailure

        with pytest.raises(CandidateFailure) as failed:
            session.receive(time.monotonic() - 1.0)
        assert failed.value.kind == "timeout"
    finally:
        proc.kill()
        proc.wait()
