"""Where reinagent keeps packaged data and per-user caches."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
DATA_DIR = PACKAGE_DIR / "data"


def cache_root() -> Path:
    """$REINAGENT_CACHE_DIR, else the user's cache directory (~/.cache/reinagent)."""
    env = os.environ.get("REINAGENT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "reinagent"


def state_root() -> Path:
    """$REINAGENT_STATE_DIR, else the user's state directory (~/.local/state/reinagent): what this
    user keeps on this machine and no run directory carries (the key that seals a run's endpoints)."""
    env = os.environ.get("REINAGENT_STATE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "reinagent"
