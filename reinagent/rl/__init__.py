"""Learning from rewards (issue 18): the seed's RLAgent API, GRPO over multi-turn token rollouts,
an AReaL-style asynchronous mode, and `reinagent rl run|train --config rl.toml` (docs/rl.md).

Importing this package is cheap: torch and transformers load when a policy is needed.

    config.py toml.py     RLAgentConfig (the seed's [rl] keys and ours); reading rl.toml
    agent.py              RLAgent: run, collect, train, evaluate
    envs.py               the environment an episode plays: a registered benchmark or an env server
    policy.py             the trainable model and its tokenizer (transformers)
    rollout.py            multi-turn token rollouts: prompt/completion ids, log-probs, environment mask
    ov_rollout.py         rollout_engine = "openvino": those rollouts sampled by OpenVINO GenAI, weights refreshed per step
    trl_grpo.py           GRPO through TRL's GRPOTrainer fed by the token rollouts (the default trainer)
    grpo.py               our own GRPO loss and learner step (trainer = "reinagent", async mode, SFT)
    reflect.py            method = "reflect": first attempt, G reflections, retries; reward = the retry's success
    reflect_stats.py      why a reflection helps or not: does it state the answer, does the retry follow it
    loop.py async_mode.py the training loop (train_metrics.jsonl, resuming); rollouts one policy version behind
    ranks.py              under `accelerate launch` / torchrun: this process's rank and the output it owns
    metrics.py            one metrics row per step (both trainers), the step line, the no-signal warning
    compare.py            `rl eval --save/--baseline`: before/after on the same tasks, exact McNemar;
                          scripts/reflect_demo.sh's closing lines
    cli.py                `reinagent rl run|train|eval`
"""

from reinagent.rl.agent import EpisodeResult, EvalResult, RLAgent
from reinagent.rl.config import RLAgentConfig, build_rl_config

__all__ = ["EpisodeResult", "EvalResult", "RLAgent", "RLAgentConfig", "build_rl_config"]
