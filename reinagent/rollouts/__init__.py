"""Rollout strategies: how one episode (one task, one trial) explores its environment.

`react` is one greedy pass of the agent (the Reflexion paper's setting); `tot` and `mcts` search
over sampled steps; `multi-turn` retries inside the episode on feedback. The registry imports a
strategy's module only when it is asked for, so a missing or broken module never breaks another.
"""

from reinagent.rollouts.base import ROLLOUTS, Episode, Rollout, check_rollout, make_rollout

__all__ = ["ROLLOUTS", "Episode", "Rollout", "check_rollout", "make_rollout"]
