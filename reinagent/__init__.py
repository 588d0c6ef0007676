"""reinagent: verbal reinforcement (Reflexion) of language agents.

Small public API; heavy parts are imported on use.
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
