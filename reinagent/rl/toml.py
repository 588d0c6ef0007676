"""The `[rl]` table of a TOML file -> RLAgentConfig, with one-line errors for every bad input."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from reinagent.errors import ConfigError
from reinagent.rl.config import RLAgentConfig, build_rl_config


def read_table(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read config file {path}: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path} is not valid TOML: {err}") from None
    except ValueError:  # int() of more than 4,300 digits: no TOMLDecodeError, and no setting either
        raise ConfigError(f"{path} holds a number of more than 4,300 digits; a setting's number is short") from None
    table = data.get("rl")
    if not isinstance(table, dict):
        other = ", ".join(sorted(data)) or "none"
        raise ConfigError(f"{path} has no [rl] table (tables found: {other})")
    return table


def load_rl_config(path: str | Path, **overrides: Any) -> RLAgentConfig:
    """The [rl] table of `path`; `overrides` (not None) win over the file."""
    values = {**read_table(path), **{k: v for k, v in overrides.items() if v is not None}}
    return build_rl_config(values, where=f"[rl] of {path}")
