"""The Reflexion programming agent (HumanEval, MBPP).

One trial = one implementation, as in the paper: the model writes a few unit tests of its own
from the problem statement, then an implementation (with the memory its strategy allows); the
implementation runs against those internal tests in the sandbox, and their outcome is the
feedback that the Reflector and LAST_ATTEMPT see. The hidden tests are the benchmark's business
(`evaluate`) and never reach this agent.

The tests are written once per task, as the reference writes them (programming_runs/reflexion.py
writes them before its loop): trial 1 asks the model, every later trial runs the same tests again
(handed over in `MemoryView.internal_tests`), and each trajectory records them. Of the tests the
model wrote, `--internal-tests-kept K` keeps K picked at random (seeded by the run's seed and the
task), as the reference's `internal_tests(prompt, model, 1)` keeps one; by default all are kept.
"""

from __future__ import annotations

import random
from typing import ClassVar

from reinagent.agents.base import Actor, Agent
from reinagent.env import Env, areset, astep
from reinagent.llm.base import GenerationParams
from reinagent.memory import MemoryView
from reinagent.programming import prompts
from reinagent.programming.extract import doctest_asserts, extract_code, extract_tests
from reinagent.records import Message, Step, Trajectory
from reinagent.settings import CODER_MAX_TOKENS, AgentSettings
from reinagent.task import Task

DEFAULT_MAX_TOKENS = CODER_MAX_TOKENS  # a function with helpers does not fit the framework-wide default of 256


class CoderAgent(Agent):
    name: ClassVar[str] = "coder"

    def __init__(self, settings: AgentSettings):
        # The framework-wide default means "the agent's default" (plan.resolve decides
        # `max_tokens_given` by value, so a resumed run asks for the same max_tokens).
        max_tokens = settings.max_tokens if settings.max_tokens_given else DEFAULT_MAX_TOKENS
        self.num_tests = settings.num_internal_tests
        self.kept = settings.internal_tests_kept  # None: every test written
        self.seed = settings.seed
        self.impl_params = GenerationParams(max_tokens=max_tokens, temperature=settings.temperature, seed=settings.seed)
        self.test_params = GenerationParams(max_tokens=max_tokens, temperature=settings.temperature, seed=settings.seed)

    # --- prompts ---------------------------------------------------------------------------------

    def prompt(self, task, memory: MemoryView, *, few_shot: bool = True) -> list[Message]:
        """The implementation prompt: a retry that is shown the previous program or a reflection
        gets the reference's retry chat (`retry_messages`); a first attempt, or a retry shown
        nothing (NONE), the plain request. Neither has a few-shot block to drop (`few_shot`)."""
        retry = retry_messages(task, memory)
        if retry is not None:
            return retry
        parts = [task.text]
        block = memory.block()
        if block:  # a previous attempt the coder cannot take apart (no trajectory kept with it)
            parts.append(block)
        parts.append(prompts.IMPLEMENT_INSTRUCTION.format(entry_point=task.entry_point))
        return [
            Message(role="system", content=prompts.IMPLEMENT_SYSTEM),
            Message(role="user", content="\n\n".join(parts)),
        ]

    def tests_prompt(self, task) -> list[Message]:
        instruction = prompts.TESTS_INSTRUCTION.format(n=self.num_tests, entry_point=task.entry_point)
        user = f"{prompts.TESTS_EXAMPLE}\n\nThe function to test:\n{task.text}\n\n{instruction}"
        return [Message(role="system", content=prompts.TESTS_SYSTEM), Message(role="user", content=user)]

    # --- one trial -------------------------------------------------------------------------------

    def tests_from(self, task, text: str) -> tuple[list[str], str]:
        """The internal tests of the model's reply (the prompt's doctest examples when it wrote
        none usable), `kept` of them picked at random; and where they came from."""
        tests = extract_tests(text, task.entry_point, self.num_tests)
        source = "model"
        if not tests:
            tests = doctest_asserts(task.text, task.entry_point, self.num_tests)
            source = "prompt examples" if tests else "none"
        if self.kept is not None and len(tests) > self.kept:
            # the reference's sample_n_random; seeded by task so that a rerun picks the same ones
            picked = set(random.Random(f"{self.seed}/{task.task_id}/internal-tests").sample(range(len(tests)), self.kept))
            tests = [t for i, t in enumerate(tests) if i in picked]
        return tests, source

    async def internal_tests(self, task, actor: Actor, memory: MemoryView | None = None) -> tuple[list[str], dict]:
        """The task's internal tests: those an earlier trial wrote (kept in `memory`), else the
        model writes them now."""
        if memory is not None and memory.internal_tests is not None:
            return list(memory.internal_tests), {"messages": [], "source": "an earlier trial"}
        messages = self.tests_prompt(task)
        completion = await actor.complete(messages, self.test_params)
        tests, source = self.tests_from(task, completion.text)
        record = {
            "messages": [m.model_dump() for m in [*messages, Message(role="assistant", content=completion.text)]],
            "source": source,
        }
        return tests, record

    async def run(self, task: Task, env: Env, memory: MemoryView, actor: Actor) -> Trajectory:
        traj = actor.trajectory
        await areset(env)
        tests, generation = await self.internal_tests(task, actor, memory)
        # kept at once: a trial that errors after this still hands its tests to the next (written once per task)
        traj.extra.update(internal_tests=tests, internal_tests_source=generation["source"],
                          test_generation=generation["messages"])
        set_tests = getattr(env, "set_internal_tests", None)
        if set_tests is None:
            raise TypeError(f"the coder agent needs a programming environment, got {type(env).__name__}")
        set_tests(tests)

        messages = self.prompt(task, memory)
        traj.messages.extend(messages)
        completion = await actor.complete(messages, self.impl_params)
        traj.messages.append(Message(role="assistant", content=completion.text))
        code = extract_code(completion.text, task.entry_point)
        feedback, reward, _, _, info = await astep(env, code)
        traj.steps.append(
            Step(
                prompt_len=len(messages),
                output=completion.text,
                action=code,
                observation=feedback,
                valid_action=info["syntax_error"] is None,
            )
        )
        traj.answer = code
        traj.end_reason = "finished" if info["syntax_error"] is None else "syntax_error"
        traj.extra.update(
            {
                "implementation": code,
                "internal_tests": tests,
                "internal_tests_source": generation["source"],
                "test_generation": generation["messages"],
                "feedback": feedback,
                "internal_pass_rate": info.get("internal_reward", reward),  # a judged env rewards the hidden verdict
                "internal_result": info["result"],
            }
        )
        return traj

    def render_attempt(self, task: Task, trajectory: Trajectory) -> str:
        """Task, code and internal-test feedback: what the Reflector and LAST_ATTEMPT are shown."""
        code = trajectory.answer or trajectory.extra.get("implementation") or ""
        feedback = trajectory.extra.get("feedback")
        if feedback is None:
            feedback = trajectory.steps[-1].observation if trajectory.steps else "The attempt produced no code."
        parts = [f"Task:\n{getattr(task, 'text', '')}".rstrip()]
        parts.append(f"Implementation:\n```python\n{code.rstrip()}\n```")
        parts.append(f"Feedback from your own unit tests:\n{feedback}")
        return "\n\n".join(parts)


def retry_messages(task, memory: MemoryView) -> list[Message] | None:
    """The reference's chat for a retry (programming_runs/generators/generator_utils.py:38-63):
    system; a worked retry example (user); the previous program (assistant); its unit-test
    results ending on the reflection label (user); the reflection (assistant); the improved-impl
    label and the signature (user). LAST_ATTEMPT has no reflection turns; REFLEXION alone, no
    previous program: the example then leaves out the same parts, and the labels that would start
    a turn of their own join the user turn before. None: nothing to retry with (the plain prompt).

    The reflection turn holds the memory's window of reflections, oldest first (the reference's
    window is 1: the latest)."""
    previous = memory.previous
    program = None
    if previous is not None:
        program = previous.answer or previous.extra.get("implementation") or ""
    reflections = memory.shown_reflections
    if program is None and not reflections:
        return None
    example = _example(with_program=program is not None, with_reflection=bool(reflections))
    messages = [Message(role="system", content=prompts.RETRY_SYSTEM)]
    user = example
    if program is not None:
        feedback = previous.extra.get("feedback")
        if feedback is None:
            feedback = previous.steps[-1].observation if previous.steps else "The attempt produced no code."
        messages += [Message(role="user", content=user),
                     Message(role="assistant", content=f"```python\n{program.rstrip()}\n```")]
        user = f"{prompts.RESULTS_LABEL}\n{feedback.rstrip()}"
    if reflections:
        messages += [Message(role="user", content=f"{user}\n\n{prompts.REFLECTION_LABEL}".lstrip()),
                     Message(role="assistant", content="\n\n".join(r.strip() for r in reflections))]
        user = ""
    improved = f"{prompts.IMPROVED_LABEL}\n{task.text.rstrip()}"
    messages.append(Message(role="user", content=f"{user}\n\n{improved}" if user else improved))
    return messages


def _example(*, with_program: bool, with_reflection: bool) -> str:
    """The worked retry example with the parts this retry's turns have."""
    parts = []
    if with_program:
        parts += [f"{prompts.PREVIOUS_LABEL}\n{prompts.EXAMPLE_PREVIOUS}",
                  f"{prompts.RESULTS_LABEL}\n{prompts.EXAMPLE_RESULTS}"]
    if with_reflection:
        parts.append(f"{prompts.REFLECTION_LABEL}\n{prompts.EXAMPLE_REFLECTION}")
    parts.append(f"{prompts.IMPROVED_LABEL}\n{prompts.EXAMPLE_IMPROVED}\n{prompts.EXAMPLES_END}")
    return "Example 1:\n" + "\n\n".join(parts)
