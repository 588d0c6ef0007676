"""The ALFWorld worker process: holds one text game at a time and answers the parent's requests.

    python -m reinagent.benchmarks.alfworld_worker FD PARENT_PID

FD is this process's end of a socket pair (see alfworld_env._Worker); PARENT_PID the framework
process, whose death (even by SIGKILL, even while this worker is busy in a long planner step)
kills the worker at once through PR_SET_PDEATHSIG. Requests are pickled
tuples: ("load", path, expert) / ("step", command) / ("close",); each gets ("ok", view) or
("error", traceback text). `expert` is None, "planner" (textworld's PDDL planner, fast-downward: an
optimal plan, made at reset as the game's walkthrough and again whenever the agent leaves it) or
"handcoded" (ALFWorld's DAgger expert, which searches receptacles one by one).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any


PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel for SIGKILL when the parent dies. The socket's EOF also tells an idle worker
    that the parent is gone, but a worker busy in a step (the PDDL planner can take minutes)
    would outlive it; this does not wait for the worker to look.

    The signal follows the parent *thread* that spawned the worker: the pool spawns from the
    event loop's thread, which lives as long as the run."""
    if sys.platform != "linux":
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(0)


def serve(conn: Connection) -> None:
    # Ctrl-C reaches the whole process group; stopping workers is the parent's decision, so
    # that it can record the interrupted episodes before it terminates them.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import textworld
    from alfworld.agents.environment.alfred_tw_env import (
        AlfredDemangler,
        AlfredExpert,
        AlfredExpertType,
        AlfredInfos,
    )

    game, plan = None, None
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent is gone: do not outlive it
            return
        op = message[0]
        if op == "close":
            return
        try:
            if op == "load":
                _, path, expert = message
                if game is not None:
                    game.close()
                extras = ["gamefile"]
                wrappers: list[Any] = [AlfredDemangler(shuffle=False), AlfredInfos]
                if expert == "planner":
                    extras.append("walkthrough")  # planned once, at reset
                elif expert == "handcoded":
                    extras.append("expert_plan")
                    # A keyword argument: AlfredExpert's first parameter is `env`, so a positional
                    # type (as alfworld's own init_env passes it) is silently ignored.
                    wrappers.append(AlfredExpert(expert_type=AlfredExpertType.HANDCODED))
                infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=extras)
                game = textworld.start(path, request_infos=infos, wrappers=wrappers)
                state, done = game.reset(), False
                plan = list(state.get("extra.walkthrough") or []) if expert == "planner" else None
            elif op == "step":
                if game is None:
                    raise RuntimeError("step before load")
                state, _, done = game.step(message[1])
                if plan is not None:
                    # Planning is slow (up to a minute for some pick-two games on a busy machine):
                    # follow the reset's plan while the agent does, replan only when it strays.
                    plan = plan[1:] if plan and plan[0] == message[1] else _replan(game)
            else:
                raise ValueError(f"unknown worker request {op!r}")
            view = state_view(state, done)
            if plan is not None:
                view["expert_plan"] = [] if view["won"] else list(plan)
            conn.send(("ok", view))
        except Exception:  # noqa: BLE001 - the parent decides; the text goes into the record
            conn.send(("error", traceback.format_exc(limit=5)))


def _replan(game: Any) -> list[str]:
    """The PDDL planner's plan from the current state (textworld's PddlEnv internals)."""
    pddl = game.unwrapped
    return list(pddl._pddl_state.replan(pddl._entity_infos))


def state_view(state: Any, done: bool) -> dict[str, Any]:
    """The picklable part of a textworld GameState that the wrapper uses."""
    return {
        "feedback": str(state["feedback"]),
        "admissible_commands": list(state.get("admissible_commands") or []),
        "won": bool(state.get("won")),
        "done": bool(done),
        "expert_plan": list(state.get("extra.expert_plan") or []),
    }


if __name__ == "__main__":
    if len(sys.argv) > 2:
        die_with_parent(int(sys.argv[2]))
    serve(Connection(int(sys.argv[1])))
