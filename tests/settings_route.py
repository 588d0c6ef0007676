"""The route a run's settings take from `runner.run_experiment` to the first episode, read from
the running code (issue 46): which modules hold them, in order, and how often the route goes back
up a layer. `python tests/settings_route.py` prints it; tests/test_architecture.py bounds it.

The route is where the settings are being handled, over time: a call that is handed the run's
config, its plan, the experiment or one of the parts' settings records (any argument but `self`),
or one of their words (the very string object read from them: a model, a URL, a name; alone or in
a tuple), enters the
callee's module; its return goes back to the caller's. A coroutine's suspension is a
pause, not a move. A property read (`exp.config`) is not a hand-over, nor is making one of the
records; neither is counted.
"""

from __future__ import annotations

import dis
import sys
import tempfile
from pathlib import Path

_RETURN = dis.opmap["RETURN_VALUE"]


SETTINGS = ("reinagent.config:RunConfig", "reinagent.plan:Plan", "reinagent.plan:Experiment",
            "reinagent.settings:BenchmarkSettings", "reinagent.settings:AgentSettings",
            "reinagent.settings:RolloutSettings", "reinagent.rollouts.base:RolloutSettings",
            "reinagent.llm.stack:ModelSettings", "reinagent.preflight:PreflightSettings",
            "reinagent.executors:ExecutorSettings")


def settings_types() -> tuple[type, ...]:
    """The run's settings in each of their forms (those this version of the code has)."""
    import importlib

    found = []
    for where in SETTINGS:
        module, name = where.split(":")
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(dict.fromkeys(found))


def _module(frame) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if name == "reinagent" or name.startswith("reinagent.") else None


def _holds_settings(frame, kinds: tuple[type, ...], values: dict[int, str]) -> bool:
    """Whether the call is handed the settings, or one of their words (a model string, a URL, a
    benchmark's name: the very object read from them)."""
    code = frame.f_code
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    args = [frame.f_locals.get(n) for n in names if n not in ("self", "cls")]
    held = False
    for arg in args:
        if isinstance(arg, kinds):
            held = True
            for value in getattr(arg, "__dict__", {}).values():
                if isinstance(value, str) and len(value) > 1:
                    values[id(value)] = value  # kept alive here, so the id stays its own
    words = [w for a in args for w in (a if isinstance(a, (tuple, list)) else (a,)) if isinstance(w, str)]
    return held or any(values.get(id(w)) is w for w in words)


def trace(start, *, returns: bool = True) -> list[str]:
    """The modules the settings pass through while `start()` runs, up to the first episode.
    `returns` False: only the calls from one module into another, in order (the issue's reading:
    a return is not a move, and the next module handed the settings follows the one that held
    them last)."""
    kinds = settings_types()
    values: dict[int, str] = {}
    route: list[str] = []
    stack: list = []  # frames holding the settings, innermost last
    seen: dict[int, object] = {}
    done = []

    debug = bool(__import__("os").environ.get("ROUTE_DEBUG"))

    def visit(module: str, why: str = "") -> None:
        if not route or route[-1] != module:
            route.append(module)
            if debug:
                print(f"  -> {module} {why}", file=sys.stderr)

    def profile(frame, event, arg):
        if done or event not in ("call", "return"):
            return
        module = _module(frame)
        if module is None:
            return
        if event == "call":
            if module == "reinagent.episode" and frame.f_code.co_name == "run_episode":
                visit(module)
                done.append(True)
                return
            if frame in stack or not _holds_settings(frame, kinds, values):
                return
            if frame.f_code.co_name == "__init__" and isinstance(frame.f_locals.get("self"), kinds):
                return  # a settings record being made, not handed on
            resumed = id(frame) in seen  # a coroutine resumed: the same frame again
            seen[id(frame)] = frame  # kept alive, so its id stays its own
            # a call from outside the package (the event loop starting a coroutine) is the innermost
            # holder's; a module's call to itself is no move
            caller = _module(frame.f_back) or (_module(stack[-1]) if stack else None)
            stack.append(frame)
            if not resumed and (returns or caller != module):
                visit(module, frame.f_code.co_name)
        elif stack and stack[-1] is frame:
            stack.pop()
            final = frame.f_code.co_code[frame.f_lasti] == _RETURN if frame.f_lasti >= 0 else True
            if final and stack and returns:
                visit(_module(stack[-1]))

    sys.setprofile(profile)
    try:
        start()
    finally:
        sys.setprofile(None)
    return route


def layer_of(module: str, layers) -> int:
    if module.rpartition(".")[2] == "cli":
        return 0
    floors = [(len(prefix), floor) for floor, (_, prefixes) in enumerate(layers) for prefix in prefixes
              if module == prefix or module.startswith(prefix + ".")]
    return max(floors)[1]


def ups(route: list[str], layers) -> list[tuple[str, str]]:
    """The moves of the route that go back up a layer."""
    return [(a, b) for a, b in zip(route, route[1:]) if layer_of(b, layers) < layer_of(a, layers)]


def run_route(tmp: Path, *, returns: bool = True, benchmark: str = "arithmetic", agent: str | None = None) -> list[str]:
    """The route of a small real run: one task of `benchmark`, one trial, a scripted model."""
    from reinagent.config import build_config
    from reinagent.runner import run_experiment

    script = tmp / "script.json"
    script.write_text('{"rules": [], "default": "Thought: add.\\nAction: Finish[0]"}', encoding="utf-8")
    config = build_config(benchmark=benchmark, agent=agent, num_envs=1, num_trials=1, model=f"scripted:{script}",
                          run_dir=str(tmp / "run"), cache=False)
    return trace(lambda: run_experiment(config, progress=False), returns=returns)


if __name__ == "__main__":
    import importlib

    sys.path.insert(0, str(Path(__file__).parents[1]))
    LAYERS = importlib.import_module("tests.test_architecture").LAYERS  # by name: that test imports this file

    for returns, reading in ((False, "calls only (the issue's reading)"), (True, "calls and their returns")):
        with tempfile.TemporaryDirectory() as tmp:
            route = run_route(Path(tmp), returns=returns)
        print(f"{reading}:\n  " + " -> ".join(m.removeprefix("reinagent.") for m in route))
        print(f"  {len(set(route))} modules, {len(route) - 1} moves, {len(ups(route, LAYERS))} back up: "
              + ", ".join(f"{a.removeprefix('reinagent.')} -> {b.removeprefix('reinagent.')}" for a, b in ups(route, LAYERS)))
