"""One writer per run: an exclusive `flock` on `run.lock` inside the run directory.

Every process that appends to a run (run, resume, repair) holds this lock for as long as it may
write. The kernel drops a flock when its holder's file descriptor closes, so a holder killed by
SIGKILL leaves no stale lock; the PID written into the file only names the holder in the error a
second writer gets. Readers (report, notebooks, load_run) never take it: they read complete lines.

flock locks belong to an open file description, so a second acquire in the *same* process (a
second RunStore of a run already open) is refused like one from another process.
"""

from __future__ import annotations

import errno
import fcntl
import os
import weakref
from pathlib import Path

from reinagent.errors import RunDirError

LOCK = "run.lock"


class RunLocked(RunDirError):
    """Another process (or another store in this one) is writing to the run."""


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return text if text.isdigit() else "unknown"


class RunLock:
    """The exclusive lock of one run directory; released by `release()`, by garbage collection
    of this object, or by the kernel when the process ends however it ends."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self._fd: int | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "RunLock":
        if self._fd is not None:
            return self
        path = self.run_dir / LOCK
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as err:
            raise RunDirError(f"cannot open the run lock {path}: {err.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = _holder(fd)
            os.close(fd)
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise RunDirError(f"cannot lock {path}: {err.strerror}") from None
            raise RunLocked(
                f"run {self.run_dir} is in use by process {holder} (a run, resume or repair writing to it); "
                "wait for it to end or stop it, then try again"
            ) from None
        # Only the holder writes the file, so a reader that fails the flock sees this PID.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd
        self._finalizer = weakref.finalize(self, os.close, fd)
        return self

    def release(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # closes the descriptor, which drops the flock
        self._fd = None
        self._finalizer = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
