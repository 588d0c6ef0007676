"""When each (task, trial) runs: one chain of trials per task (`pipeline`, the default) or all
tasks of trial k before any of trial k+1 (`barrier`, the paper's loop; kept for comparison).

Both schedules give the same records for the same seed and cache: a task's trial k+1 sees only its
own memory (its own earlier reflections and last attempt), and that memory is complete as soon as
its own trial-k record is durable. The pipeline therefore lets a task start trial k+1 while other
tasks are still in trial k; a trial's wall time is no longer set by its slowest task. A task keeps
its slot (reinagent.slots) from one trial to the next, so the pipeline runs in the order of the
reference programming code's loop (one task's trials, then the next task's; its HotpotQA and
ALFWorld code runs the barrier's order), up to --max-concurrency tasks at a time; a first-come
queue had put every retry behind every first trial.

What stays per trial: the one summary line per trial (printed, in trial order, once the last task
of that trial is through it) and the rule that a trial whose every episode errored stops the run
(a dead server would fail every later trial too). In the pipeline a task may start trial k+1 only
once some episode of trial k ended without an error, or once trial k is over with no episode
attempted; if trial k ends all errors, nobody starts k+1: exactly the barrier's outcome.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass, field

from reinagent.benchmarks.base import Task
from reinagent.memory import memory_before
from reinagent.records import TrialRecord, Usage, stops_loop
from reinagent.slots import Slots
from reinagent.terminal import shell_word
from reinagent.strategy import repeated_retries

Key = tuple[str, int]


async def run_trials(exp, records: list[TrialRecord], *, progress: bool = True) -> None:
    """Run trials 1..num_trials, skipping every (task, trial) the records already hold."""
    from reinagent.episode import run_episode
    from reinagent.executors import EpisodeParts, make_executor
    from reinagent.plan import rebuild
    from reinagent.records import latest_records
    from reinagent.resuming import missing_reflections, write_missing_reflections

    cfg = exp.config
    done = latest_records(records)
    limit = Slots(cfg.max_concurrency or exp.actor_llm.default_concurrency)
    # A run extended with `resume --num-trials`: its old last trial skipped reflecting; do it first
    # (a new run has no records, so nothing to look for).
    missing = missing_reflections(done, cfg.num_trials, cfg.strategy.uses_reflections, cfg.evaluator) if done else []
    if missing:
        await warm_up_if(exp, missing)
        await write_missing_reflections(exp, done, limit)
    pending = [trial for trial in range(1, cfg.num_trials + 1) if _pending(exp, done, trial)]
    if not pending and not missing:  # a resume of a finished run: one plain line, no "attempted 0" per trial
        errored = sum(r.error is not None for r in done.values())
        _emit(f"nothing to do: every task's loop has ended ({len(done)} records over {cfg.num_trials} trial(s)); "
              "--num-trials N adds trials" + (f", --retry-errors redoes the {errored} that errored" if errored else "")
              + ", --from-trial K redoes trial K and later")
        return
    if pending and max(pending) > 1 and (why := repeated_retries(cfg.strategy, cfg.temperature, cfg.rollout, cfg.num_trials)):
        _emit(f"warning: {why}")
    executor = make_executor(exp, EpisodeParts(run_episode, warm_up_if, rebuild), exp.plan.executor)
    try:
        if pending:
            await executor.start()  # a local model loads (or a cluster is joined) once work exists
        if getattr(cfg, "schedule", "pipeline") == "barrier":
            await _barrier(exp, executor, done, limit, progress)
        else:
            await _pipeline(exp, executor, done, limit, progress)
    finally:
        await executor.aclose()


async def warm_up_if(exp, work: list) -> None:
    """Load a local model, on its own lines, before the first progress bar that needs it (never
    for a resume with nothing left to do). Handed to the executors (EpisodeParts)."""
    if work and not exp.warmed:
        from reinagent.preflight import warm_up

        await warm_up(exp.llms)
        exp.warmed = True


def _pending(exp, done: dict[Key, TrialRecord], trial: int) -> list[Task]:
    return [t for t in exp.tasks if (t.task_id, trial) not in done and not _stopped_before(exp, done, t.task_id, trial)]


def _stopped_before(exp, done: dict[Key, TrialRecord], task_id: str, trial: int) -> bool:
    """The task's loop ended at an earlier trial: its Evaluator passed it (the hidden verdict, or
    under --evaluator internal the program's own tests, whatever the hidden tests said)."""
    evaluator = _evaluator(exp)
    return any(done.get((task_id, t)) and stops_loop(done[(task_id, t)], evaluator) for t in range(1, trial))


def _evaluator(exp) -> str | None:
    return getattr(exp.config, "evaluator", None)


async def _episode(exp, executor, task: Task, trial: int, done, limit) -> TrialRecord:
    async with limit:
        rec = await _run_one(exp, executor, task, trial, done)
    await exp.store.append_async(rec)  # durable before anything counts it done
    return rec


async def _run_one(exp, executor, task: Task, trial: int, done) -> TrialRecord:
    memory = memory_before(done, task.task_id, trial, exp.config.memory_size)
    return await executor.episode(task, trial, memory, done.get((task.task_id, trial - 1)))


async def _barrier(exp, executor, done, limit, progress: bool) -> None:
    cfg = exp.config
    for trial in range(1, cfg.num_trials + 1):
        pending = _pending(exp, done, trial)
        started = time.perf_counter()
        bar = _bar(progress, len(pending), f"trial {trial}")

        async def one(task: Task) -> TrialRecord:
            rec = await _episode(exp, executor, task, trial, done, limit)
            if bar is not None:
                _show_activity(exp, bar)
                bar.update(1)
            return rec

        ticker = asyncio.create_task(_tick(exp, bar))
        try:
            results = list(await asyncio.gather(*(one(t) for t in pending)))
        finally:
            ticker.cancel()
            if bar is not None:
                bar.close()
        for rec in results:
            done[(rec.task_id, rec.trial)] = rec
        _print_summary(exp, trial, done, time.perf_counter() - started, results)
        if _all_errors(results):
            _say_halted(exp, trial, results)
            break


@dataclass
class _Trial:
    """What one trial of the pipeline has seen so far."""

    results: list[TrialRecord] = field(default_factory=list)
    first_start: float | None = None
    last_end: float | None = None
    ok: asyncio.Event = field(default_factory=asyncio.Event)  # a later trial may start
    halted: bool = False  # ended with every episode in an error: no later trial starts


class _Book:
    """Where each task's chain is (the last trial it is through) and which trials are over."""

    def __init__(self, exp, done, bar):
        self.exp, self.done, self.bar = exp, done, bar
        self.n = exp.config.num_trials
        self.trials = {k: _Trial() for k in range(1, self.n + 1)}
        self.through = {t.task_id: 0 for t in exp.tasks}
        self.closed = 0  # trials 1..closed have printed their line

    def started(self, trial: int) -> None:
        state = self.trials[trial]
        state.first_start = state.first_start or time.perf_counter()

    def finished(self, rec: TrialRecord) -> None:
        state = self.trials[rec.trial]
        state.results.append(rec)
        state.last_end = time.perf_counter()
        if rec.error is None:
            state.ok.set()  # someone got through: this trial cannot end all errors
        if self.bar is not None:
            _show_activity(self.exp, self.bar)
            self.bar.update(1)

    def skip(self, count: int) -> None:
        """A chain stopped early (solved, or the run halted): its later episodes never come."""
        if self.bar is not None and count:
            self.bar.total -= count
            self.bar.refresh()

    def advance(self, task_id: str, through: int) -> None:
        """The task's chain is done with trials up to `through` (it ran, skipped or stopped)."""
        self.through[task_id] = max(self.through[task_id], through)
        low = min(self.through.values(), default=self.n)
        while self.closed < low:
            self.closed += 1
            self._close(self.closed)

    def _close(self, trial: int) -> None:
        state = self.trials[trial]
        if trial > 1 and self.trials[trial - 1].halted:
            state.halted = True  # the run stopped before this trial: no line, as in the barrier loop
            state.ok.set()
            return
        wall = (state.last_end - state.first_start) if state.first_start and state.last_end else 0.0
        _print_summary(self.exp, trial, self.done, wall, state.results, self.bar)
        if _all_errors(state.results):
            state.halted = True
            if trial < self.n:
                _say_halted(self.exp, trial, state.results, self.bar)
        state.ok.set()  # wake every chain waiting on this trial; they read `halted`


async def _pipeline(exp, executor, done, limit, progress: bool) -> None:
    cfg = exp.config
    total = sum(len(_pending(exp, done, k)) for k in range(1, cfg.num_trials + 1))  # an upper bound
    bar = _bar(progress, total, "episodes")
    book = _Book(exp, done, bar)

    async def chain(order: int, task: Task) -> None:
        # A chain keeps its slot from one trial to the next (the reference loop's order: a task's
        # retry before a new task's first trial); it lets the slot go only to wait for a trial's
        # first good episode, and then queues ahead of every chain at an earlier trial.
        held = False
        try:
            for trial in range(1, cfg.num_trials + 1):
                if (task.task_id, trial) in done:
                    book.advance(task.task_id, trial)  # finished before this invocation (a resume)
                    continue
                if _stopped_before(exp, done, task.task_id, trial):
                    break
                if trial > 1:
                    gate = book.trials[trial - 1]
                    if not gate.ok.is_set():
                        if held:
                            limit.release()  # waiting holds no slot
                            held = False
                        await gate.ok.wait()
                    if gate.halted:
                        book.skip(sum((task.task_id, k) not in done for k in range(trial, cfg.num_trials + 1)))
                        break
                if not held:
                    await limit.acquire((-trial, order))
                    held = True
                book.started(trial)
                rec = await _run_one(exp, executor, task, trial, done)
                await exp.store.append_async(rec)  # durable before anything counts it done
                done[(rec.task_id, rec.trial)] = rec
                book.finished(rec)
                book.advance(task.task_id, trial)
                if stops_loop(rec, _evaluator(exp)):
                    book.skip(sum((task.task_id, k) not in done for k in range(trial + 1, cfg.num_trials + 1)))
        finally:
            if held:
                limit.release()
        book.advance(task.task_id, cfg.num_trials)  # nothing more from this task

    ticker = asyncio.create_task(_tick(exp, bar))
    try:
        # A failing chain (a store that cannot write) cancels the others: nothing half-counted.
        async with asyncio.TaskGroup() as group:
            for order, task in enumerate(exp.tasks):
                group.create_task(chain(order, task))
    except BaseExceptionGroup as group_err:
        raise group_err.exceptions[0] from None
    finally:
        ticker.cancel()
        if bar is not None:
            bar.close()


def _all_errors(results: list[TrialRecord]) -> bool:
    return bool(results) and all(r.error is not None for r in results)


def _say_halted(exp, trial: int, results: list[TrialRecord], bar=None) -> None:
    # Every episode of this trial failed (a dead server, a broken sandbox): later trials would
    # fail the same way and only bury the cause. Resume once it is fixed.
    if trial >= exp.config.num_trials:
        return
    from reinagent.outcome import Outcome

    kinds = ", ".join(f"{k} x{n}" for k, n in Outcome.of(results).kinds.most_common())
    _emit(f"trial {trial}: every episode ended in an error ({kinds}); not starting trial {trial + 1}. "
          f"Fix the cause, then: reinagent resume {shell_word(exp.store.run_dir)} --retry-errors", bar)


TICK_S = 2.0  # how often the bar shows the calls and nodes of episodes still running
LINE_EVERY_S = 60.0  # stderr not a terminal: a progress line at most this often


def _show_activity(exp, bar) -> None:
    activity = getattr(exp, "activity", None)
    if bar is not None and activity is not None and activity.calls:
        bar.set_postfix_str(activity.note(), refresh=True)


async def _tick(exp, bar) -> None:
    """Keep the bar moving inside long episodes (a ToT episode ran 160 s before one finished)."""
    if bar is None:
        return
    while True:
        await asyncio.sleep(TICK_S)
        _show_activity(exp, bar)


def _bar(progress: bool, total: int, desc: str):
    if not progress or not total:
        return None
    if not sys.stderr.isatty():  # a log file: tqdm's \r redraws glued the bar to every trial line
        return _LineBar(total, desc)
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="episode", file=sys.stderr, leave=False)


class _LineBar:
    """The progress bar where stderr is a file or a pipe: a whole line, at most every
    LINE_EVERY_S seconds, with the methods of tqdm's that the schedules use."""

    def __init__(self, total: int, desc: str):
        self.total, self.desc, self.n, self.note = total, desc, 0, ""
        self.said_at = time.monotonic()

    def update(self, n: int = 1) -> None:
        self.n += n
        if time.monotonic() - self.said_at >= LINE_EVERY_S and self.n < self.total:
            self.said_at = time.monotonic()
            print(f"progress ({self.desc}): {self.n}/{self.total} episodes" + (f", {self.note}" if self.note else ""),
                  file=sys.stderr, flush=True)

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.note = text

    def refresh(self) -> None:
        pass

    def write(self, line: str, file=None) -> None:
        print(line, file=file or sys.stderr, flush=True)

    def close(self) -> None:
        pass


def _emit(line: str, bar=None) -> None:
    from reinagent.terminal import plain

    line = plain(line)  # error kinds come from programs' and models' text
    if bar is not None:  # above the live bar, not through it
        bar.write(line, file=sys.stderr)
        sys.stderr.flush()
    else:
        print(line, file=sys.stderr, flush=True)


def _print_summary(exp, trial: int, done, wall_s: float, this: list[TrialRecord], bar=None) -> None:
    """One line per trial about what this invocation attempted (a resume counts only its own)."""
    n = len(exp.tasks)
    solved_now = sum(r.success for r in this)
    evaluator = _evaluator(exp)
    solved_cum = len({tid for (tid, t), r in done.items()
                      if t <= trial and r.success and (t == trial or stops_loop(r, evaluator))})
    if not this:  # nothing of this trial ran now (a resume): no "attempted 0, solved 0" beside its records
        before = sum(t == trial for (_, t) in done)
        _emit(f"trial {trial}/{exp.config.num_trials}: nothing left to run ("
              + (f"{before} records from before" if before else "every task's loop had ended")
              + f"), cumulative {solved_cum}/{n} ({100 * solved_cum / max(n, 1):.1f}%)", bar)
        return
    errors = sum(r.error is not None for r in this)
    usage = Usage()
    for r in this:
        for call in r.calls:
            usage.add(call)
    _emit(
        f"trial {trial}/{exp.config.num_trials}: attempted {len(this)}, solved {solved_now}, "
        f"cumulative {solved_cum}/{n} ({100 * solved_cum / max(n, 1):.1f}%), errors {errors}, "
        f"calls {usage.calls} (cache hits {usage.cache_hits}), "
        f"tokens {usage.prompt_tokens}+{usage.completion_tokens}, {wall_s:.1f}s",
        bar,
    )
