"""A throwaway PostgreSQL server for perf scripts (`perf/scale.py --postgres auto`): initdb and
pg_ctl in a temporary directory on a free port, as tests/test_store_postgres.py's fixture does
(as the `postgres` user when we are root: initdb refuses root). fsync stays on here, unlike the
tests: a write latency should include the commit's flush."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _binary(name: str) -> str:
    found = shutil.which(name) or (sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [None])[-1]
    if not found:
        raise SystemExit(f"{name} not found: scripts/system-packages.sh installs postgresql")
    return found


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yields the URL of a fresh database `perf` (user postgres, random password); removed after."""
    initdb, pg_ctl, psql = _binary("initdb"), _binary("pg_ctl"), _binary("psql")
    root = Path(tempfile.mkdtemp(prefix="reinagent-perf-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        import pwd

        account = pwd.getpwnam("postgres")
        os.chown(root, account.pw_uid, account.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    password = uuid.uuid4().hex
    (root / "pw").write_text(password)
    if as_user:
        os.chown(root / "pw", account.pw_uid, account.pw_gid)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = root / "data"
    subprocess.run([*as_user, initdb, "-D", str(data), "-U", "postgres", "--auth-host=scram-sha-256",
                    "--auth-local=trust", f"--pwfile={root / 'pw'}", "-E", "UTF8"], check=True, capture_output=True)
    options = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={root}"
    subprocess.run([*as_user, pg_ctl, "-D", str(data), "-l", str(root / "log"), "-w", "-t", "120", "-o", options,
                    "start"], check=True, capture_output=True)
    try:
        subprocess.run([*as_user, psql, "-h", str(root), "-p", str(port), "-U", "postgres", "-c",
                        "CREATE DATABASE perf"], check=True, capture_output=True)
        yield f"postgresql://postgres:{password}@127.0.0.1:{port}/perf"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "fast", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
