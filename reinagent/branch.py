"""`reinagent branch SOURCE --strategy S --run-dir NEW`: a new run that shares SOURCE's first trial.

Trial 1's prompt never depends on the strategy (there is no memory yet), so two strategies compared
on the same tasks can share their first attempts instead of generating them twice. Sharing them
makes the comparison exactly paired (the same trial-1 failures under both, whatever the engine's
batching did to a greedy decode) and saves a trial of model calls. The branch is an ordinary run:
its spec is SOURCE's with the strategy (and trial count) changed, `settings.branched_from` naming
SOURCE, and its records start as copies of SOURCE's live trial-1 records. It then continues as
`reinagent resume` does: the reflections its strategy needs and SOURCE did not write are written
first (as a run extended from 1 trial writes them), then trials 2..N.

A copied record keeps its reflection only where both strategies use reflections (the same Reflector
settings wrote it); otherwise the branch's own Reflector writes it, or, under a strategy without
reflections, it is dropped. Directory runs only (a database run: copy it to a directory first).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from reinagent.errors import ConfigError, RunDirError
from reinagent.records import SpecChange, TrialRecord
from reinagent.redact import redact_argv


def branch_records(records: list[TrialRecord], task_ids: list[str], keep_reflections: bool,
                   source: str = "") -> list[TrialRecord]:
    """The live trial-1 records of every task, in task order, ready to start the branch, each
    marked as copied from `source` with every call it holds (the branch's report leaves them
    out of its time and usage); a RunDirError naming the tasks whose first trial SOURCE has not
    finished."""
    first = {r.task_id: r for r in records if r.trial == 1}
    missing = [tid for tid in task_ids if tid not in first]
    if missing:
        raise RunDirError(f"trial 1 of {len(missing)} task(s) is not finished in the source run "
                          f"(first: {missing[0]}); resume it first")
    kept = []
    for tid in task_ids:
        record = first[tid].model_copy(deep=True)
        if not keep_reflections:
            record.reflection, record.reflection_raw, record.reflection_calls = None, None, []
        record.copied_from = source
        record.copied_calls = len(record.calls)
        kept.append(record)
    return kept


def create_branch(source: str | Path, run_dir: str | Path, *, strategy: str, num_trials: int | None = None,
                  endpoints: dict | None = None) -> Path:
    """Write the branch's spec and trial-1 records to `run_dir` (new); returns it. Nothing is run.
    `endpoints` (--base-url, --api-key-env, --env-url) say where the branch sends its requests
    and keys; without them SOURCE's are used only when this user sealed them (see resuming.py)."""
    from reinagent.config import build_config
    from reinagent.resuming import _drop_key_on_new_server, _shown, check_overrides, confirm_destinations, sealed_settings
    from reinagent.seal import SEAL_FIELD
    from reinagent.store import RunStore, check_new_run_dir, read_records, read_spec

    source, run_dir = Path(source), Path(run_dir)
    spec = read_spec(source)  # one line for a missing or foreign directory
    endpoints = {k: v for k, v in (endpoints or {}).items() if v}
    moved = check_overrides(spec, endpoints)
    confirmed = confirm_destinations(spec, moved, endpoints)  # before anything is written
    _drop_key_on_new_server(spec, moved, endpoints)
    spec = spec.model_copy(update={"config": {**spec.config, **{k: _shown(k, v) for k, v in moved.items()}},
                                   "settings": {k: v for k, v in spec.settings.items() if k != SEAL_FIELD}})
    check_new_run_dir(run_dir)
    if run_dir.resolve() == source.resolve():
        raise ConfigError("--run-dir must be a new directory, not the source run")
    old = build_config(**{k: v for k, v in spec.config.items() if k != "run_dir"})
    trials = num_trials if num_trials is not None else old.num_trials
    if trials < 2:
        raise ConfigError(f"--num-trials must be at least 2 for a branch (trial 1 is the source's), got {trials}")
    new = build_config(**{**{k: v for k, v in spec.config.items() if k != "run_dir"},
                          "strategy": strategy, "num_trials": trials, "run_dir": str(run_dir)})
    keep = old.strategy.uses_reflections and new.strategy.uses_reflections
    records = branch_records(read_records(source), spec.task_ids, keep, str(source))
    config = {**spec.config, "strategy": new.strategy.value, "num_trials": trials, "run_dir": str(run_dir)}
    change = SpecChange(at=time.time(), command=redact_argv(sys.argv),
                        changes={"branched_from": str(source), "strategy": new.strategy.value, "num_trials": trials})
    settings = {**spec.settings, "branched_from": {"run": str(source), "trials": 1, "strategy": old.strategy.value,
                                                   "reflections": "kept" if keep else "not copied"}}
    branched = spec.model_copy(update={
        "config": config, "created_at": time.time(), "command": redact_argv(sys.argv), "history": [change],
        "settings": sealed_settings(settings, config, confirmed),
    })
    store = RunStore.create(run_dir, branched)
    try:
        for record in records:
            store.append(record)
    finally:
        store.close()
    return run_dir


def branch_run(source: str | Path, run_dir: str | Path, *, strategy: str, num_trials: int | None = None,
               progress: bool = True, endpoints: dict | None = None) -> Path:
    """create_branch, then run it on as `reinagent resume` does; returns the branch's directory."""
    from reinagent.runner import resume_experiment

    path = create_branch(source, run_dir, strategy=strategy, num_trials=num_trials, endpoints=endpoints)
    print(f"branch of {source} (its trial 1) under {strategy}: {path}", file=sys.stderr, flush=True)
    # the endpoints again: a URL recorded without its credentials is given whole (resuming.py)
    return resume_experiment(path, progress=progress, overrides={k: v for k, v in (endpoints or {}).items() if v})
