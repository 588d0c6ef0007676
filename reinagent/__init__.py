"""reinagent: verbal reinforcement (Reflexion) of language agents.

Small public API (`run`, `resume`, `make`, `RunConfig`, `ReflexionStrategy`); heavy parts are
imported on use. docs/architecture.md draws how the parts below meet.

    config.py strategy.py      RunConfig (YAML + flags); ReflexionStrategy: what a trial carries over
    reference.py               the reference code's settings: --preset paper, a run's departures
    names.py                   the rollout names config.py checks (below config and rollouts/ both)
    task.py records.py         Task; the typed records of a run (Trajectory, TrialRecord, RunSpec, ...)
    env.py                     the Gymnasium-style Env every benchmark's environments implement
    plan.py settings.py        a run's settings resolved once into a frozen Plan, then built (models, agent,
                               Reflector: the Experiment); each part's own settings
    runner.py schedule.py      start/resume/load a run; its trial loop (pipeline or barrier)
    slots.py                   the episode slots, by priority: a retry goes ahead of a new first trial
    episode.py                 one (task, trial): rollout, evaluation, reflection, into a record
    memory.py reflector.py     episodic memory; the Reflector that writes a failed trial's reflection
    store.py runlock.py        the run directory (append-only records.jsonl) and its one-writer lock
    runfiles.py seal.py        bounded reads of a run's files; this user's seal of a run's endpoints
    resuming.py repair.py      what a resume changes; `reinagent repair` of a corrupt record file
    branch.py                  `reinagent branch`: a run under another strategy sharing a run's trial 1
    first_programs.py          a programming run's first programs judged by the hidden tests after its loop
    outcome.py preflight.py    a run's exit code; checks of running things before the first episode
    cli.py errors.py           the console script; errors that become one line, not a traceback
    paths.py provenance.py redact.py   data and cache folders; run provenance; keys kept out of logs
    text.py                    outside text made valid Unicode (lone surrogates) where it enters
    terminal.py                untrusted text without escape sequences, for the terminal
    agents/ benchmarks/ rollouts/ executors/ llm/ sandbox/ programming/   the parts of an episode
    stores/ report/ browse/ viewer/   where runs live and how they are read
    service/                   environments as HTTP services
    distil/ rl/                learners: trajectories -> weights (SFT, GRPO)
"""

from __future__ import annotations

__version__ = "0.1.0"

from reinagent.config import RunConfig, build_config  # noqa: E402
from reinagent.strategy import ReflexionStrategy  # noqa: E402


def run(config: RunConfig | None = None, *, progress: bool = True, **settings):
    """Run an experiment (settings as for `reinagent run`); returns the run directory."""
    from reinagent.runner import run_experiment

    return run_experiment(config or build_config(**settings), progress=progress)


def resume(run_dir, **kwargs):
    """Continue a run from its records; returns the run directory."""
    from reinagent.runner import resume_experiment

    return resume_experiment(run_dir, **kwargs)


def make(benchmark: str):
    """The benchmark registered as `benchmark` (e.g. 'hotpotqa' or 'hotpotqa-v1')."""
    from reinagent.benchmarks import make as _make

    return _make(benchmark)


__all__ = ["ReflexionStrategy", "RunConfig", "__version__", "build_config", "make", "resume", "run"]
