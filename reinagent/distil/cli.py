"""`reinagent distil export | train | loop`: trajectories -> dataset -> weights -> evaluation.

Heavy imports (datasets, torch, transformers, trl, peft) happen inside the commands, so
`reinagent distil --help` stays instant and works without the `distil` extra.
"""

from __future__ import annotations

import os

import click


@click.group()
def distil() -> None:
    """Distil successful trajectories into a model's weights (needs the `distil` extra)."""
    # datasets' per-map progress bars drown the command's own summary lines.
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


def export_options(fn):
    options = [
        click.option("--drop-reflections/--keep-reflections", default=True, show_default=True,
                     help="Drop the memory block (reflections, previous attempt) from prompts, so the model learns to succeed without the hint."),
        click.option("--first-success-only/--all-successes", default=True, show_default=True,
                     help="Keep only each task's first success (runs in the order given, then by trial), or every success."),
        click.option("--no-few-shot", is_flag=True, help="Remove the agent's few-shot examples from prompts (shorter sequences)."),
        click.option("--dedupe/--no-dedupe", default=True, show_default=True, help="Drop examples whose messages are identical."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def train_options(fn):
    options = [
        click.option("--base-model", default="local", show_default=True,
                     help="Model to fine-tune: local (embedded SmolLM2-135M-Instruct), local:PATH, or a HF model directory."),
        click.option("--epochs", type=click.FloatRange(min=0, min_open=True), default=3.0, show_default=True, help="Passes over the data."),
        click.option("--max-steps", type=click.IntRange(min=1), help="Optimizer steps (overrides --epochs)."),
        click.option("--learning-rate", type=click.FloatRange(min=0, min_open=True), help="Peak learning rate (default 2e-5, or 2e-4 with --lora)."),
        click.option("--max-length", type=click.IntRange(min=16), default=4096, show_default=True, help="Longest example in tokens; longer ones are dropped (or truncated) and counted."),
        click.option("--truncate-long", is_flag=True, help="Truncate examples longer than --max-length instead of dropping them."),
        click.option("--batch-size", type=click.IntRange(min=1), help="Examples per device step (default 1 on CPU, 8 on a GPU)."),
        click.option("--grad-accum", type=click.IntRange(min=1), default=1, show_default=True, help="Gradient accumulation steps."),
        click.option("--lora", is_flag=True, help="Train LoRA adapters (peft) and merge them into the saved model."),
        click.option("--lora-r", type=click.IntRange(min=1), default=16, show_default=True, help="LoRA rank."),
        click.option("--seed", type=int, default=0, show_default=True, help="Training seed."),
        click.option("--threads", type=click.IntRange(min=1), help="CPU training: torch threads (default all cores; 1 is faster when the cores are busy)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _export_opts(drop_reflections, first_success_only, no_few_shot, dedupe):
    from reinagent.distil.export import ExportOptions

    return ExportOptions(drop_reflections=drop_reflections, first_success_only=first_success_only,
                         few_shot=not no_few_shot, dedupe=dedupe)


def _train_opts(base_model, epochs, max_steps, learning_rate, max_length, truncate_long, batch_size, grad_accum, lora, lora_r, seed, threads, overwrite=False):
    from reinagent.distil.train import TrainOptions

    return TrainOptions(base_model=base_model, epochs=epochs, max_steps=max_steps, learning_rate=learning_rate,
                        max_length=max_length, truncate_long=truncate_long, batch_size=batch_size, grad_accum=grad_accum,
                        lora=lora, lora_r=lora_r, lora_alpha=2 * lora_r, seed=seed, cpu_threads=threads,
                        overwrite=overwrite)


@distil.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(file_okay=False), help="DATA_DIR to write.")
@export_options
@click.option("--overwrite", is_flag=True, help="Replace a non-empty DATA_DIR.")
def export(run_dirs, output, drop_reflections, first_success_only, no_few_shot, dedupe, overwrite) -> None:
    """Successful trajectories of RUN_DIRS -> a chat dataset in DATA_DIR (datasets + JSONL).

    A folder holding runs (e.g. runs/) stands for every run in it."""
    from reinagent.distil.export import collect, write

    options = _export_opts(drop_reflections, first_success_only, no_few_shot, dedupe)
    examples, stats = collect(run_dirs, options)
    out = write(examples, stats, options, output, overwrite=overwrite)
    skipped = ", ".join(f"{n} {why}" for why, n in stats.skipped.items()) or "none"
    click.echo(f"exported {stats.exported} examples from {stats.successes} successes in {len(stats.runs)} run(s) "
               f"({stats.records} records); later successes dropped {stats.later_successes}, duplicates {stats.duplicates}, "
               f"memory removed from {stats.memory_removed}, skipped: {skipped}")
    click.echo(f"dataset: {out}")


@distil.command(name="train")
@click.argument("data_dir", type=click.Path(exists=True))
@click.option("--output", "-o", required=True, type=click.Path(file_okay=False), help="MODEL_DIR to write (loads as --model local:MODEL_DIR).")
@train_options
@click.option("--overwrite", is_flag=True, help="Replace a non-empty MODEL_DIR.")
def train_cmd(data_dir, output, overwrite, **flags) -> None:
    """Fine-tune a model on DATA_DIR (TRL SFT, loss on assistant turns only)."""
    from reinagent.distil.train import train

    result = train(data_dir, output, _train_opts(**flags, overwrite=overwrite))
    length = result.length
    click.echo(f"trained {result.steps} steps on {length['kept']}/{length['examples']} examples "
               f"({length['too_long']} longer than --max-length, {length['action']}ped); "
               f"loss {result.losses[0]:.3f} -> {result.losses[-1]:.3f}; "
               f"{result.tokens_per_s:.0f} tokens/s on {result.device}")
    click.echo(f"model: {result.output}  (use it with --model local:{result.output})")


@distil.command()
@click.option("--work-dir", required=True, type=click.Path(file_okay=False), help="Holds train-run/, data/, model/, eval-base/, eval-tuned/; rerun to resume.")
@click.option("--benchmark", default="hotpotqa", show_default=True)
@click.option("--agent", default="cot-context", show_default=True)
@click.option("--strategy", default="reflexion", show_default=True, help="Strategy of the Reflexion run on the training split.")
@click.option("--train-split", default="dev-first100", show_default=True)
@click.option("--eval-split", default="hard100", show_default=True)
@click.option("--num-trials", type=click.IntRange(min=1), default=3, show_default=True, help="Reflexion trials on the training split.")
@click.option("--train-envs", type=click.IntRange(min=1), help="Tasks of the training split (default all).")
@click.option("--eval-envs", type=click.IntRange(min=1), help="Tasks of the evaluation split (default all).")
@click.option("--eval-strategy", default="none", show_default=True, help="Strategy of the evaluation runs.")
@click.option("--eval-trials", type=click.IntRange(min=1), default=1, show_default=True, help="Trials of the evaluation runs.")
@click.option("--model", default="local", show_default=True, help="Actor of the Reflexion run; also the base model unless --base-model.")
@click.option("--reflector-model", help="Reflector of the Reflexion run (default: --model).")
@click.option("--max-tokens", type=click.IntRange(min=1), help="Completion tokens per model call.")
@click.option("--temperature", type=click.FloatRange(min=0), help="Sampling temperature of the Reflexion run (evaluations stay greedy).")
@export_options
@train_options
@click.option("--retrain", is_flag=True, help="Train again even if MODEL_DIR is complete.")
def loop(**flags) -> None:
    """Reflexion on a training split -> export the successes -> train -> evaluate base and tuned
    models on a held-out split, and print both success rates side by side."""
    from reinagent.distil.loop import LoopOptions, run_loop

    export_keys = ("drop_reflections", "first_success_only", "no_few_shot", "dedupe")
    train_keys = ("base_model", "epochs", "max_steps", "learning_rate", "max_length", "truncate_long", "batch_size", "grad_accum", "lora", "lora_r", "seed", "threads")
    export = _export_opts(*(flags.pop(k) for k in export_keys))
    train_flags = {k: flags.pop(k) for k in train_keys}
    if train_flags["base_model"] == "local" and flags["model"].startswith("local:"):
        train_flags["base_model"] = flags["model"]  # the actor is what gets distilled, unless told otherwise
    result = run_loop(LoopOptions(**flags, export=export, train=_train_opts(**train_flags, overwrite=True)))
    click.echo(result.table())
    click.echo(f"summary: {result.summary_path}")
    if result.notes:
        click.echo("\n".join(f"note: {n}" for n in result.notes))
