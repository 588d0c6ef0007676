"""One writer per run: an exclusive `flock` on `run.lock` inside the run directory.

Every process that appends to a run (run, resume, repair) holds this lock for as long as it may
write. The kernel drops a flock when its holder's file descriptor closes, so a holder killed by
SIGKILL leaves no stale lock; the PID written into the file only names the holder in the error a
second writer gets. Readers (report, notebooks, load_run) never take it: they read complete lines.

flock locks belong to an open file description, so a second acquire in the *same* process (a
second RunStore of a run already open) is refused like one from another process.

A run directory may be shared (a group's folder): its files are never opened through a symbolic
link, or `repair`/`resume` would truncate or create whatever file the link names. A writer refuses
a run directory in which any of its files is a link (`refuse_links`), and every write opens with
O_NOFOLLOW (`open_no_follow`) so that a link planted after the check is refused too.
"""

from __future__ import annotations

import errno
import fcntl
import os
import weakref
from pathlib import Path

from reinagent.errors import RunDirError

LOCK = "run.lock"
# What writers create or rewrite in a run directory (report.md/html are replaced by rename).
WRITTEN = ("spec.json", "records.jsonl", LOCK, "records.quarantine.jsonl", "errors.log")


def _link_error(path: Path) -> RunDirError:
    return RunDirError(f"{path} is a symbolic link; a run directory's files must be regular files "
                       "(refusing to write through it: remove the link)")


def refuse_links(run_dir: Path) -> None:
    """RunDirError when a file a writer touches in `run_dir` is a symbolic link (dangling or not)."""
    for name in WRITTEN:
        if os.path.islink(Path(run_dir) / name):
            raise _link_error(Path(run_dir) / name)


def open_no_follow(path: Path, flags: int, mode: int = 0o644) -> int:
    """os.open that never follows a symbolic link at `path` (a RunDirError instead)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _link_error(Path(path)) from None
        raise


def append_text(path: Path, text: str) -> None:
    """Append `text` (UTF-8, unencodable characters escaped) to a log of the run directory."""
    fd = open_no_follow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    with os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace") as fh:
        fh.write(text)


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
        refuse_links(self.run_dir)  # every writer passes here first (run, resume, repair)
        try:
            fd = open_no_follow(path, os.O_RDWR | os.O_CREAT)
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
