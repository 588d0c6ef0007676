"""The models cache's own files, read and written as files anyone with access to the folder may
have planted or broken (issue 54): a copy is trusted for its pinned size and sha256, never for a
stamp beside it; a stamp or index is read only as a bounded regular file; a full disk, a file
size limit or a read-only cache is one line naming the folder and the fix, not a traceback.

    verified(path, size, sha256)   a regular file of that size and sha256 (hashed once per process)
    file_sha256(path)              a regular file's sha256 (a FIFO or device is refused, not read)
    read_json(path)                a small JSON file, or None for anything else (missing, a FIFO,
                                   /dev/zero, garbled): the caller computes what it held again
    writing(folder, what)          OSErrors of a full disk, `ulimit -f` or a read-only folder as
                                   one ConfigError line (exit 2)
    check_engine_can_open(path)    OpenVINO GenAI opens a GGUF file read-write even to read it
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reinagent.errors import ConfigError

MAX_STAMP_BYTES = 16 << 20  # digests.json: 2,000 entries of ~200 bytes; a stamp is under 1 KB
_BLOCK = 1 << 24

_HASHED: dict[tuple, str] = {}  # (path, size, mtime_ns, inode) -> sha256: this process's checks


def _open_regular(path: Path) -> int | None:
    """A read-only descriptor of `path` when it is a regular file (a link to one is followed);
    None otherwise. O_NONBLOCK: opening a planted FIFO returns at once instead of hanging."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    os.set_blocking(fd, True)
    return fd


def file_sha256(path: Path, size: int | None = None) -> str | None:
    """The sha256 of the regular file at `path` (of `size` bytes, when given: None for another
    size, before a byte is read); None for a FIFO, a device or a missing file."""
    fd = _open_regular(path)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if size is not None and st.st_size != size:
            return None
        key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
        if key not in _HASHED:
            digest = hashlib.sha256()
            while block := handle.read(_BLOCK):
                digest.update(block)
            _HASHED[key] = digest.hexdigest()
        return _HASHED[key]


def verified(path: Path, size: int, sha256: str) -> bool:
    """Whether `path` is a regular file of `size` bytes with `sha256`, hashed once per process
    (2 s for the 1.5B file on this project's machine) and again when it changes."""
    return file_sha256(path, size) == sha256


def remember(path: Path, sha256: str) -> None:
    """`path` was just written with `sha256`: the next check need not read it again."""
    st = path.stat()
    _HASHED[(str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)] = sha256


def read_json(path: Path, limit: int = MAX_STAMP_BYTES) -> Any:
    """The JSON value in the regular file `path` of at most `limit` bytes; None when it is
    missing, not a regular file, larger, or not JSON."""
    fd = _open_regular(path)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


# errno -> what it means for a cache folder, and what frees it
_FULL = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
         errno.EFBIG: "a file size limit (ulimit -f) stops the write"}
_DENIED = {errno.EROFS: "it is on a read-only filesystem", errno.EACCES: "it is not writable by you",
           errno.EPERM: "it is not writable by you"}


@contextlib.contextmanager
def writing(folder: Path, what: str, needs: int = 0) -> Iterator[None]:
    """Writes into the cache `folder` (for `what`, e.g. "local:qwen2.5-coder-0.5b"): a full disk,
    a file size limit or a folder that cannot be written raised as one ConfigError line."""
    try:
        yield
    except OSError as err:
        why = _FULL.get(err.errno) or _DENIED.get(err.errno)
        if why is None or (err.errno in (errno.EACCES, errno.EPERM) and _can_write(folder)):
            raise  # not the cache's fault: a source file that cannot be read, say
        room = f" (about {needs / 1e9:.1f} GB)" if needs else ""
        fix = {errno.EFBIG: f"lift the limit (ulimit -f unlimited){room}"}.get(
            err.errno, f"free space there{room}" if err.errno in _FULL else "make it writable")
        fix += ", or set REINAGENT_CACHE_DIR to a writable folder with room"
        raise ConfigError(f"{what}: cannot write the models cache {folder}: {why} ({os.strerror(err.errno)}); {fix}") from None


def _can_write(folder: Path) -> bool:
    while not folder.exists() and folder != folder.parent:  # the first folder that is there
        folder = folder.parent
    return os.access(folder, os.W_OK)


def check_engine_can_open(path: Path) -> None:
    """OpenVINO GenAI's GGUF reader opens the file O_RDWR | O_APPEND (strace of 2026.4.1), so a
    GGUF file it cannot write fails to load with "Failed to open ... with gguf_open": say why."""
    if path.suffix.lower() == ".gguf" and not os.access(path, os.W_OK):
        where = "is on a read-only filesystem" if _read_only_fs(path) else "is not writable by you"
        raise ConfigError(f"model file {path} {where}, and OpenVINO GenAI opens a GGUF file for writing even to read it; "
                          "make it writable, or copy it to a writable folder (a packaged model: set "
                          "REINAGENT_CACHE_DIR to a writable folder, where it is assembled again)")


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False
