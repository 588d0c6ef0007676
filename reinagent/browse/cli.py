"""The browsing verbs: `reinagent runs`, `reinagent show` and `reinagent view`.

Importing this module stays cheap (`reinagent --help` lists these verbs): the web stack is
imported only when `view` runs.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import click

from reinagent.errors import ReinagentError

DEFAULT_DIR = "runs"
VIEW_TOKEN_ENV = "REINAGENT_VIEW_TOKEN"


def _no_runs_hint(folder: str) -> str:
    return (f"no runs under {folder}; pass the folder that holds them, e.g. `reinagent runs hotpot_runs` "
            "(runs go to runs/ unless --run-dir says otherwise)")


@click.command()
@click.argument("folder", default=DEFAULT_DIR, type=click.Path(), metavar="[DIR]")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run, for scripts.")
def runs(folder: str, as_json: bool) -> None:
    """List the runs under DIR (default runs/) with their status: running, finished or incomplete."""
    from reinagent.browse.listing import list_runs, runs_table
    from reinagent.terminal import plain, plain_data

    infos, problems = list_runs(folder)
    for problem in problems:
        click.echo(f"skipped: {plain(problem)}", err=True)
    if as_json:  # JSON escapes ESC, but a script prints what it reads: no run text drives a terminal
        click.echo(json.dumps(plain_data([i.to_json() for i in infos]), indent=2))
        return
    click.echo(runs_table(infos) if infos else _no_runs_hint(folder))


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False), metavar="RUN")
@click.argument("task", required=False)
@click.option("--trial", type=int, help="Only this trial (default: every trial of the task).")
def show(run_dir: str, task: str | None, trial: int | None) -> None:
    """Print one task's question, trajectories and reflections. TASK is a task id, its number in the
    run, or a piece of its question; without TASK, list the run's tasks."""
    from reinagent.browse.show import render_task, render_task_list, resolve_task
    from reinagent.report.loading import load
    from reinagent.store import is_run_dir

    if not is_run_dir(Path(run_dir)):
        raise ReinagentError(f"{run_dir} is not a run directory (no spec.json); `reinagent runs DIR` lists runs")
    run = load(run_dir)[0]
    if task is None:
        click.echo(render_task_list(run))
        return
    click.echo(render_task(run, resolve_task(run, task), trial=trial, color=sys.stdout.isatty()), nl=False)


@click.command()
@click.argument("folder", default=DEFAULT_DIR, type=click.Path(), metavar="[DIR]")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="TCP port (0: any free one).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on; not loopback needs --token.")
@click.option("--token", help=f"Secret a browser must present (the printed URL carries it; default: ${VIEW_TOKEN_ENV}).")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Accept this Host name too (default: loopback names only, or any with a token).")
def view(folder: str, port: int, host: str, token: str | None, allow_hosts: tuple[str, ...]) -> None:
    """Serve a local web viewer of the runs under DIR: live progress, comparison, task drill-down."""
    import os

    from reinagent.browse.listing import discover

    token = token or os.environ.get(VIEW_TOKEN_ENV) or None
    discover(folder)  # a missing folder fails here, in one line, before the server starts
    try:
        import uvicorn

        from reinagent.service.connections import hardened_server
        from reinagent.service.guard import is_loopback
        from reinagent.viewer.app import create_app
    except ModuleNotFoundError as err:
        raise ReinagentError(f"the viewer needs {err.name}: pip install fastapi uvicorn jinja2") from None
    if not is_loopback(host) and not token:
        raise ReinagentError(f"viewing on {host} (not loopback) needs a token: --token T or ${VIEW_TOKEN_ENV}")
    sock = _listen(host, port)
    url_host = f"[{host}]" if ":" in host else host
    query = f"?token={token}" if token else ""
    click.echo(f"viewer: http://{url_host}:{sock.getsockname()[1]}/{query}  (runs under {folder}; Ctrl-C stops it)")
    sys.stdout.flush()
    config = uvicorn.Config(create_app(folder, token=token, allow_hosts=allow_hosts), log_level="warning")
    hardened_server(config).run(sockets=[sock])  # slowloris: header timeout, connection cap, bounded log


def _listen(host: str, port: int) -> socket.socket:
    """Bind here rather than in uvicorn, so a busy port is one clear line and --port 0 works."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise ReinagentError(f"cannot listen on {host}:{port}: {err.strerror or err}; choose another --port or --host") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock
