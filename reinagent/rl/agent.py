"""RLAgent: the seed's API (run one episode, collect many, train) over reinagent's parts.

    config = RLAgentConfig(max_turns=5, env_name="arithmetic", rollout_strategy="StandardReAct")
    agent = RLAgent(model=model, tokenizer=tokenizer, config=config)   # or model="local"
    result = agent.run(task_description="What is 3 + 4?")
    agent.train(learning_rate=1e-5, num_epochs=3, batch_size=8)

The policy is a transformers model (given, or loaded from `local` / `local:PATH` / a HF
directory when training needs one): its episodes are token rollouts (rollout.py), whatever the
rollout strategy. Any other model string (scripted:FILE, provider/name, a server at base_url) runs
through reinagent's own agents and rollout strategies (`StandardReAct`, `ToT`, `MCTS`, and our
`MultiTurn`), exactly as `reinagent run` does; such a model can be evaluated but not trained.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reinagent.errors import ConfigError, choices
from reinagent.records import Evaluation, TrialRecord, Trajectory
from reinagent.rl.config import RLAgentConfig, build_rl_config
from reinagent.rl.envs import check_trainable, find_task, resolve_env
from reinagent.rl.loop import TrainSummary
from reinagent.rl.policy import is_local_model, load_policy, torch_threads, weights_name

# rollout strategies a token rollout plays (rollout.py): one reply per turn, feedback in between
TOKEN_ROLLOUTS = {"react": "StandardReAct", "multi-turn": "MultiTurn"}


@dataclass
class EpisodeResult:
    task_id: str
    trajectory: Trajectory
    reward: float
    success: bool


@dataclass
class EvalResult:
    """Mean reward over held-out tasks, with a 95% interval (Wilson's, on the success rate)."""

    split: str
    n: int
    reward_mean: float
    success_rate: float
    ci_low: float
    ci_high: float
    weights: str = ""  # what was evaluated: the model string (a checkpoint path) or "in-memory policy"
    task_ids: tuple[str, ...] = ()  # the tasks evaluated, in order
    solved: tuple[str, ...] = ()  # those solved, for a paired test between two evaluations (rl/compare.py)

    def line(self) -> str:
        of = f" ({self.weights})" if self.weights else ""
        return (f"{self.split}{of}: success {self.success_rate:.1%} [95% CI {self.ci_low:.1%}, {self.ci_high:.1%}] "
                f"over {self.n} tasks; mean reward {self.reward_mean:.3f}")


class RLAgent:
    def __init__(self, model: Any = None, tokenizer: Any = None, config: RLAgentConfig | None = None, **settings: Any):
        base = config.model_dump(exclude_unset=True) if config is not None else {}
        self.config = build_rl_config({**base, **settings}, where="RLAgentConfig") if settings or config is None else config
        if model is None or isinstance(model, str):
            if model is not None:
                self.config = self.config.model_copy(update={"model": model})
            self.policy, self.tokenizer = None, tokenizer
        else:
            if tokenizer is None:
                raise ConfigError("RLAgent(model=<transformers model>) needs its tokenizer: RLAgent(model=m, tokenizer=t, ...)")
            self.policy, self.tokenizer = model, tokenizer
        self.weights = "in-memory policy" if self.policy is not None else weights_name(self.config.model)
        self.on_progress: Any = None  # handed to token rollouts: (episodes done, episodes, tokens, seconds)
        self.plan = resolve_env(self.config)
        self.bench, self.run_config = self.plan.benchmark, self.plan.config
        self.agent = self.bench.make_agent(self.run_config.agent, self.plan.agent_settings)

    # --- the policy ------------------------------------------------------------------------------

    @property
    def trainable(self) -> bool:
        return self.policy is not None or is_local_model(self.config.model)

    def check_output(self, method: str | None = None, output_dir: str | Path | None = None) -> None:
        """A ConfigError now, before the policy loads (29 s for the embedded model), when training
        could not write its output_dir (rl/loop.py `check_output_dir`)."""
        from reinagent.rl.loop import check_output_dir, own_loop

        cfg = self.config
        check_output_dir(Path(output_dir or cfg.output_dir), cfg.overwrite, own_loop(cfg, method or cfg.method))

    def ensure_policy(self) -> tuple[Any, Any]:
        """The transformers policy, loaded on first need from the model string."""
        if self.policy is None:
            self.policy, self.tokenizer = load_policy(self.config.model)
        import torch

        torch.set_num_threads(torch_threads(self.config.threads))
        return self.policy, self.tokenizer

    def token_rollout(self, split: str | None = None):
        from reinagent.rl.rollout import TokenRollout

        check_trainable(self.bench)
        if self.config.rollout not in TOKEN_ROLLOUTS:
            raise ConfigError(f"rollout_strategy {self.config.rollout_strategy!r} runs with a model string "
                              f"(scripted:FILE, provider/name, base_url); a trainable policy plays token rollouts: "
                              f"valid here: {choices(TOKEN_ROLLOUTS.values())}")
        _, tokenizer = self.ensure_policy()
        rollout = TokenRollout(self.bench, self.agent, tokenizer, self.config, self.plan)
        rollout.on_progress = self.on_progress
        return rollout

    def check_text_settings(self) -> None:
        """Settings that only token rollouts honour are refused on the text path (reinagent's agents
        and rollouts), rather than silently doing nothing there."""
        explicit = self.config.model_fields_set
        ignored = ["max_obs_length"] if "max_obs_length" in explicit else []
        if "max_prompt_length" in explicit and getattr(self.agent, "max_prompt_tokens", None) is None:
            ignored.insert(0, "max_prompt_length")
        if not ignored:
            return
        what = (f"{' and '.join(ignored)} apply to token rollouts of a trainable policy; the "
                f"{self.bench.name} {self.run_config.agent} agent run with model {self.config.model!r} has no such limit")
        if self.trainable:
            # The same [rl] table trains and evaluates this model (examples/rl.toml): there the keys
            # bound its token rollouts. Not an error here, but never silently ignored either.
            import sys

            print(f"note: {what}, so they bound only rl train and rl eval", file=sys.stderr, flush=True)
            return
        raise ConfigError(f"{what}: remove them from [rl]")

    def publish(self, run_dir: Path) -> None:
        """Copy a finished run directory into the store at storage_url (storage_backend other than file)."""
        if self.config.storage_backend == "file":
            return
        from reinagent.store import read_log, read_spec
        from reinagent.stores import open_store

        with open_store(self.config.storage_url) as db:
            db.import_log(Path(run_dir).resolve().name, read_spec(run_dir), read_log(run_dir))

    # --- episodes --------------------------------------------------------------------------------

    def run(self, task_description: str) -> EpisodeResult:
        """One episode of the task the description names (a task id, its question, or for
        arithmetic any 'a + b'); greedy unless eval_temperature > 0."""
        task = find_task(self.bench, task_description)
        if self.policy is None:
            self.check_text_settings()
        if self.policy is not None:
            episode = self.token_rollout().run(self.policy, [task], temperature=self.config.eval_temperature)[0]
            return EpisodeResult(task.task_id, episode.trajectory(), episode.reward, episode.success)
        from reinagent.runner import run_sync

        trajectory, evaluation = run_sync(self._episode(task))
        return EpisodeResult(task.task_id, trajectory, evaluation.reward, evaluation.success)

    async def _episode(self, task: Any) -> tuple[Trajectory, Evaluation]:
        from reinagent.agents.base import Actor, Budget
        from reinagent.memory import MemoryView
        from reinagent.rollouts import Episode, make_rollout
        from reinagent.plan import build_models
        from reinagent.strategy import ReflexionStrategy

        plan = self.plan
        actor_llm, _, llms = build_models(plan)
        try:
            actor = Actor(actor_llm, Trajectory(), f"{task.task_id}/rl", budget=Budget.of(plan.agent_settings))
            episode = Episode(self.bench, self.agent, task, MemoryView(1, ReflexionStrategy.NONE), actor,
                              plan.task_settings, plan.rollout)
            return await make_rollout(plan.config.rollout, plan.rollout).run(episode)
        finally:
            for llm in llms:
                await llm.aclose()

    def collect(self, num_tasks: int | None = None, split: str | None = None, run_dir: str | Path | None = None,
                progress: bool = False) -> Path:
        """Episodes of the split's first `num_tasks` tasks into a new run directory (`reinagent
        report` reads it), `max_workers` at a time; returns the directory."""
        run_dir = Path(run_dir) if run_dir else Path(self.config.output_dir) / f"collect-{time.strftime('%Y%m%d-%H%M%S')}"
        split = split or self.run_config.split
        num = num_tasks or self.config.num_tasks
        if self.policy is None:
            from reinagent.runner import run_experiment

            self.check_text_settings()
            config = self.run_config.model_copy(update={"split": split, "num_envs": num, "run_dir": str(run_dir)})
            run_dir = Path(run_experiment(config, progress=progress))
        else:
            run_dir = self._collect_tokens(split, num, run_dir)
        self.publish(run_dir)
        return run_dir

    def plan_of(self, tasks: list, **update: Any):
        """The plan of a run of these tasks with `update` to its settings (what its spec records)."""
        import dataclasses

        return dataclasses.replace(self.plan, config=self.run_config.model_copy(update=update), tasks=tuple(tasks))

    def _collect_tokens(self, split: str, num: int | None, run_dir: Path) -> Path:
        from reinagent.runner import make_spec
        from reinagent.store import RunStore

        tasks = self.bench.load_tasks(split)[:num]
        plan = self.plan_of(tasks, split=split, num_envs=num, run_dir=str(run_dir), model=f"policy:{self.config.model}")
        store = RunStore.create(run_dir, make_spec(plan, {"rl": self.config.model_dump(mode="json")}))
        try:
            episodes = self.token_rollout().run(self.policy, tasks, temperature=self.config.eval_temperature,
                                                seed=self.config.seed)
            for ep in episodes:
                now = time.time()
                store.append(TrialRecord(task_id=ep.task_id, trial=1, success=ep.success, reward=ep.reward,
                                         answer=ep.answer, trajectory=ep.trajectory(),
                                         evaluation={"turns": ep.turns}, started_at=now, finished_at=now))
        finally:
            store.close()
        return run_dir

    def evaluate(self, split: str = "test", num_tasks: int | None = None) -> EvalResult:
        """The policy on a held-out split (greedy unless eval_temperature > 0)."""
        tasks = self.bench.load_tasks(split)[:num_tasks]
        episodes = self.token_rollout().run(self.ensure_policy()[0], tasks, temperature=self.config.eval_temperature,
                                            seed=self.config.seed)
        wins = sum(e.success for e in episodes)
        from reinagent.report.stats import wilson_interval

        low, high = wilson_interval(wins, len(episodes))
        return EvalResult(split, len(episodes), sum(e.reward for e in episodes) / max(1, len(episodes)),
                          wins / max(1, len(episodes)), low, high, weights=self.weights,
                          task_ids=tuple(e.task_id for e in episodes),
                          solved=tuple(e.task_id for e in episodes if e.success))

    # --- training --------------------------------------------------------------------------------

    def train(self, learning_rate: float | None = None, num_epochs: float | None = None, batch_size: int | None = None,
              method: str | None = None, max_steps: int | None = None, output_dir: str | Path | None = None,
              on_step: Any = None) -> TrainSummary:
        """GRPO (or rejection-sampled SFT, or `reflect`: GRPO on reflections and the retries that
        read them, rl/reflect.py) on the training split; writes output_dir (see loop.py) and
        leaves the trained weights in this agent's policy."""
        from reinagent.rl.loop import train_policy

        cfg = self.config
        method = method or cfg.method
        if method not in ("grpo", "sft", "reflect"):
            raise ConfigError(f"unknown method {method!r}; valid: grpo, sft or reflect")
        if method == "reflect":  # train(method="reflect") over a config of another method
            build_rl_config({**cfg.model_dump(exclude_unset=True), "method": method}, where="RLAgent.train")
        if not self.trainable:
            raise ConfigError(f"model {cfg.model!r} cannot be trained here; valid: local, local:PATH, a HF model "
                              "directory, or RLAgent(model=<transformers model>, tokenizer=...)")
        self.check_output(method, output_dir)  # before the policy loads
        rollout = self.token_rollout()
        split = cfg.split or ("train" if "train" in self.bench.splits else self.bench.default_split)
        tasks = self.bench.load_tasks(split)[: cfg.num_tasks]
        model, tokenizer = self.ensure_policy()
        plan = self.plan_of(tasks, split=split, num_envs=cfg.num_tasks, temperature=cfg.temperature)
        summary = train_policy(model, tokenizer, rollout, tasks, cfg, plan, Path(output_dir or cfg.output_dir),
                               learning_rate=learning_rate or cfg.learning_rate, num_epochs=num_epochs or cfg.num_epochs,
                               batch_size=batch_size or cfg.batch_size, method=method,
                               max_steps=max_steps if max_steps is not None else cfg.max_steps, on_step=on_step)
        self.publish(Path(summary.rollouts))
        return summary
