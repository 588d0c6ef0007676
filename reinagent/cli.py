"""The `reinagent` console script: run, resume, report, list, and the verbs other modules add.

Importing this module must stay cheap: no torch, transformers or litellm until a verb needs them.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys

import click

from reinagent.errors import ReinagentError, RunInterrupted

# verb -> "module:attribute" of a click command, imported only when that verb is used
LAZY_COMMANDS: dict[str, str] = {
    "report": "reinagent.report.cli:report",
    "distil": "reinagent.distil.cli:distil",
    "check-solutions": "reinagent.benchmarks.check:check_solutions",
    "check-answers": "reinagent.benchmarks.answers:check_answers",
    "serve-env": "reinagent.service.cli:serve_env",
    "serve-model": "reinagent.llm.serve:serve_model",
    "check-env": "reinagent.service.cli:check_env",
    "repair": "reinagent.repair:repair_command",
    "runs": "reinagent.browse.cli:runs",
    "show": "reinagent.browse.cli:show",
    "view": "reinagent.browse.cli:view",
    "store": "reinagent.stores.cli:store",
    "rl": "reinagent.rl.cli:rl",
    "list": "reinagent.benchmarks.cli:list_",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted([*super().list_commands(ctx), *LAZY_COMMANDS])

    def get_command(self, ctx, name):
        if name in LAZY_COMMANDS:
            module, attr = LAZY_COMMANDS[name].split(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)

    def format_commands(self, ctx, formatter):
        # click cuts each description to fit one line ("Run solutions against ...;..."); give
        # the whole first sentence instead and let the formatter wrap it.
        rows = [(name, cmd.get_short_help_str(limit=sys.maxsize))
                for name in self.list_commands(ctx)
                if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="reinagent")
def cli() -> None:
    """Reflexion experiments: agents, trials, self-reflections, resumable runs and reports."""


# Options both `run` and `resume` take (what a resume may move: resuming.OVERRIDABLE; the store; the
# trial count; --quiet): each declared once here, with its type; each command gives its help text.
SHARED_OPTIONS: dict[str, dict] = {
    "--num-trials": {"type": int},
    "--model": {},
    "--reflector-model": {},
    "--base-url": {},
    "--api-key-env": {},
    "--env-url": {},
    "--max-concurrency": {"type": int},
    "--max-model-concurrency": {"type": int},
    "--schedule": {"type": click.Choice(["pipeline", "barrier"]), "default": None},
    "--executor": {"type": click.Choice(["local", "ray"]), "default": None},
    "--ray-address": {},
    "--store": {},
    "--cache-scope": {"type": click.Choice(["run", "shared"]), "default": None},
    "--cache-dir": {},
    "--quiet": {"is_flag": True, "help": "No progress bar."},
}


def shared_option(flag: str, text: str | None = None):
    """The click option SHARED_OPTIONS declares for `flag`, with this command's help `text`."""
    return click.option(flag, **{**SHARED_OPTIONS[flag], **({"help": text} if text is not None else {})})


class _MemorySize(click.ParamType):
    """--memory-size: a whole number, or `all` (every reflection: the reference's HotpotQA REFLEXION)."""

    name = "N|all"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or str(value).strip().lower() == "all":
            return value if isinstance(value, int) else "all"
        try:
            return int(value)
        except ValueError:
            self.fail(f"{value!r} is not a whole number or 'all'", param, ctx)


MEMORY_SIZE = _MemorySize()


def run_options(fn):
    options = [
        click.option("--config", "config_file", type=click.Path(dir_okay=False), help="YAML file with any of these settings; flags override it."),
        click.option("--benchmark", help="hotpotqa, humaneval, mbpp, alfworld, gsm8k, arithmetic, arithmetic20, or remote with --env-url (see `reinagent list`)."),
        click.option("--agent", help="Agent of the benchmark (default: the benchmark's)."),
        click.option("--strategy", help="none, last_attempt, reflexion or last_attempt_and_reflexion (default reflexion)."),
        click.option("--split", help="Task file of the benchmark (default: the paper's)."),
        shared_option("--num-trials", "Trials per task (default 3)."),
        click.option("--num-envs", type=int, help="How many tasks, from the start of the split (default all)."),
        shared_option("--model", "Actor model: local, local:PATH, scripted:FILE, PROVIDER/NAME."),
        shared_option("--reflector-model", "Reflector model (default: --model)."),
        shared_option("--base-url", "OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1."),
        shared_option("--api-key-env", "Environment variable holding the --base-url server's key (default REINAGENT_SERVER_API_KEY; hosted providers' keys are never sent to it)."),
        shared_option("--env-url", "Environment server (`reinagent serve-env`), e.g. http://127.0.0.1:8000; --benchmark remote: any server of the protocol."),
        click.option("--env-protocol", help="--benchmark remote: the server's protocol, reinagent (default, docs/env-protocol.md) or agentgym (AgentGym's servers: /create, data_idx)."),
        shared_option("--max-concurrency", "Episodes in flight at once (default: the backend's)."),
        shared_option("--max-model-concurrency", "Requests in flight to one model at once, actor and reflector together (default: no cap beyond --max-concurrency)."),
        shared_option("--schedule", "pipeline (default): a task starts its next trial as soon as its own trial is recorded; barrier: every task finishes trial k before any starts k+1. Same records."),
        shared_option("--executor", "Where episodes run: local (default, this process) or ray (Ray tasks; pip install 'reinagent[ray]')."),
        shared_option("--ray-address", "--executor ray: a running Ray cluster, HOST:PORT (default: start a local one)."),
        click.option("--rollout", help="How one episode explores: react (default, one pass), tot (Tree of Thoughts BFS), mcts (LATS tree search with reflections) or multi-turn (retry on feedback)."),
        click.option("--tot-breadth", type=int, help="--rollout tot: next steps sampled per kept path (default 5)."),
        click.option("--tot-keep", type=int, help="--rollout tot: best paths kept per depth (default 2)."),
        click.option("--tot-depth", type=int, help="--rollout tot/mcts: depth limit in steps (default: the agent's step budget)."),
        click.option("--value-samples", type=int, help="--rollout tot/mcts: LLM value judgements per node (default 3)."),
        click.option("--mcts-iterations", type=int, help="--rollout mcts: iterations (default 30 HotpotQA, 8 programming, 10 otherwise)."),
        click.option("--mcts-children", type=int, help="--rollout mcts: children sampled per expansion (default 5)."),
        click.option("--mcts-exploration", type=float, help="--rollout mcts: UCT exploration constant (default 1.0)."),
        click.option("--search-temperature", type=float, help="--rollout tot/mcts: sampling temperature of searched steps (default 1.0)."),
        click.option("--search-judge", type=click.Choice(["reward", "value"]), default=None, help="--rollout tot/mcts: what judges a terminal node inside the search: reward (default, the environment's) or value (the model's own evaluation); the returned path is judged by the benchmark."),
        click.option("--search-reflections", type=int, help="--rollout mcts: self-reflections one episode writes, one per distinct failed answer, all shown in its later prompts (default 3, as LATS)."),
        click.option("--search-reflect-on", type=click.Choice(["ended", "every_failure"]), default=None, help="--rollout mcts: which failed nodes get a self-reflection: ended (default: a failed path's end, as LATS's HotpotQA search) or every_failure (also every program failing its own tests, as LATS's programming search)."),
        click.option("--max-calls-per-episode", type=int, help="Model calls one episode may make, actor and value calls together (default unlimited)."),
        click.option("--max-tokens-per-episode", type=int, help="Prompt + completion tokens one episode may spend (default unlimited); a call that could pass it is not made."),
        click.option("--max-turns", type=int, help="--rollout multi-turn: answers per episode; a wrong one gets feedback and another try (default 5)."),
        click.option("--turn-discount", type=float, help="--rollout multi-turn: a right answer on turn t earns reward * d**(t-1), 0 < d <= 1 (default 0.9)."),
        click.option("--run-dir", help="Run directory (default runs/<benchmark>-<agent>-<strategy>-<time>)."),
        shared_option("--store", "Where the run lives: a directory of runs (default runs/), sqlite:///PATH.db, postgresql://USER@HOST/DB or mongodb://HOST/DB; prints `run id: ID` (docs/stores.md)."),
        click.option("--memory-size", type=MEMORY_SIZE, help="Reflections shown to the actor: the most recent N (default 3), or all."),
        click.option("--preset", type=click.Choice(["paper"]), default=None, help="paper: every setting the reference code (noahshinn/reflexion) fixes for this benchmark, where no flag or YAML key sets it (docs/strategies.md); reports list each departure from it."),
        click.option("--truncate-attempts", type=int, help="HotpotQA: cut the previous attempt and the Reflector's input to this many tokens by replacing their largest observations (reference: 1600; default: no cut)."),
        click.option("--reflector-memory", type=int, help="Earlier reflections of the task the Reflector sees, as 'Plans from past attempts' (default 0; ALFWorld reference: 3)."),
        click.option("--reflection-prompt", type=click.Choice(["lesson", "plan"]), default=None, help="lesson (default): a paragraph after 'Reflection:'; plan: a new plan, the prompt ending 'New plan:' (ALFWorld's reference)."),
        click.option("--reflection-max-tokens", type=int, help="Completion tokens of one reflection (default 200); a model trained with [rl] reflection_max_tokens = N is measured with N."),
        click.option("--alfworld-demos", type=int, help="ALFWorld: demonstrations of the task's type in the prompt, 1 (default) or 2 (the reference)."),
        click.option("--alfworld-loop", type=click.Choice(["cycle", "repeat"]), default=None, help="ALFWorld: cycle (default) ends an episode when one move or a pair of moves comes 3 times in a row; repeat, when an action repeats the one before it (the reference)."),
        click.option("--short-reply-retries", type=int, help="ALFWorld: ask again, each time 0.2 warmer, after a reply under 5 characters, up to N times; then an empty reply (default 0; reference 5)."),
        click.option("--max-steps", type=int, help="Step budget per episode (default: the agent's)."),
        click.option("--max-tokens", type=int, help="Completion tokens per model call (default 256)."),
        click.option("--max-prompt-tokens", type=int, help="ReAct: end an episode (end_reason prompt_budget) once its prompt passes this many tokens, estimated at 4 characters a token (default 3896, the paper's)."),
        click.option("--temperature", type=float, help="Sampling temperature (default 0, greedy)."),
        click.option("--first-trial-temperature", type=float, help="The actor's temperature in trial 1 only (default: --temperature); 0 with --temperature > 0: greedy first attempts, shared by every strategy, and sampled retries (a paired comparison)."),
        click.option("--seed", type=int, help="Run seed; every sampled call gets its own seed derived from it and the call's place (task, trial, role, step)."),
        click.option("--deterministic/--no-deterministic", default=None, help="Local engine: decode one sequence at a time without the prefix cache, so greedy text does not depend on batching (slower; docs/search.md)."),
        click.option("--num-internal-tests", type=int, help="Programming: unit tests the agent is asked to write, once per task (default 4)."),
        click.option("--internal-tests-kept", type=int, help="Programming: how many of the tests written are kept, picked at random (default all; the paper's reflexion.py keeps 1)."),
        click.option("--evaluator", type=click.Choice(["internal", "hidden"]), default=None, help="Programming: what ends a task's trial loop. internal (default): the program's own tests; the hidden tests judge the program it stopped with, once (pass@1, as the paper). hidden: the hidden tests judge every trial (an oracle's pass@N)."),
        click.option("--timeout-s", type=float, help="Programming: seconds per sandboxed execution."),
        click.option("--alfworld-data", help="ALFWorld: an unpacked alfworld_data/ folder (default: the copy shipped with reinagent; or $ALFWORLD_DATA)."),
        click.option("--allow-weak-sandbox", is_flag=True, default=None, help="Programming: run even without bubblewrap (the uid/rlimits fallback lets generated code reach the network and host files)."),
        click.option("--constrained/--no-constrained", default=None, help="Hold the actor's output to the agent's action grammar (HotpotQA react/cot, ALFWorld react, the coder; default: on for the local engine, off otherwise)."),
        click.option("--precision", type=click.Choice(["fast", "exact"]), default=None, help="Local engine: fast (the GGUF's quantised weights as written, default; a checkpoint of the embedded model written once as an F16 GGUF) or exact (an f32 OpenVINO IR exported once with optimum-intel, the `exact` extra: the same greedy text as transformers)."),
        click.option("--local-engine", type=click.Choice(["openvino", "llamacpp", "auto"]), default=None, help="What decodes a local model: openvino (OpenVINO GenAI, default), llamacpp (llama.cpp's server as a child on loopback, the `llamacpp` extra: the GGUF read as written; no --constrained, --precision exact or --deterministic), or auto (the one measured faster on this CPU for this model, once, cached; spec.json records the choice; docs/models.md)."),
        click.option("--cache/--no-cache", default=None, help="Response cache (default on)."),
        shared_option("--cache-scope", "run (default): a run is answered only from its own earlier calls (resume); shared: from any run's identical calls, sampled ones included (cheaper; tokens and cost then show what this run did not pay)."),
        shared_option("--cache-dir", "Where the response cache lives (default: $REINAGENT_CACHE_DIR/responses or ~/.cache/reinagent/responses)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@cli.command()
@run_options
@shared_option("--quiet")
def run(config_file, quiet, **flags) -> None:
    """Start a new run."""
    from reinagent.config import build_config
    from reinagent.runner import start_run

    config = build_config(config_file, check_rollout=True, **flags)
    if quiet:
        quiet_libraries()
    try:
        ref = start_run(config, progress=not quiet)
    except RunInterrupted as err:  # here, before click prints its blank line for KeyboardInterrupt
        _interrupted(err)
    from reinagent.stores import is_directory

    if ref.store is None or is_directory(ref.store):
        _finish(ref.run_dir)
    else:
        _finish_in_store(config.store, ref.run_id)


@cli.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--retry-errors", is_flag=True, help="Redo (task, trial)s that ended in an error, and the later trials of their tasks.")
@shared_option("--num-trials", "Extend the run to this many trials (not fewer than it has).")
@click.option("--from-trial", type=int, help="Redo everything from this trial on.")
@shared_option("--base-url", "Continue against this OpenAI-compatible server (e.g. one restarted on a new port).")
@shared_option("--model", "Continue with this actor model string (recorded in spec.json's history).")
@shared_option("--reflector-model", "Continue with this reflector model.")
@shared_option("--max-concurrency", "Episodes in flight at once from now on.")
@shared_option("--max-model-concurrency", "Requests in flight to one model at once from now on.")
@shared_option("--api-key-env", "Environment variable holding the --base-url server's key.")
@shared_option("--env-url", "Continue against this environment server (`reinagent serve-env`).")
@shared_option("--schedule", "Trial schedule from now on (same records either way).")
@shared_option("--executor", "Where episodes run from now on.")
@shared_option("--ray-address", "--executor ray: the Ray cluster to continue on, HOST:PORT.")
@shared_option("--cache-dir", "The response cache to continue with (a recorded one is used only when you sealed it).")
@shared_option("--cache-scope", "The cache scope to continue with (a recorded `shared` is used only when you sealed it).")
@shared_option("--store", "The store holding the run (a directory of runs, sqlite:///..., postgresql://..., mongodb://...); RUN_DIR is then the run id.")
@shared_option("--quiet")
@click.option("--benchmark", "--agent", "--strategy", "--split", "--evaluator", "fixed", hidden=True, multiple=True,
              help="Refused: these define the experiment (start a new run).")
def resume(run_dir, retry_errors, num_trials, from_trial, store, quiet, fixed, **overrides) -> None:
    """Continue a run exactly where it stopped; --base-url, --model, ... move it (each change is
    kept in spec.json's history); benchmark, agent, strategy and split cannot change."""
    from reinagent.runner import resume_experiment

    if fixed:
        raise ReinagentError(
            "resume cannot change --benchmark, --agent, --strategy, --split or --evaluator: they define what "
            "the run measures (a resumed run keeps its own); start a new run with `reinagent run` instead")
    if num_trials is not None and num_trials <= 0:
        raise ReinagentError(f"--num-trials must be a positive whole number, got {num_trials}")
    if from_trial is not None and from_trial <= 0:
        raise ReinagentError(f"--from-trial must be a positive whole number, got {from_trial}")
    if quiet:
        quiet_libraries()
    try:
        done = resume_experiment(run_dir, retry_errors=retry_errors, num_trials=num_trials,
                                 from_trial=from_trial, progress=not quiet, overrides=overrides, store=store)
    except RunInterrupted as err:
        _interrupted(err)
    from reinagent.stores import is_directory

    if store is None or is_directory(store):
        _finish(done)
    else:
        _finish_in_store(store, run_dir)


@cli.command()
@click.argument("source", type=click.Path(file_okay=False))
@click.option("--strategy", required=True, help="The branch's strategy: none, last_attempt, reflexion or last_attempt_and_reflexion.")
@click.option("--run-dir", required=True, help="The branch's run directory (new).")
@shared_option("--num-trials", "Trials per task of the branch (default: the source's; at least 2).")
@shared_option("--base-url", "The branch's OpenAI-compatible server (default: the source's, when you sealed it).")
@shared_option("--api-key-env", "Environment variable holding the --base-url server's key.")
@shared_option("--env-url", "The branch's environment server (`reinagent serve-env`).")
@shared_option("--cache-dir", "The branch's response cache (default: the source's, when you sealed it).")
@shared_option("--cache-scope", "The branch's cache scope (default: the source's, when you sealed it).")
@shared_option("--quiet")
def branch(source, strategy, run_dir, num_trials, quiet, **endpoints) -> None:
    """Start a new run that shares SOURCE's first trial (the same first attempts) under another
    strategy: an exactly paired comparison, one trial of model calls cheaper (docs/cli.md)."""
    from reinagent.branch import branch_run

    if num_trials is not None and num_trials <= 0:
        raise ReinagentError(f"--num-trials must be a positive whole number, got {num_trials}")
    if quiet:
        quiet_libraries()
    try:
        done = branch_run(source, run_dir, strategy=strategy, num_trials=num_trials, progress=not quiet,
                          endpoints=endpoints)
    except RunInterrupted as err:
        _interrupted(err)
    _finish(done)


def quiet_libraries() -> None:
    """--quiet: no progress bars or deprecation notes of the libraries a model loads with either
    (transformers' "Loading weights" bar, its FutureWarnings), only our own lines."""
    import warnings

    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # read when huggingface_hub is imported
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore", category=FutureWarning)
    if "transformers" in sys.modules:  # already imported: tell it directly
        sys.modules["transformers"].utils.logging.disable_progress_bar()


def _finish(run_dir) -> None:
    """The closing lines, and the exit code scripts read (reinagent/outcome.py; docs/cli.md "Exit
    codes"): 0 clean, 3 some (task, trial)s errored, 4 all of them errored."""
    from reinagent.outcome import Outcome
    from reinagent.runner import load_run

    outcome = Outcome.of(load_run(run_dir)[1])
    for line in outcome.lines(run_dir):
        click.echo(line, err=True)
    from reinagent.terminal import shell_word

    # The run directory was named when the run started (stderr); here its report files.
    try:
        from reinagent.report.files import write_report_files

        md, html = write_report_files(run_dir)
        click.echo(f"report:        {html}\n               {md}")
    except Exception as err:  # noqa: BLE001 - the run is recorded; a report that fails is not its failure
        click.echo(f"report files not written ({type(err).__name__}: {err}); try: reinagent report {shell_word(run_dir)}", err=True)
        click.echo(f"run directory: {run_dir}")
    if outcome.exit_code:
        sys.exit(outcome.exit_code)


def _finish_in_store(url: str, run_id: str) -> None:
    """_finish for a run in a database store: the same lines and exit code, with store commands."""
    from reinagent.outcome import Outcome
    from reinagent.redact import redact
    from reinagent.runner import load_run

    shown = redact(url)
    outcome = Outcome.of(load_run(run_id, store=url)[1])
    for line in outcome.lines(run_id)[:-1]:
        click.echo(line, err=True)
    if outcome.errors:
        click.echo(f"  redo them: reinagent resume --store {shown} {run_id} --retry-errors", err=True)
    click.echo(f"run id:        {run_id}")
    click.echo(f"store:         {shown}")
    click.echo(f"report:        reinagent report --store {shown} {run_id}")
    if outcome.exit_code:
        sys.exit(outcome.exit_code)


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort as err:  # click's wrapping of Ctrl-C (KeyboardInterrupt)
        _interrupted(err.__cause__ or err.__context__)
    except click.UsageError as err:  # one line, as every other bad input (click's own takes four)
        where = err.ctx.command_path if err.ctx is not None else "reinagent"
        click.echo(f"error: {err.format_message().rstrip('.')} (see `{where} --help`)", err=True)
        sys.exit(err.exit_code)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except ReinagentError as err:
        from reinagent.terminal import plain

        click.echo(f"error: {plain(str(err))}", err=True)  # it may quote a run's (untrusted) text
        sys.exit(2)
    except Exception as err:  # noqa: BLE001 - a bug: one line, the traceback only on request
        if os.environ.get("REINAGENT_DEBUG"):
            raise
        from reinagent.redact import redact

        click.echo(f"internal error: {redact(f'{type(err).__name__}: {err}')} "
                   "(set REINAGENT_DEBUG=1 for the traceback)", err=True)
        sys.exit(1)
    except KeyboardInterrupt as err:
        _interrupted(err)


def _interrupted(err: BaseException | None) -> None:
    """Ctrl-C: how many records the run saved and the exact command that continues it; then exit
    130 without the native libraries' shutdown chatter (OpenVINO's "leaked blocks" lines)."""
    import shlex

    if isinstance(err, RunInterrupted):
        from reinagent.redact import redact
        from reinagent.runner import load_run

        try:
            saved = f"{len(load_run(err.where, store=err.store)[1])} (task, trial) records are saved"
        except Exception:  # noqa: BLE001 - the run is on disk either way; say how to continue it
            saved = "every finished (task, trial) is saved"
        store = f"--store {shlex.quote(redact(err.store))} " if err.store else ""
        click.echo(f"interrupted: {saved} in {err.where}; continue with: reinagent resume {store}{shlex.quote(err.where)}",
                   err=True)
    else:
        click.echo("interrupted", err=True)
    _exit_quietly(130)


def _exit_quietly(code: int) -> None:
    """sys.exit(code) with stderr pointed at /dev/null for what the interpreter's shutdown runs
    (native destructors write straight to file descriptor 2)."""
    sys.stdout.flush()
    sys.stderr.flush()
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    sys.exit(code)


if __name__ == "__main__":
    main()
