"""Shared fixtures: scripted model files, the real CLI in a subprocess, a loopback server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "reinagent.cli"]


@pytest.fixture(scope="session", autouse=True)
def _suite_environment(tmp_path_factory):
    """Set once for the whole session, not around each test: setenv/unsetenv in C are not
    thread-safe, and a library thread reading the environment (getenv in a DNS lookup) while a
    test's teardown rewrote it crashed the suite (SIGSEGV in getenv, CI of stop 56)."""
    values = {
        # The key that seals runs' endpoints (reinagent/seal.py): the suite's own, not the user's.
        "REINAGENT_STATE_DIR": str(tmp_path_factory.mktemp("state")),
        # Retries wait milliseconds in tests. (Tests that count model calls pass --no-cache or a
        # private --cache-dir; REINAGENT_CACHE_DIR also holds the converted embedded model.)
        "REINAGENT_RETRY_INITIAL_S": "0.01",
        "REINAGENT_RETRY_MAX_S": "0.2",
    }
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def write_script(path: Path, rules: list[dict], default: str = "Thought: guess.\nAction: Finish[wrong]") -> str:
    path.write_text(yaml.safe_dump({"rules": rules, "default": default}, allow_unicode=True))
    return f"scripted:{path}"


@pytest.fixture
def script(tmp_path):
    """Write a scripted-model file and return its model string."""
    counter = iter(range(1000))

    def make(rules: list[dict], default: str = "Thought: guess.\nAction: Finish[wrong]") -> str:
        return write_script(tmp_path / f"script{next(counter)}.yaml", rules, default)

    return make


def run_cli(*args: str, env: dict | None = None, timeout: float = 300, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd or ROOT
    )


def one_line_error(proc, *needles):
    """A failed CLI call that printed exactly one line (no traceback) containing every needle."""
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]
