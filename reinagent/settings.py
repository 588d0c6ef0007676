"""Each part's own settings: small frozen records the plan (reinagent/plan.py) fills once from a
run's resolved config and hands down. A benchmark, an agent or a rollout reads only these, never
the whole `RunConfig`, so a reader sees what each part depends on and a part can be built
without a run (the env server, `reinagent.gym`, the distil export). Field names are the RunConfig
names (the --flags of the same names), which plan.resolve fills them from.
"""

from __future__ import annotations

from dataclasses import dataclass

CODER_MAX_TOKENS = 768  # the coder's max_tokens: a function with helpers does not fit the framework's 256


@dataclass(frozen=True)
class BenchmarkSettings:
    """What a benchmark reads: its environments, its judge, its checks (`make_env`, `evaluate`)."""

    benchmark: str
    agent: str
    split: str
    max_steps: int | None = None  # the environment's step budget (None: the benchmark's own)
    timeout_s: float = 10.0  # programming: the sandbox's limit per test or call (CPU seconds)
    allow_weak_sandbox: bool = False  # programming: run generated code without bubblewrap
    alfworld_data: str | None = None  # ALFWorld: the games' folder (None: the packaged set)
    max_concurrency: int | None = None  # ALFWorld: worker processes (None: one per core)
    env_url: str | None = None  # environments on this env server (`reinagent serve-env`)
    env_protocol: str = "reinagent"  # remote: the server's protocol (reinagent | agentgym)
    num_envs: int | None = None  # remote agentgym: how many of its tasks


@dataclass(frozen=True)
class AgentSettings:
    """What an agent reads: its generation parameters, its step and prompt budgets."""

    max_tokens: int = 256  # per model call
    max_tokens_given: bool = False  # set by a flag or YAML key (the coder has its own default otherwise)
    temperature: float = 0.0
    seed: int = 0
    max_steps: int | None = None  # None: the agent's default
    max_prompt_tokens: int | None = None  # ReAct: the scratchpad is cut to fit (None: the agent's default)
    num_internal_tests: int = 4  # coder: unit tests it is asked to write
    internal_tests_kept: int | None = None  # coder: tests kept of those written (None: all)
    alfworld_demos: int = 1  # ALFWorld: demonstrations of the task's type
    alfworld_loop: str = "cycle"  # ALFWorld: what counts as a loop of actions
    short_reply_retries: int = 0  # ALFWorld: an empty action is asked for again
    max_calls_per_episode: int | None = None  # the episode's budget (None: unlimited)
    max_tokens_per_episode: int | None = None


@dataclass(frozen=True)
class RolloutSettings:
    """What rollouts read (the --flags of the same names, as RunConfig validated them)."""

    max_steps: int | None  # the agent's step budget (None: the agent's default)
    seed: int  # sampled value judgements derive their seeds from it
    tot_breadth: int  # tot: next steps sampled per kept path
    tot_keep: int  # tot: best paths kept per depth
    tot_depth: int | None  # tot/mcts: depth limit (None: the step budget)
    value_samples: int  # tot/mcts: LLM value judgements per node
    search_temperature: float  # tot/mcts: sampling temperature of searched steps
    search_judge: str  # tot/mcts: reward or value judges a terminal node inside the search
    search_reflections: int | None  # mcts: reflections one episode writes and shows (None: no bound)
    search_reflect_on: str  # mcts: "ended" (failed paths that ended) or "every_failure" (also failed open nodes)
    mcts_iterations: int | None  # mcts: iterations (None: the benchmark's own, else 10)
    mcts_children: int  # mcts: children sampled per expansion
    mcts_exploration: float  # mcts: the UCT exploration constant
    max_turns: int  # multi-turn: answers per episode
    turn_discount: float  # multi-turn: a right answer on turn t earns reward * d**(t-1)
