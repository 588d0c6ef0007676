"""The verbs `serve-env` and `check-env` (imported only when used: they pull in starlette/uvicorn)."""

from __future__ import annotations

import sys

import click


@click.command(name="serve-env")
@click.option("--benchmark", required=True,
              help="Benchmark whose environments to serve (see `reinagent list`), or package.module:Class.")
@click.option("--split", help="Task split to serve (default: the benchmark's).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind; not loopback needs --token.")
@click.option("--port", type=int, default=8000, show_default=True, help="Port; 0 picks a free one.")
@click.option("--max-sessions", type=int, default=64, show_default=True,
              help="Open sessions at most; more get 503 (a finished id-less session is reclaimed first).")
@click.option("--idle-timeout-s", type=float, default=600.0, show_default=True,
              help="Close a session unused for this long.")
@click.option("--token", help="Bearer token every request must carry (default: $REINAGENT_ENV_TOKEN).")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Accept requests with this Host name too (default: loopback names only, or any with a token).")
@click.option("--max-timeout-s", type=float, default=60.0, show_default=True,
              help="The most a session may set as timeout_s; more gets 422.")
@click.option("--protocol", type=click.Choice(["reinagent", "agentgym"]), default="reinagent", show_default=True,
              help="reinagent (docs/env-protocol.md) or agentgym (AgentGym's clients: /create -> int id, data_idx).")
def serve_env(benchmark, split, host, port, max_sessions, idle_timeout_s, token, allow_hosts, max_timeout_s,
              protocol) -> None:
    """Serve a benchmark's environments over HTTP (protocol: docs/env-protocol.md)."""
    from reinagent.service.server import serve

    sys.exit(serve(benchmark, split=split, host=host, port=port, max_sessions=max_sessions,
                   idle_timeout_s=idle_timeout_s, token=token, allow_hosts=tuple(allow_hosts),
                   max_timeout_s=max_timeout_s, protocol=protocol))


@click.command(name="check-env")
@click.argument("url")
@click.option("--token", help="Bearer token of the server (default: $REINAGENT_ENV_TOKEN).")
@click.option("--action", default="look", show_default=True, help="Action sent in the step checks.")
def check_env(url, token, action) -> None:
    """Check that the server at URL speaks the environment protocol; exit 1 on any violation."""
    from reinagent.service.check import run_checks

    sys.exit(run_checks(url, token=token, action=action))
