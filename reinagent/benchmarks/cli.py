"""`reinagent list`: benchmarks (agents, splits), strategies and model backends."""

from __future__ import annotations

import importlib

import click


@click.command(name="list")
def list_() -> None:
    """Benchmarks (agents, splits), strategies and model backends."""
    from reinagent.benchmarks import REGISTRY
    from reinagent.llm import BACKENDS, packaged
    from reinagent.strategy import ReflexionStrategy

    click.echo("benchmarks (agents):")
    # columns as wide as their longest entry (a fixed 10 pushed `arithmetic20 cot` out of line)
    width = max(len(name) for name in REGISTRY)
    agents_width = max(len(", ".join(agents)) for _, _, agents, _ in REGISTRY.values())
    for name, (_, _, agents, about) in REGISTRY.items():
        click.echo(f"  {name:<{width}} {', '.join(agents):<{agents_width}}  {about}")
        click.echo(f"  {'':<{width}} splits: {_splits(name)}")
    click.echo("strategies:")
    for s in ReflexionStrategy:
        click.echo(f"  {s.value}")
    click.echo("model backends:")
    for name, about in BACKENDS.items():
        click.echo(f"  {name:<18} {about}")
    click.echo("packaged models (--model / --reflector-model; real instruct models, offline):")
    for model, about in packaged.describe():
        click.echo(f"  {model:<26} {about}")


def _splits(benchmark: str) -> str:
    """The benchmark's splits, default first; read from its class (a light import: the heavy
    dependencies of a benchmark load when it is made, not when its module is imported)."""
    from reinagent.benchmarks import REGISTRY

    module, cls, _, _ = REGISTRY[benchmark]
    try:
        bench = getattr(importlib.import_module(module), cls)
    except ImportError as err:
        return f"(unavailable: {err})"
    rest = [s for s in bench.splits if s != bench.default_split]
    return ", ".join([f"{bench.default_split} (default)", *rest])
