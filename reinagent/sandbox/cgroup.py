"""A cgroup v2 per run, where the machine allows one: the program's total memory, all its processes.

RLIMIT_AS binds one process; a program that forks multiplies it. A cgroup's memory.max binds
them all together, so where one can be made each run gets its own:

    <base>/reinagent-<pid>-<n>/   memory.max = Limits.memory_mb, memory.swap.max = 0,
                                  pids.max = Limits.cgroup_nproc; removed after the run

<base> is REINAGENT_SANDBOX_CGROUP (a cgroup v2 directory delegated to us, e.g. by
`systemd-run --user -p Delegate=yes`), else our own cgroup when it already hands the memory and
pids controllers to its children (a container whose entry point set that up). Anywhere else,
`usable_base()` is None and process.py falls back to per-process limits whose product stays
under the same cap (docs/programming.md says which applies).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from pathlib import Path

from reinagent.errors import ConfigError

ENV = "REINAGENT_SANDBOX_CGROUP"
MOUNT = Path("/sys/fs/cgroup")
_NUMBERS = itertools.count(1)


def _delegates(path: Path) -> bool:
    try:
        controllers = (path / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False
    return {"memory", "pids"} <= set(controllers) and os.access(path, os.W_OK)


def _own_cgroup() -> Path | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):  # the v2 hierarchy
                return MOUNT / line[3:].lstrip("/")
    return None


_FOUND: dict[str, Path | None] = {}  # by the variable's value: looked for once per process


def usable_base() -> Path | None:
    """Where runs get their cgroups, or None (no cgroup v2 with memory and pids for us here)."""
    chosen = os.environ.get(ENV, "").strip()
    if chosen not in _FOUND:
        _FOUND[chosen] = _find(chosen)
    return _FOUND[chosen]


def _find(chosen: str) -> Path | None:
    if chosen:
        path = Path(chosen)
        if not _delegates(path):
            raise ConfigError(f"{ENV}={chosen} is not a writable cgroup v2 directory whose "
                              "cgroup.subtree_control lists memory and pids; unset it to use per-process limits")
        return path
    own = _own_cgroup()
    return own if own is not None and _delegates(own) else None


class RunCgroup:
    """One run's cgroup: made before the program starts, removed once everything in it is gone."""

    def __init__(self, base: Path, memory_mb: int, nproc: int):
        self.path = base / f"reinagent-{os.getpid()}-{next(_NUMBERS)}"
        self.path.mkdir()
        try:
            (self.path / "memory.max").write_text(str(memory_mb << 20))
            if (self.path / "memory.swap.max").exists():  # absent without swap accounting
                (self.path / "memory.swap.max").write_text("0")
            (self.path / "pids.max").write_text(str(nproc))
        except OSError:
            self.remove()
            raise

    def wrap(self, argv: list[str]) -> list[str]:
        """argv run by a shell that first moves itself into the cgroup, then execs it: bwrap and
        everything it forks start inside, with no moment outside to fork from."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.path / "cgroup.procs"), *argv]

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the run for going over memory.max."""
        with contextlib.suppress(OSError):
            for line in (self.path / "memory.events").read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == "oom_kill" and value.strip() not in ("", "0"):
                    return True
        return False

    def remove(self, wait_s: float = 2.0) -> None:
        """Kill what is left in it and remove it (an empty cgroup only; killed processes take a
        moment to leave, so this retries for up to wait_s)."""
        kill = self.path / "cgroup.kill"  # Linux 5.14+
        with contextlib.suppress(OSError):
            if kill.exists():
                kill.write_text("1")
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # left behind, empty once its last zombie is reaped
                time.sleep(0.02)
