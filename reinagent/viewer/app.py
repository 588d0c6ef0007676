"""The viewer's web application: pages rendered from Jinja2 templates, plus JSON endpoints that
the pages poll for live progress. Read-only: it never writes into a run directory.

    /                               runs under the folder, with live progress of running ones
    /runs/{run}                     one run: trials, usage, errors, tasks with their questions
    /runs/{run}/tasks/{n}           task n (1-based): question, steps, reflections, memory
    /compare?run=A&run=B            runs side by side: comparison table, curves, task matrix
    /api/runs, /api/runs/{run}, /api/runs/{run}/tasks/{n}   the same data as JSON
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from jinja2 import ChoiceLoader, Environment, FileSystemLoader, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.exceptions import HTTPException as StarletteHTTPException

from reinagent.browse.listing import RunCache, RunInfo, discover, list_runs, outside, run_info
from reinagent.browse.show import task_rows, verdict
from reinagent.errors import RunDirError
from reinagent.report.html import clip, shown_text, table_html, tree_number, tree_stylesheet, wbr
from reinagent.report.tree import drawn_tree, tree_depth
from reinagent.report.tables import (
    comparison_table, concurrency_line, duration, error_table, trial_table, usage_table,
)
from reinagent.report.trajectory import evaluation_note, gold_of, outcome, task_prompt, task_question
from reinagent.terminal import plain_data

HERE = Path(__file__).resolve().parent
MAX_COMPARED = 50  # runs on one comparison page or plot: its curves are unreadable well before this


def create_app(root: str | Path, *, token: str | None = None, allow_hosts: tuple[str, ...] = ()) -> FastAPI:
    from reinagent.service.guard import Guard, GuardSettings

    root = Path(root)
    cache = RunCache()
    # the report's templates too: a task page draws search trees with the HTML report's macro
    loader = ChoiceLoader([FileSystemLoader(HERE / "templates"), PackageLoader("reinagent.report", "templates")])
    # finalize: every shown value without escape sequences or bidi overrides, as in report.html
    env = Environment(loader=loader, autoescape=select_autoescape(["html", "j2"]), finalize=shown_text)
    # breakable: run ids and model paths may wrap after a slash (and nowhere else) in narrow columns
    env.filters.update(duration=duration, clip=clip, breakable=wbr, wbr=wbr, num=tree_number)
    templates = Jinja2Templates(env=env)
    app = FastAPI(title="reinagent viewer", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    # DNS rebinding: loopback Host names only unless a token guards the viewer (service/guard.py)
    app.add_middleware(Guard, settings=GuardSettings.of(token, allow_hosts, token_cookie="reinagent_view_token"))

    def run_dirs() -> dict[str, Path]:
        """The runs this viewer serves: those under `root` that stay under it (a link to a run
        elsewhere, or to a spec.json elsewhere, served files outside the folder; issue 54)."""
        found = [p for p in discover(root) if outside(p, root) is None]
        return {(p.relative_to(root).as_posix() if p != root else p.name): p for p in found}

    def info(run_id: str) -> RunInfo:
        path = run_dirs().get(run_id)
        if path is None:
            raise HTTPException(404, f"no run {run_id!r} under {root}")
        try:
            return run_info(path, root, cache)
        except RunDirError as err:
            raise HTTPException(409, str(err)) from None

    def page(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return templates.TemplateResponse(request, name, {"root": str(root), **context}, status_code=status_code)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        if request.url.path.startswith("/api/"):
            return JSONResponse(plain_data({"detail": exc.detail}), status_code=exc.status_code)
        return page(request, "error.html", status_code=exc.status_code, status=exc.status_code,
                    detail=exc.detail, title=str(exc.status_code))

    # The JSON endpoints too send run text `plain` (the pages insert it as text, where a bidi
    # override still reorders what a reader sees)
    @app.get("/api/runs")
    def api_runs() -> dict[str, Any]:
        infos, problems = list_runs(root, cache, contained=True)
        return plain_data({"root": str(root), "runs": [i.to_json() for i in infos], "problems": problems})

    @app.get("/api/runs/{run_id:path}/tasks/{number}")
    def api_task(run_id: str, number: int) -> dict[str, Any]:
        run_ = info(run_id)
        task_id = _task_id(cache.load(run_.run_dir), number)
        records = cache.load(run_.run_dir).records_of(task_id)
        return plain_data({"run_id": run_id, "number": number, "task_id": task_id,
                           "question": task_question(records[0] if records else None),
                           "records": [r.model_dump(mode="json") for r in records]})

    @app.get("/api/runs/{run_id:path}")
    def api_run(run_id: str) -> dict[str, Any]:
        run_ = info(run_id)
        tasks = [asdict(row) for row in task_rows(cache.load(run_.run_dir))]
        return plain_data({**run_.to_json(), "summary": run_.summary, "tasks": tasks})

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request):
        infos, problems = list_runs(root, cache, contained=True)
        return page(request, "runs.html", runs=infos, problems=problems, title="runs")

    @app.get("/runs/{run_id:path}/tasks/{number}", response_class=HTMLResponse)
    def task_page(request: Request, run_id: str, number: int):
        run_ = info(run_id)
        loaded = cache.load(run_.run_dir)
        task_id = _task_id(loaded, number)
        records = loaded.records_of(task_id)
        first = records[0] if records else None
        trials = [_trial_view(r) for r in records]
        return page(request, "task.html", run=run_, number=number, task_id=task_id,
                    num_tasks=len(loaded.spec.task_ids), verdict=verdict(records, loaded.evaluator), trials=trials,
                    question=task_question(first, limit=10_000), prompt=clip(task_prompt(first)) if first else "",
                    gold=gold_of(first) if first else None,
                    memory=[(r.trial, r.reflection) for r in records if r.reflection],
                    tree_css=Markup(tree_stylesheet()) if any(t["tree"] for t in trials) else "",
                    title=f"task {number}")

    @app.get("/runs/{run_id:path}", response_class=HTMLResponse)
    def run_page(request: Request, run_id: str):
        run_ = info(run_id)
        s = run_.summary
        errors = error_table(s)
        return page(request, "run.html", run=run_, s=s, tasks=task_rows(cache.load(run_.run_dir)),
                    trials_table=table_html(trial_table(s), "trials"),
                    usage_table=table_html(usage_table(s), "usage"), timing=concurrency_line(s),
                    errors_table=table_html(errors, "errors") if errors[1] else "", title=run_id)

    def compared(run: list[str]) -> list[str]:
        """The runs a comparison names, each once: a name repeated 6,000 times cost 40 s of CPU
        per plot (issue 45); more than MAX_COMPARED runs is a 400, not minutes of work."""
        run = list(dict.fromkeys(run))
        if len(run) > MAX_COMPARED:
            raise HTTPException(400, f"{len(run)} runs named; compare at most {MAX_COMPARED} at once")
        return run

    @app.get("/compare", response_class=HTMLResponse)
    def compare(request: Request, run: list[str] = Query(default=[])):
        run = compared(run)
        if len(run) < 2:
            raise HTTPException(400, "pick two or more runs to compare (tick them in the list)")
        infos = [info(r) for r in run]
        summaries = [i.summary for i in infos]
        return page(request, "compare.html", runs=infos, table=table_html(comparison_table(summaries), "comparison"),
                    matrix=_task_matrix(infos, cache), query=urlencode([("run", r) for r in run]), title="comparison")  # a name may hold + & # %

    @app.get("/compare/plot.png")
    def compare_plot(run: list[str] = Query(default=[])) -> Response:
        from reinagent.report.plots import figure_png, learning_curve_figure

        summaries = [info(r).summary for r in compared(run)]
        if not summaries:
            raise HTTPException(400, "no runs given")
        return Response(figure_png(learning_curve_figure(summaries), dpi=90), media_type="image/png",
                        headers={"Cache-Control": "no-store"})

    return app


def _task_id(loaded, number: int) -> str:
    task_ids = list(loaded.spec.task_ids)
    if not 1 <= number <= len(task_ids):
        raise HTTPException(404, f"task number {number} is out of range; this run has tasks 1 to {len(task_ids)}")
    return task_ids[number - 1]


def _trial_view(rec) -> dict[str, Any]:
    """What the task page shows of one trial; the template stays free of record logic."""
    kind = "err" if rec.error else ("ok" if rec.success else "bad")
    steps = [{"output": clip(s.output) if s.thought is None and s.action is None else None,
              "thought": s.thought, "action": s.action, "valid": s.valid_action,
              "observation": clip(s.observation) if s.observation is not None else None}
             for s in rec.trajectory.steps]
    one_line = rec.answer is not None and "\n" not in rec.answer.strip()
    return {"trial": rec.trial, "kind": kind, "outcome": outcome(rec), "memory": rec.memory, "steps": steps,
            "answer": rec.answer if one_line else None, "error": rec.error, "evaluation": evaluation_note(rec),
            "reflection": rec.reflection, "wall_s": rec.wall_s, "calls": len(rec.calls),
            "rollout": rec.trajectory.rollout, "tree": drawn_tree(rec.trajectory) if rec.trajectory.tree else None,
            "tree_size": len(rec.trajectory.tree), "tree_depth": tree_depth(rec.trajectory),
            "messages": [(m.role, clip(m.content)) for m in rec.trajectory.messages]}


def _task_matrix(infos: list[RunInfo], cache: RunCache) -> list[dict[str, Any]]:
    """One row per task (in the first run's order, then any others): its question and, per run,
    the trial that solved it, so "which tasks did reflection rescue?" is answered at a glance."""
    loaded = [cache.load(i.run_dir) for i in infos]
    order: list[str] = []
    for run in loaded:
        order += [t for t in run.spec.task_ids if t not in set(order)]
    rows = []
    for task_id in order:
        cells, question = [], ""
        for info_, run in zip(infos, loaded):
            if task_id not in run.spec.task_ids:
                cells.append({"text": "", "kind": "none", "href": None})
                continue
            records = run.records_of(task_id)
            question = question or task_question(records[0] if records else None)
            solved = run.solved_at(task_id)
            text = f"trial {solved}" if solved else ("-" if not records else f"no ({len(records)})")
            kind = "ok" if solved else ("none" if not records else "bad")
            number = list(run.spec.task_ids).index(task_id) + 1
            cells.append({"text": text, "kind": kind, "href": f"/runs/{quote(info_.run_id)}/tasks/{number}"})
        rows.append({"task_id": task_id, "question": question, "cells": cells})
    return rows
