"""Rollout strategies: how one episode (one task, one trial) explores its environment.

`react` is one greedy pass of the agent (the Reflexion paper's setting); `tot` and `mcts` search
over sampled steps; `multi-turn` retries inside the episode on feedback. The registry imports a
strategy's module only when it is asked for, so a missing or broken module never breaks another;
`register_rollout` adds one from outside the package.

    base.py               Rollout, Episode, the registry
    react.py tot.py mcts.py multi_turn.py   the strategies
    search.py steps.py    what ToT and MCTS share (tree, expansion, judging); stepping each agent kind
    value.py branching.py the LLM value function; an environment state per tree node
"""

from reinagent.rollouts.base import (
    ROLLOUTS,
    Episode,
    Rollout,
    check_rollout,
    make_rollout,
    register_rollout,
    rollout_names,
)

__all__ = ["ROLLOUTS", "Episode", "Rollout", "check_rollout", "make_rollout", "register_rollout", "rollout_names"]
