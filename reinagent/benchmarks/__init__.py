"""Benchmark registry: names map to classes, imported only when a benchmark is made.

    base.py             Benchmark: tasks, an environment per episode, agents, evaluate (Task: ../task.py)
    hotpotqa.py         HotpotQA (docstore or gold context)
    humaneval.py mbpp.py  programming, judged by hidden tests in the sandbox; shared parts in programming.py
    alfworld.py         ALFWorld text games: alfworld_env.py (the Env), alfworld_worker.py (the game
                        process), alfworld_data.py (game files)
    gsm8k.py            GSM8K math word problems
    arithmetic.py       generated one-digit sums (small enough for RL on a CPU); arithmetic20: 0..19
                        (its heldout split: test + train[200:], for issue 37's demo)
    check.py            `reinagent check-solutions`: outside solutions against a benchmark's hidden tests
    math_judge.py       GSM8K's and arithmetic's judge: math-verify, with our Finish[...]; a
                        restatement of the question is never an answer
    math_layout.py      a reply's layout around its answer: check lines, answer first, cuts, 1.234,5
    math_text.py        how a reply's numbers are cleaned for it (bold, quotes, −3, 2 1/2, 10^3, ...)
    math_words.py       numbers and signs written out (seven, 18k, `- 3`, minus 3, 0 plus 5) as digits
    answers.py          `reinagent check-answers`: re-score outside answers with these judges
    cli.py              `reinagent list`: benchmarks (agents, splits), strategies, model backends

The HotpotQA, GSM8K and ALFWorld agents' prompt texts, and their Reflector's examples, live with
the agents (reinagent/agents/prompts/): a benchmark imports its agents, never the reverse.
`remote` (reinagent/service/remote.py) is any environment server. docs/architecture.md shows how
to add a benchmark.
"""

from __future__ import annotations

import importlib

from reinagent.benchmarks.base import Benchmark, Task
from reinagent.errors import ConfigError, choices

# name -> (module, class, agents, one-line description); agents are listed here so that
# `reinagent list` and flag validation never import a benchmark's heavy dependencies.
REGISTRY: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "hotpotqa": ("reinagent.benchmarks.hotpotqa", "HotpotQA", ("react", "cot-context", "cot-no-context"),
        "multi-hop questions (distractor-docstore setting), exact match"),
    "humaneval": ("reinagent.benchmarks.humaneval", "HumanEval", ("coder",),
        "164 Python functions, hidden unit tests in a sandbox, pass@1"),
    "mbpp": ("reinagent.benchmarks.mbpp", "MBPP", ("coder",),
        "427 sanitized Python tasks, hidden asserts in a sandbox, pass@1"),
    "alfworld": ("reinagent.benchmarks.alfworld", "ALFWorld", ("react", "alfworld-expert"),
        "134 unseen household text games, success = info['won']"),
    "gsm8k": ("reinagent.benchmarks.gsm8k", "GSM8K", ("cot",),
        "grade-school math (1319 test problems), final number compared numerically"),
    "arithmetic": ("reinagent.benchmarks.arithmetic", "Arithmetic", ("cot",),
        "one-digit sums and differences (generated, 60 test / 140 train), reward 1/0"),
    "arithmetic20": ("reinagent.benchmarks.arithmetic", "Arithmetic20", ("cot",),
        "sums and differences of 0..19 (generated, 300 test / 500 train; heldout: test + train[200:], 600), reward 1/0"),
    "remote": ("reinagent.service.remote", "RemoteBenchmark", ("react",),
        "any env server of docs/env-protocol.md (--env-url), success = info.success or reward >= 1"),
}


def benchmark_names() -> list[str]:
    return list(REGISTRY)


def agent_names(benchmark: str) -> tuple[str, ...]:
    return REGISTRY[benchmark][2]


def make(name: str) -> Benchmark:
    """The benchmark called `name` (or its versioned id, e.g. `hotpotqa-v1`)."""
    base = name.rsplit("-v", 1)[0] if name not in REGISTRY else name
    if base not in REGISTRY:
        raise ConfigError(f"unknown benchmark {name!r}; valid: {choices(REGISTRY)}")
    module, cls, _, _ = REGISTRY[base]
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as err:
        raise ConfigError(f"benchmark {base!r} is not available: {err}") from None
    return getattr(mod, cls)()


__all__ = ["REGISTRY", "Benchmark", "Task", "agent_names", "benchmark_names", "make"]
