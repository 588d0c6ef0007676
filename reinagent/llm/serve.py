"""The verb `serve-model`: a local model as an OpenAI-compatible endpoint on loopback, served by
llama.cpp's server (reinagent.llm.llamacpp), until Ctrl-C."""

from __future__ import annotations

import sys

import click


@click.command(name="serve-model")
@click.argument("model")
@click.option("--port", type=int, default=8080, show_default=True, help="Port on 127.0.0.1; 0 picks a free one.")
@click.option("--parallel", type=int, default=4, show_default=True,
              help="Requests decoded together (llama.cpp's slots; the context is shared among them).")
@click.option("--threads", type=int, help="CPU threads (default: llama.cpp's choice, the physical cores).")
@click.option("--ctx-size", type=int, help="Context tokens in all (default: the model's own).")
@click.option("--sha256", help="For a GGUF path: refuse it unless its sha256 is this.")
def serve_model(model, port, parallel, threads, ctx_size, sha256) -> None:
    """Serve a local model (qwen2.5-coder-1.5b, qwen2.5-coder-0.5b, local, or a GGUF path) as an
    OpenAI-compatible endpoint on loopback with llama.cpp, until Ctrl-C."""
    from reinagent.llm.llamacpp import LlamaServer, ServerDied, resolve

    served = resolve(model, sha256)
    server = LlamaServer(served, port=port, parallel=parallel, threads=threads, ctx_size=ctx_size)
    click.echo(f"loading {served.path} ({served.checked}) into llama.cpp ...", err=True)
    try:
        server.start()
        click.echo(f"serving {served.name} on {server.base_url} ({parallel} parallel); Ctrl-C stops it")
        click.echo(f"  reinagent run --model openai/{served.name} --base-url {server.base_url} ...")
        sys.stdout.flush()
        server.proc.wait()
        raise ServerDied(server.death("while serving"))
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
    finally:
        server.stop()
