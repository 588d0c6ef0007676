"""A run's endpoints, sealed by the user who chose them.

spec.json records where a run's requests went (`base_url`, `env_url`, the Ray cluster at
`ray_address`, which is sent the run's code and whose answers are unpickled here) and which
variable held the key (`api_key_env`), so that `resume` and `branch` can go on without being told again. But a run
directory is data: anyone can write one (a shared folder, a downloaded tarball, an edited file),
and its spec must not decide which of this user's secrets go where. So a run created (or resumed
with those flags) here carries an HMAC of those three settings, keyed by a random key that lives
in this user's state directory (paths.state_root(), mode 0600) and never in a run directory. A
resume trusts the recorded endpoints only when that HMAC verifies; otherwise the user names them
again on the command line (resuming.confirm_destinations).

The response cache is sealed too (issue 54): a recorded `cache_dir`, or `cache_scope: shared`,
decides whose answers the resumed run replays as its own model's (a planted cache became a run's
reflections). Each enters the sealed message only when it is set (a cache_dir) or shared, so a
seal made before this covered them still verifies for every run on the default cache.

A copied seal proves only that this user once chose those same settings; the seal never covers
anything else, so no other field of a planted spec gains trust from it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from collections.abc import Mapping
from typing import Any

from reinagent.paths import state_root

DESTINATIONS = ("base_url", "api_key_env", "env_url", "ray_address")
CACHE_SETTINGS = ("cache_dir", "cache_scope")  # sealed when they leave the default (`trusted_cache`)
SEAL_FIELD = "endpoints_seal"  # in spec.settings
_KEY_FILE = "seal.key"
_KEY_BYTES = 32
_DOMAIN = b"reinagent endpoints v1\n"


def trusted_cache(config: Mapping[str, Any]) -> dict[str, Any]:
    """The cache settings of `config` that only this user may choose: a cache_dir that is set, a
    cache_scope that is shared (the defaults, this user's own cache and the run's own calls, need
    no trust)."""
    out: dict[str, Any] = {}
    if config.get("cache_dir"):
        out["cache_dir"] = config.get("cache_dir")
    if config.get("cache_scope") not in (None, "run"):
        out["cache_scope"] = config.get("cache_scope")
    return out


def _message(config: Mapping[str, Any]) -> bytes:
    shown = {name: config.get(name) for name in DESTINATIONS} | trusted_cache(config)
    return _DOMAIN + json.dumps(shown, sort_keys=True).encode()


def _read_key(path) -> bytes | None:
    """The key, only from a regular file this user owns that no one else can read or write."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if (not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077
                or info.st_size != _KEY_BYTES):
            return None
        key = os.read(fd, _KEY_BYTES + 1)
    finally:
        os.close(fd)
    return key if len(key) == _KEY_BYTES else None


def _key(create: bool) -> bytes | None:
    """This user's sealing key (made on first use when `create`); None when there is none or it
    cannot be kept safely (then nothing is sealed and resumes ask for the endpoints)."""
    root = state_root()
    path = root / _KEY_FILE
    key = _read_key(path)
    if key is not None or not create:
        return key
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = root / f".{_KEY_FILE}.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, os.urandom(_KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # atomic and never replaces: two first runs at once agree on one key
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    except OSError:
        return None
    return _read_key(path)


def seal(config: Mapping[str, Any]) -> str | None:
    """The seal of `config`'s endpoints (as spec.json records them), or None without a key."""
    key = _key(create=True)
    return None if key is None else hmac.new(key, _message(config), hashlib.sha256).hexdigest()


def is_sealed(config: Mapping[str, Any], settings: Mapping[str, Any]) -> bool:
    """Whether `settings` carries this user's seal of exactly these endpoints."""
    tag = settings.get(SEAL_FIELD)
    key = _key(create=False) if isinstance(tag, str) else None
    if key is None:
        return False
    return hmac.compare_digest(tag, hmac.new(key, _message(config), hashlib.sha256).hexdigest())
