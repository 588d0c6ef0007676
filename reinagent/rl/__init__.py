"""Learning from rewards (issue 18): the seed's RLAgent API, GRPO over multi-turn token rollouts,
an AReaL-style asynchronous mode, and `reinagent rl run|train --config rl.toml` (docs/rl.md).

Importing this package is cheap: torch and transformers load when a policy is needed.
"""

from reinagent.rl.agent import EpisodeResult, EvalResult, RLAgent
from reinagent.rl.config import RLAgentConfig, build_rl_config

__all__ = ["EpisodeResult", "EvalResult", "RLAgent", "RLAgentConfig", "build_rl_config"]
