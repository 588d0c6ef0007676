"""Reading and writing the files of a run directory, which anyone may have written (a shared
folder, a downloaded tarball): only regular files, with bounds, one line of error otherwise
(issue 45); and a whole file is written under a fresh name, then renamed over its own (issue 54).

A records.jsonl linked to /dev/zero was read until memory ran out; one that is a FIFO blocked
every reader (and the whole viewer) on open. So a file is opened with O_NONBLOCK (opening a FIFO
then returns at once), checked with fstat to be a regular file, and read up to a bound: a whole
file up to `limit` bytes, or line by line with each line bounded.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from reinagent.errors import RunDirError

MAX_SPEC_BYTES = 16 << 20  # spec.json: a few KB, task ids included (7,405 HotpotQA ids: 200 KB)
MAX_LINE_BYTES = 64 << 20  # one record of records.jsonl (a long trajectory is a few hundred KB)
MAX_RECORDS_BYTES = 4 << 30  # records.jsonl (the largest committed run's is under 100 MB)
MAX_LOG_BYTES = 256 << 20  # a training log


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | Path) -> BinaryIO:
    """`path` opened for reading, only when it is a regular file (a link to one is followed);
    a RunDirError naming what it is otherwise, and FileNotFoundError when it is missing."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise RunDirError(f"{path} is {_kind(mode)}, not a regular file: a run's files are plain files "
                              f"(a planted or broken run directory?)")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_bounded(path: str | Path, limit: int) -> bytes:
    """The whole regular file at `path`; a RunDirError when it holds more than `limit` bytes."""
    chunks, total = [], 0
    with open_regular(path) as fh:  # in chunks: read(limit) would allocate `limit` bytes at once
        while chunk := fh.read(min(1 << 20, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
    if total > limit:
        raise RunDirError(f"{path} is over {limit} bytes, more than a run writes there (a planted or broken run?)")
    return b"".join(chunks)


def iter_lines(path: str | Path, *, max_line: int = MAX_LINE_BYTES, max_total: int = MAX_RECORDS_BYTES
               ) -> Iterator[tuple[int, bytes, bool]]:
    """(line number from 1, the line without its newline, whether a newline ended it) for each
    line of the regular file at `path`, holding one line at a time; a RunDirError for a line over
    `max_line` bytes or a file over `max_total`."""
    read = 0
    with open_regular(path) as fh:
        number = 0
        while raw := fh.readline(max_line + 1):
            number += 1
            read += len(raw)
            complete = raw.endswith(b"\n")
            if not complete and len(raw) > max_line:
                raise RunDirError(f"{path}:{number}: a line over {max_line} bytes, more than a record holds "
                                  f"(a planted or broken run?)")
            if read > max_total:
                raise RunDirError(f"{path} is over {max_total} bytes (a planted or broken run?)")
            yield number, raw[:-1] if complete else raw, complete


def tail(path: str | Path, size: int) -> bytes:
    """The last `size` bytes (or fewer) of the regular file at `path`."""
    with open_regular(path) as fh:
        end = os.fstat(fh.fileno()).st_size
        fh.seek(max(0, end - size))
        return fh.read(size)


def replace_file(path: str | Path, data: str | bytes, mode: int = 0o644) -> Path:
    """Write `data` (str as UTF-8) to `path` whole: into a new file of a random name in the same
    folder, created with O_EXCL and O_NOFOLLOW (so never through a link, planted or dangling),
    fsynced, then renamed over `path` (a link there is replaced, not followed). Readers see the old
    file or the new one, never half. A fixed scratch name (`.report.md.partial`) let a planted link
    there overwrite any file its reader could write (issue 54)."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    for _ in range(16):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
            break
        except FileExistsError:  # someone's file (or link) at that name: never touched, draw another
            continue
    else:
        raise OSError(errno.EEXIST, f"no free scratch name beside {path}")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)  # the rename itself survives a power cut
    return path


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
