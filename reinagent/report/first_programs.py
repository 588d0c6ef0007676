"""`first_programs.json` of a programming run, as reports read it: the hidden verdicts on each
task's first program, judged after the loop by reinagent.first_programs (which writes it)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from reinagent.errors import RunDirError

FIRST_PROGRAMS = "first_programs.json"
_MAX_SIDE_FILE = 16 << 20  # bytes: a verdict per task is a few dozen


def read_first_programs(run_dir: str | Path) -> dict[str, dict[str, Any]] | None:
    """task id -> {"passed": bool, ...}: the hidden verdicts on each task's first program
    (reinagent.first_programs), or None when the run has none. Read as any file of a run directory
    someone else may have planted: a regular file only (no FIFO, device or link), bounded in size,
    checked in shape; anything else is one line (RunDirError)."""
    path = Path(run_dir) / FIRST_PROGRAMS
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as err:
        raise RunDirError(f"{path}: cannot be read ({err.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_SIDE_FILE:
            raise RunDirError(f"{path}: not a regular file under {_MAX_SIDE_FILE >> 20} MiB")
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(_MAX_SIDE_FILE + 1)
    finally:
        os.close(fd)
    try:
        tasks = json.loads(raw)["tasks"]
        if not isinstance(tasks, dict) or not all(isinstance(v, dict) and type(v.get("passed")) is bool for v in tasks.values()):
            raise ValueError("each task needs a boolean 'passed'")
    except (ValueError, KeyError, TypeError) as err:
        raise RunDirError(f"{path}: malformed ({err})") from None
    return {str(k): v for k, v in tasks.items()}
