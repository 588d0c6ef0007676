"""How a sandboxed process is started: the containment modes, strongest first.

bwrap    bubblewrap: new pid/net/ipc/uts namespaces, read-only /usr and /etc, the interpreter's
         own directory tree bound read-only with its site-packages (and /usr's) covered by empty
         tmpfs (the standard library only), private size-capped tmpfs for /tmp and the scratch dir
         (/sandbox), no network. As root, bwrap keeps only CAP_SETUID/SETGID/CHOWN so that the
         harness can drop to a dedicated uid.
uid      root without bubblewrap: the harness drops to a dedicated unprivileged uid; the rest of
         the system is protected by file permissions only and the network is reachable.
rlimits  neither: resource limits and a scratch cwd only. Weak; a warning says so.

Why dedicated uids: RLIMIT_NPROC counts every process of a (real) uid and is never enforced for
root, so a fork bomb is only stopped by running it as a uid of its own. Each concurrent run gets
its own fresh uid (unique within this process and, through the pid, across processes on the
machine: every process id has its own block of uids), which also makes "kill every process of this
uid" a safe and complete cleanup.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
import threading
import warnings
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from reinagent.errors import ConfigError

UID_BASE_ENV = "REINAGENT_SANDBOX_UID_BASE"
DEFAULT_UID_BASE = 1_000_000_000  # far above login users (1000+) and the usual /etc/subuid ranges
MIN_UID_BASE = 100_000_000  # below this a base could reach system, login or container users
MAX_UID = 2**32 - 2  # (uid_t)-1 means "no change" to setuid and friends
PID_LIMIT = 1 << 22  # the kernel's PID_MAX_LIMIT on 64-bit: no pid reaches it, whatever pid_max says
MIN_UIDS_PER_PROCESS = 256  # concurrent runs of one process, with room for zombies to be reaped
SANDBOX_DIR = "/sandbox"  # the scratch dir as the program sees it under bubblewrap
PATH = "/usr/local/bin:/usr/bin:/bin"
# Isolated (no PYTHON* variables, no user site) and no `site`: generated code gets the standard
# library only, and start-up drops from ~160 ms to ~40 ms where site-packages holds many .pth files.
PYTHON_FLAGS = ("-I", "-S")


class Mode(str, Enum):
    BWRAP = "bwrap"
    UID = "uid"
    RLIMITS = "rlimits"


MODE_NOTES = {
    Mode.BWRAP: "bubblewrap: read-only system, private /tmp, no network, own pid namespace",
    Mode.UID: "dedicated unprivileged uid + rlimits (no bubblewrap): the network is reachable and "
    "the file system is protected by permissions only",
    Mode.RLIMITS: "rlimits only (no bubblewrap, not root): generated code runs as your own user "
    "and can read and write your files; install bubblewrap",
}


@dataclass
class Launch:
    """Everything needed to start one sandboxed process."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    drop: dict | None = None  # what the harness does as root before dropping to the uid
    host_scratch: str | None = None  # removed after the run
    uid: int | None = None  # the dedicated uid, killed off after the run
    extra_nproc: int = 0  # processes the uid already has (rlimits mode)


def is_root() -> bool:
    return os.geteuid() == 0


def python_paths() -> tuple[str, str]:
    """(prefix, executable) of the base interpreter (a venv's site-packages is not needed)."""
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    if not exe.startswith(prefix + os.sep):
        prefix = str(Path(exe).parent.parent)
    return prefix, exe


def uid_base() -> int:
    """$REINAGENT_SANDBOX_UID_BASE (default 1,000,000,000), checked: a ConfigError when it could
    reach a system or login user (below MIN_UID_BASE, or a uid the password database knows or
    /etc/subuid hands out in the range the blocks cover), or leaves too few uids per process."""
    text = os.environ.get(UID_BASE_ENV, "").strip() or str(DEFAULT_UID_BASE)
    try:
        base = int(text)
    except ValueError:
        raise ConfigError(f"${UID_BASE_ENV} must be a whole number, got {text[:40]!r}") from None
    top = MAX_UID - MIN_UIDS_PER_PROCESS * PID_LIMIT
    if not MIN_UID_BASE <= base <= top:
        raise ConfigError(f"${UID_BASE_ENV} must be between {MIN_UID_BASE:,} and {top:,} (sandbox uids must "
                          f"never be a system or login user's), got {base:,}")
    end = base + uids_per_process(base) * PID_LIMIT
    for name, first, count in _known_uids():
        if first < end and base < first + count:
            raise ConfigError(f"${UID_BASE_ENV}={base:,}: the sandbox's uids {base:,}-{end - 1:,} include {name}'s "
                              f"uid {max(first, base):,}; choose a base above {first + count - 1:,}")
    return base


def uids_per_process(base: int) -> int:
    """Each process id gets its own block, for every pid the kernel can hand out (PID_LIMIT, not
    today's pid_max, which root may raise at any time), below the largest valid uid."""
    return min(65536, (MAX_UID - base) // PID_LIMIT)


def _known_uids() -> list[tuple[str, int, int]]:
    """(who, first uid, count): the password database's users and /etc/subuid's ranges."""
    import pwd

    known = [(f"user {p.pw_name!r}", p.pw_uid, 1) for p in pwd.getpwall()]
    with contextlib.suppress(OSError):
        for line in Path("/etc/subuid").read_text().splitlines():
            name, first, count = (line.split(":") + ["", "", ""])[:3]
            if first.isdigit() and count.isdigit():
                known.append((f"/etc/subuid's range for {name!r}", int(first), int(count)))
    return known


class FreshUids:
    """Hands out a fresh dedicated uid for every run, from this process's own block.

    The block is keyed on the whole process id (base + pid * per_process), so two live processes
    never share a uid whatever the host's pid_max; it is worked out again after a fork. Within a
    process uids cycle through the block: reuse only after per_process runs, since killed processes
    can linger as zombies until init reaps them and still count against a run's RLIMIT_NPROC.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0
        self._pid: int | None = None
        self.block = self.size = 0

    def fresh(self) -> int:
        with self._lock:
            if self._pid != os.getpid():
                base = uid_base()
                self._pid, self.size = os.getpid(), uids_per_process(base)
                self.block, self._next = base + os.getpid() * self.size, 0
            self._next = (self._next + 1) % self.size
            return self.block + self._next

    def owns(self, uid: int) -> bool:
        """Whether `uid` is one of this process's sandbox uids."""
        return self.block <= uid < self.block + self.size


UIDS = FreshUids()


def kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid` (escapees of the process group included).

    kill(-1) from a process running as that uid reaches exactly the uid's processes; the loop
    is bounded because a zombie nobody reaps keeps answering "signalled".
    """
    script = "i=0; while [ $i -lt 20 ] && kill -9 -1 2>/dev/null; do i=$((i+1)); done"
    subprocess.run(["/bin/sh", "-c", script], user=uid, group=uid, extra_groups=[], env={"PATH": PATH}, cwd="/",
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=30, check=False)


# Where an unprivileged uid can write outside its scratch dir (world-writable, sticky).
WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


def sweep_files_of(uid: int, roots: tuple[str, ...] = WORLD_WRITABLE, depth: int = 0) -> None:
    """Remove everything `uid` owns in the world-writable directories (uid mode, after a run).

    A run's uid is fresh and never reused, so what it owns is exactly what its code wrote.
    Subdirectories owned by others are searched only when they are world-writable too (the uid
    could write nowhere else); symlinks are removed, never followed."""
    for root in roots:
        try:
            entries = list(os.scandir(root))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
                if info.st_uid == uid:
                    if stat.S_ISDIR(info.st_mode):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)
                elif stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002 and depth < 4:
                    sweep_files_of(uid, (entry.path,), depth + 1)
            except OSError:
                continue


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for path in ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def site_package_dirs(prefix: str) -> list[str]:
    """Where installed (non-standard-library) packages live in the trees bubblewrap binds: the
    interpreter's own prefix, /usr and /usr/local. `-I -S` keeps them off sys.path, but a program
    could put them back; under bubblewrap an empty read-only tmpfs covers each of them."""
    found: set[str] = set()
    for root in {prefix, "/usr", "/usr/local"}:
        for pattern in ("lib*/python3*/site-packages", "lib*/python3*/dist-packages"):  # python3/ too
            found.update(str(p) for p in Path(root).glob(pattern) if p.is_dir() and not p.is_symlink())
    return sorted(found)


def bwrap_launch(harness: str, *, scratch_mb: int, uid: int | None) -> Launch:
    prefix, exe = python_paths()
    args = [shutil.which("bwrap") or "bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc"]
    args += ["--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    args += _system_binds()
    if prefix != "/usr" and not prefix.startswith("/usr/"):
        # e.g. a pyenv under /root: only the interpreter's own tree is bound, at its own path
        # (shared-library rpaths keep working); the rest of /root stays invisible. Its parents
        # are made traversable: bwrap would copy /root's 0700, locking the dropped uid out.
        for parent in reversed(Path(prefix).parents[:-1]):
            args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", prefix, prefix]
    for folder in site_package_dirs(prefix):  # the standard library only: installed packages hidden
        args += ["--tmpfs", folder, "--remount-ro", folder]
    size = str(scratch_mb << 20)
    args += ["--dev", "/dev", "--proc", "/proc", "--size", size, "--tmpfs", "/tmp"]
    args += ["--size", size, "--tmpfs", SANDBOX_DIR, "--chdir", SANDBOX_DIR, "--clearenv"]
    env = {"HOME": SANDBOX_DIR, "TMPDIR": "/tmp", "PATH": PATH, "LANG": "C.UTF-8"}
    for key, value in env.items():
        args += ["--setenv", key, value]
    drop = None
    if uid is not None:
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_CHOWN"):
            args += ["--cap-add", cap]
        drop = {"uid": uid, "gid": uid, "chown": [SANDBOX_DIR], "chmod_tmp": ["/tmp"]}
    else:  # unprivileged bubblewrap: a user namespace, and no way to create more inside
        args += ["--unshare-user", "--disable-userns"]
    args += ["--", exe, *PYTHON_FLAGS, "-c", harness]
    return Launch(argv=args, env={"PATH": PATH}, cwd="/", drop=drop, uid=uid)


def plain_launch(harness: str, *, scratch: str, uid: int | None) -> Launch:
    """uid and rlimits modes: the host interpreter, cwd and HOME in a fresh host directory."""
    _, exe = python_paths()
    env = {"HOME": scratch, "TMPDIR": scratch, "PATH": PATH, "LANG": "C.UTF-8"}
    drop = None
    if uid is not None:
        drop = {"uid": uid, "gid": uid, "chown": [scratch], "remap_path": True}
    launch = Launch(argv=[exe, *PYTHON_FLAGS, "-c", harness], env=env, cwd=scratch, drop=drop)
    launch.host_scratch, launch.uid = scratch, uid
    if uid is None:
        launch.extra_nproc = count_own_tasks()
    return launch


def count_own_tasks() -> int:
    """Threads of our own uid: RLIMIT_NPROC counts them all, so the limit must sit above."""
    me, total = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == me:
                    total += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError:
                continue
    return total


_WARNED: set[Mode] = set()


def warn_weak(mode: Mode, why: str) -> None:
    """Once per process and mode: say clearly that containment is weaker than bubblewrap."""
    if mode in _WARNED:
        return
    _WARNED.add(mode)
    message = f"reinagent sandbox: using mode {mode.value!r} ({MODE_NOTES[mode]}); {why}"
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    print(f"warning: {message}", file=sys.stderr)
