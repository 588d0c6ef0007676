"""What HumanEval and MBPP share: the task record, the sandboxed test environment, the benchmark.

The agent's own (internal) unit tests run in the environment, inside the sandboxed child, and
their outcome is the feedback the model sees: untrusted, since a program can forge it. The
benchmark's hidden tests run only in `evaluate` / `check_solutions`, on the trusted side, calling
the sandboxed program through a proxy (reinagent/sandbox/judge.py): only their verdict is
trusted. They are never rendered into any prompt: not into the feedback, not into
`render_attempt`, not into the reflection examples.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, ClassVar

from reinagent.benchmarks.base import Benchmark, Task
from reinagent.env import Env, StepResult
from reinagent.errors import ConfigError, SandboxError, choices
from reinagent.programming import prompts
from reinagent.programming.extract import syntax_error
from reinagent.records import Evaluation, Trajectory
from reinagent.sandbox import ExecJob, ExecResult, HiddenJob, Sandbox
from reinagent.settings import CODER_MAX_TOKENS

if TYPE_CHECKING:
    from reinagent.agents.base import Agent
    from reinagent.settings import AgentSettings, BenchmarkSettings


class ProgrammingTask(Task):
    """One function to write. `text` is all the model is shown about it."""

    text: str  # the problem as shown to the model
    entry_point: str  # the function the hidden tests call
    header: str = ""  # code the program starts with (HumanEval: the prompt, imports and helpers)
    setup: str = ""  # imports the hidden tests need (MBPP's test_imports)
    hidden_tests: tuple[str, ...] = ()
    canonical: str = ""  # the reference solution, in check-solutions' `completion` format


def build_program(task: ProgrammingTask, code: str) -> str:
    """The program to execute: header + code.

    For HumanEval the header is the prompt (signature and docstring, a valid function on its
    own), so both a full re-definition of the function and a bare body continuation work.
    """
    header = task.header
    if header and not header.endswith("\n"):
        header += "\n"
    setup = task.setup + "\n" if task.setup else ""
    return setup + header + code


def render_feedback(result: ExecResult | None, syntax: str | None) -> str:
    """Internal test outcomes as the model sees them, in the Reflexion paper's style."""
    if syntax is not None:
        return f"The code does not parse: {syntax}"
    if result is None:
        return "No unit tests were run."
    if result.reason == "syntax":
        return f"The code does not parse: {result.message}"
    if not result.tests:
        if result.passed:  # nothing failed because nothing was tested: say so, not "failed (passed)"
            return "The code ran without error; there were no unit tests to run."
        return f"The code failed before any test ran ({result.reason}): {result.message}"
    passed = [t.test for t in result.tests if t.ok]
    failed = []
    for t in result.tests:
        if t.ok:
            continue
        if t.kind == "failed" and t.actual is not None:
            failed.append(f"{t.test}  # output: {t.actual}")
        elif t.kind == "not_run":
            failed.append(f"{t.test}  # not run: an earlier test ended the program")
        else:
            failed.append(f"{t.test}  # {t.message}")
    lines = [prompts.PASSED_HEADING, *passed] if passed else []
    if failed:
        lines += [prompts.FAILED_HEADING, *failed]
    return "\n".join(lines)


def raise_if_sandbox_failed(result: ExecResult | None) -> None:
    """A sandbox that could not start judged nothing: SandboxError, recorded as the (task,
    trial)'s error (redone by `resume --retry-errors`), never scored or reflected on."""
    if result is not None and result.reason == "sandbox_error":
        raise SandboxError(f"the sandbox could not run the program: {result.message}")


class ProgrammingEnv(Env):
    """One episode of one task. `reset` shows the problem; `step(code)` runs the internal tests.

    The agent hands over its own tests with `set_internal_tests` before stepping; the episode
    ends after one implementation (a Reflexion trial is one implementation).

    In a run the reward is the internal tests' pass rate (the benchmark's `evaluate` judges after
    the episode). A `judged` env (what `serve-env` and Gymnasium hand out, where no evaluator runs
    after the episode) rewards the hidden tests' verdict instead, as `info["success"]` too: `x = 1`
    scores 0, as in-process. The internal pass rate stays in `info["internal_reward"]` and the
    observation; of the hidden tests only the verdict and the pass count leave the trusted side.
    """

    blocking = True  # sandboxed runs block: agents step this env off the event loop

    def __init__(self, bench: ProgrammingBenchmark, task: ProgrammingTask, timeout_s: float,
                 judged: bool = False):
        self.bench, self.task, self.timeout_s, self.judged = bench, task, timeout_s, judged
        self.internal_tests: list[str] = []

    def reset(self, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.ended = None
        return self.task.text, {"entry_point": self.task.entry_point}

    def set_internal_tests(self, tests: list[str]) -> None:
        self.internal_tests = list(tests)

    # The only state is the internal tests: each step runs in a fresh sandboxed process. A copy is
    # a fresh episode with the same tests (a tree search's child rewrites its parent's program).
    def snapshot(self) -> dict[str, Any]:
        return {"internal_tests": list(self.internal_tests)}

    def restore(self, state: dict[str, Any]) -> None:
        self.internal_tests, self.ended = list(state["internal_tests"]), None

    def _job(self, action: str) -> tuple[ExecJob | None, str | None]:
        syntax = syntax_error(action)
        if syntax is not None:
            return None, syntax
        return ExecJob(code=build_program(self.task, action), tests=self.internal_tests, timeout_s=self.timeout_s), None

    def _outcome(self, result: ExecResult | None, syntax: str | None, hidden: ExecResult | None = None) -> StepResult:
        raise_if_sandbox_failed(result)  # no feedback to show: the tests never ran
        raise_if_sandbox_failed(hidden)
        passed = result.num_passed if result else 0
        reward = passed / len(self.internal_tests) if self.internal_tests else float(bool(result and result.passed))
        info = {"syntax_error": syntax, "result": result.model_dump() if result else None, "internal_reward": reward}
        if self.judged:
            success = hidden is not None and hidden.passed
            info.update(success=success, hidden_passed=hidden.num_passed if hidden else 0,
                        hidden_total=len(self.task.hidden_tests))
            reward = float(success)
        return render_feedback(result, syntax), reward, True, False, info

    def _hidden_job(self, action: str, syntax: str | None) -> HiddenJob | None:
        if not self.judged or syntax is not None or not action.strip():
            return None
        return self.bench.hidden_job(self.task, action, self.timeout_s)

    def step(self, action: str) -> StepResult:
        self.refuse_if_ended()  # one implementation per episode: a second is not judged again
        job, syntax = self._job(action)
        hidden = self._hidden_job(action, syntax)
        return self.ending(self._outcome(self.bench.sandbox.run(job) if job else None, syntax,
                                         self.bench.sandbox.judge(hidden) if hidden else None))

    # The async path (used by reinagent.env.astep): wait for a sandbox slot without a thread.
    async def astep(self, action: str) -> StepResult:
        self.refuse_if_ended()
        job, syntax = self._job(action)
        hidden = self._hidden_job(action, syntax)
        return self.ending(self._outcome(await self.bench.sandbox.arun(job) if job else None, syntax,
                                         await self.bench.sandbox.ajudge(hidden) if hidden else None))

    async def areset(self, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        return self.reset(seed=seed)

    async def aclose(self) -> None:
        self.close()


class ProgrammingBenchmark(Benchmark):
    """Shared by HumanEval and MBPP; subclasses load their tasks and say how tests are run."""

    agents: ClassVar[tuple[str, ...]] = ("coder",)
    agent_defaults: ClassVar[dict[str, dict[str, Any]]] = {"coder": {"max_tokens": CODER_MAX_TOKENS}}
    default_agent: ClassVar[str] = "coder"
    reflection_examples: ClassVar[str] = prompts.REFLECTION_EXAMPLES
    id_prefix: ClassVar[str]
    mcts_iterations: ClassVar[int] = 8  # LATS's setting for programming
    # Reflexion's Evaluator for programming is the model's own tests (the paper, and the reference's
    # programming_runs/reflexion.py): they end the loop; the hidden tests score its last program
    default_evaluator: ClassVar[str | None] = "internal"

    def __init__(self) -> None:
        self._sandbox: Sandbox | None = None

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            self._sandbox = Sandbox()
        return self._sandbox

    @sandbox.setter
    def sandbox(self, sandbox: Sandbox) -> None:
        """Use another sandbox (a different worker count or mode) for this benchmark."""
        self._sandbox = sandbox

    @abc.abstractmethod
    def all_tasks(self) -> list[ProgrammingTask]:
        """Every task of the data file, in file order."""

    @abc.abstractmethod
    def split_of(self, task: ProgrammingTask) -> str:
        """The split a task belongs to (besides 'all')."""

    def load_tasks(self, split: str) -> list[ProgrammingTask]:
        if split not in self.splits:
            raise ConfigError(f"unknown split {split!r} for {self.name}; valid: {choices(self.splits)}")
        tasks = self.all_tasks()
        return tasks if split == "all" else [t for t in tasks if self.split_of(t) == split]

    def task_by_id(self) -> dict[str, ProgrammingTask]:
        return {t.task_id: t for t in self.all_tasks()}

    def canonical_id(self, raw: Any) -> str | None:
        """A task id as users write it (`HumanEval/3`, `3`, `Mbpp/602`, `602`), or None."""
        text = str(raw).strip()
        tail = text.rsplit("/", 1)[-1]
        if not (tail.isascii() and tail.isdigit()) or len(tail) > 9:  # int() refuses 4,300+ digits
            return None
        candidate = f"{self.id_prefix}/{int(tail)}"
        return candidate if candidate in self.task_by_id() else None

    def hidden_job(self, task: ProgrammingTask, code: str, timeout_s: float) -> HiddenJob:
        """The hidden tests run on the trusted side; helpers they use come from the benchmark's
        own data (the prompt, MBPP's test_imports), never from the program."""
        return HiddenJob(code=build_program(task, code), tests=list(task.hidden_tests),
                         entry_point=task.entry_point, trusted_setup=build_program(task, ""),
                         timeout_s=timeout_s)

    def require_strong_sandbox(self, allow_weak: bool) -> None:
        """Refuse to run generated code without bubblewrap unless the user accepted the fallback."""
        if self._sandbox is None:
            self._sandbox = Sandbox(warn=allow_weak)
        if self.sandbox.is_weak and not allow_weak:
            raise ConfigError(
                f"{self.name} runs generated code, and bubblewrap is not available here (the fallback "
                f"{self.sandbox.mode.value!r} lets code reach the network and host files): install it "
                "(`apt-get install bubblewrap`) or pass --allow-weak-sandbox")

    def check_config(self, settings: BenchmarkSettings) -> None:
        self.require_strong_sandbox(settings.allow_weak_sandbox)

    def make_env(self, task: Task, settings: BenchmarkSettings) -> Env:
        assert isinstance(task, ProgrammingTask)
        return ProgrammingEnv(self, task, settings.timeout_s)

    def make_judged_env(self, task: Task, settings: BenchmarkSettings) -> Env:
        assert isinstance(task, ProgrammingTask)
        return ProgrammingEnv(self, task, settings.timeout_s, judged=True)

    def make_agent(self, name: str, settings: AgentSettings) -> Agent:
        if name != "coder":
            raise ConfigError(f"unknown agent {name!r} for {self.name}; valid: {choices(self.agents)}")
        from reinagent.agents.coder import CoderAgent

        return CoderAgent(settings)

    def internal_passed(self, task: Task, trajectory: Trajectory) -> bool | None:
        """Every internal test passed (the sandbox's `passed`: all reported ok; a syntax error or
        no code ran nothing: False). Read from the episode's record, locally or from an env server's
        `info`; the program could forge it, which is why it never scores anything."""
        result = trajectory.extra.get("internal_result")
        return bool(isinstance(result, dict) and result.get("passed") is True)

    async def evaluate(self, task: Task, trajectory: Trajectory, settings: BenchmarkSettings) -> Evaluation:
        assert isinstance(task, ProgrammingTask)
        code = trajectory.answer or ""
        syntax = syntax_error(code) if code.strip() else "no code in the model's reply"
        if syntax is not None:
            return Evaluation(success=False, reward=0.0, detail={"reason": "syntax", "message": syntax})
        result = await self.sandbox.ajudge(self.hidden_job(task, code, settings.timeout_s))
        raise_if_sandbox_failed(result)  # an error of this (task, trial), not a failed attempt
        detail = {
            "reason": result.reason,
            "message": result.message,
            "hidden_passed": result.num_passed,
            "hidden_total": len(task.hidden_tests),
            "duration_s": result.duration_s,
        }
        return Evaluation(success=result.passed, reward=float(result.passed), detail=detail)

    def check_solutions(self, completions: dict[str, str], timeout_s: float = 10.0) -> dict[str, ExecResult]:
        """Hidden tests for each (task id -> completion), in parallel across the worker pool."""
        tasks = self.task_by_id()
        ids = list(completions)
        jobs = [self.hidden_job(tasks[i], completions[i], timeout_s) for i in ids]
        return dict(zip(ids, self.sandbox.judge_many(jobs)))

    def settings(self) -> dict[str, Any]:
        return {"sandbox": self.sandbox.description,
                "hidden_tests": "run on the trusted side (the program behind a proxy), never shown: once per task "
                                "on the program the loop stopped with (--evaluator internal), or once per trial "
                                "(--evaluator hidden)"}

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
