"""`reinagent rl run | train | eval --config rl.toml`: the seed's [rl] TOML, from the shell.

Heavy imports (torch, transformers) happen inside the commands; `reinagent rl --help` is instant.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from reinagent.terminal import shell_word


def config_options(fn):
    options = [
        click.option("--config", "config_file", required=True, type=click.Path(dir_okay=False),
                     help="TOML file with an [rl] table (the seed's keys and ours; docs/rl.md)."),
        click.option("--output-dir", help="Overrides [rl] output_dir."),
        click.option("--num-tasks", type=click.IntRange(min=1), help="Overrides [rl] num_tasks."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _agent(config_file, **overrides):
    from reinagent.rl import RLAgent
    from reinagent.rl.toml import load_rl_config

    return RLAgent(config=load_rl_config(config_file, **overrides))


@click.group()
def rl() -> None:
    """Learn from rewards: run episodes, train with GRPO (or SFT), evaluate ([rl] TOML)."""


@rl.command()
@config_options
@click.option("--quiet", is_flag=True, help="No progress bar.")
def run(config_file, output_dir, num_tasks, quiet) -> None:
    """Run episodes of env_name into a new run directory (`reinagent report` reads it)."""
    from reinagent.cli import _finish, quiet_libraries

    if quiet:
        quiet_libraries()
    agent = _agent(config_file, output_dir=output_dir, num_tasks=num_tasks)
    cfg = agent.config
    run_dir = Path(cfg.output_dir) / f"{agent.bench.name}-{cfg.rollout}-{time.strftime('%Y%m%d-%H%M%S')}"
    _finish(agent.collect(run_dir=run_dir, progress=not quiet))


@rl.command()
@config_options
@click.option("--max-steps", type=click.IntRange(min=1), help="Overrides [rl] max_steps.")
@click.option("--overwrite", is_flag=True, default=None, help="Replace a non-empty output_dir.")
def train(config_file, output_dir, num_tasks, max_steps, overwrite) -> None:
    """Train the policy on env_name's training split; prints `checkpoint: PATH` (--model local:PATH)."""
    from reinagent.rl.metrics import signal_warning, step_line
    from reinagent.rl.policy import require_extra

    require_extra("train")  # seconds, not after the first rollouts
    agent = _agent(config_file, output_dir=output_dir, num_tasks=num_tasks, max_steps=max_steps, overwrite=overwrite)
    agent.check_output()  # a refusal in a second, not after loading the model
    agent.on_progress = _rollout_progress
    click.echo(f"training {agent.weights} on {agent.bench.name}; {_threads(agent)}")

    def progress(row, steps):
        click.echo(step_line(row, steps))
        warning = signal_warning(row)
        if warning:
            click.echo(warning, err=True)

    try:
        summary = agent.train(on_step=progress)
    except KeyboardInterrupt as err:
        _train_interrupted(err, agent)
    mode = "async" if summary.async_mode else "sync"
    click.echo(f"trained {summary.steps} {summary.method} steps ({mode}) on {summary.episodes} episodes; "
               f"reward {summary.reward_first:.3f} (step 1) -> {summary.reward_last:.3f} (step {summary.steps}); "
               f"loss {summary.losses[0]:.4f} -> {summary.losses[-1]:.4f}")
    click.echo(f"metrics:    {summary.metrics}")
    click.echo(f"rollouts:   {summary.rollouts}  (reinagent report {shell_word(summary.rollouts)})")
    click.echo(f"checkpoint: {summary.checkpoint}")


def _train_interrupted(err: KeyboardInterrupt, agent) -> None:
    """Ctrl-C in `rl train`: what was kept and what the same command does when run again."""
    import shlex

    from reinagent.cli import _exit_quietly
    from reinagent.errors import TrainingInterrupted
    from reinagent.rl.loop import uses_trl
    from reinagent.rl.trl_grpo import last_checkpoint

    cfg = agent.config
    again = "reinagent " + shlex.join(sys.argv[1:])  # this very command line, its overrides included
    if not uses_trl(cfg, cfg.method):
        click.echo(f"interrupted: only trainer = \"trl\" (GRPO, not async_mode) resumes; `{again}` with "
                   "overwrite = true starts again", err=True)
        _exit_quietly(130)
    saved = last_checkpoint(Path(cfg.output_dir))[1]
    where = (f"after step {err.step}, with a checkpoint of that step" if isinstance(err, TrainingInterrupted)
             and saved == err.step else "")
    kept = f"continues at step {saved + 1} from trainer/checkpoint-{saved}" if saved else "starts again at step 1 (no checkpoint yet)"
    click.echo(f"interrupted{' ' + where if where else ''}: `{again}` (the same command, overwrite = false) {kept}",
               err=True)
    _exit_quietly(130)


def _rollout_progress(done: int, total: int, tokens: int, seconds: float) -> None:
    """A line per generation batch, so a slow step is never minutes of silence."""
    rate = tokens / seconds if seconds > 0 else 0.0
    click.echo(f"  rollouts: {done}/{total} episodes done, {tokens} tokens generated, {rate:.1f} tokens/s", err=True)


def _threads(agent) -> str:
    import torch

    agent.ensure_policy()  # loads the weights and sets torch's threads
    return f"torch threads {torch.get_num_threads()} (threads / REINAGENT_TORCH_THREADS set it)"


@rl.command(name="eval")
@config_options
@click.option("--split", default="test", show_default=True, help="Held-out split.")
@click.option("--save", "save_to", type=click.Path(dir_okay=False), help="Write the per-task results as JSON.")
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False),
              help="A --save file of another evaluation (the base model): print the paired comparison.")
def eval_(config_file, output_dir, num_tasks, split, save_to, baseline) -> None:
    """The policy's held-out success rate with its 95% interval (token rollouts, greedy); with
    --baseline, `held-out success: B% -> A% on N tasks, McNemar p = P` against that evaluation."""
    from reinagent.rl.compare import compare_lines, load_eval, save_eval
    from reinagent.rl.policy import require_extra

    base = load_eval(baseline) if baseline else None  # a bad file fails before minutes of rollouts
    agent = _agent(config_file, output_dir=output_dir)
    if agent.trainable:
        require_extra("eval")
    agent.on_progress = _rollout_progress
    result = agent.evaluate(split=split, num_tasks=num_tasks)
    click.echo(result.line())
    if save_to:
        save_eval(result, save_to)
    if base is not None:
        for line in compare_lines(base, result):
            click.echo(line)
