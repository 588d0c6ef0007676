"""Registries of names that settings are checked against, kept below both the settings and the
parts that own the names: `config.py` validates `rollout=` here without importing the rollouts
(which import config), and `rollouts/base.py` imports a rollout's module from here on demand."""

from __future__ import annotations

from reinagent.errors import ConfigError, choices

ROLLOUTS = ("react", "tot", "mcts", "multi-turn")

# rollout name -> (module, class); the module is imported on demand (rollouts.base.make_rollout)
ROLLOUT_CLASSES: dict[str, tuple[str, str]] = {
    "react": ("reinagent.rollouts.react", "ReactRollout"),
    "tot": ("reinagent.rollouts.tot", "TotRollout"),
    "mcts": ("reinagent.rollouts.mcts", "MctsRollout"),
    "multi-turn": ("reinagent.rollouts.multi_turn", "MultiTurnRollout"),
}


def register_rollout(name: str, module: str, cls: str) -> None:
    """Make a rollout defined outside this package selectable by name (`rollout=` of a run); its
    module is imported when a run first asks for it. Built-in ones are listed in ROLLOUT_CLASSES."""
    ROLLOUT_CLASSES[name] = (module, cls)


def rollout_names() -> tuple[str, ...]:
    """Every selectable rollout: the built-in ROLLOUTS, then any registered at run time."""
    return tuple(ROLLOUT_CLASSES)


def check_rollout(name: str) -> str:
    if name not in ROLLOUT_CLASSES:
        raise ConfigError(f"unknown rollout {name!r}; valid: {choices(rollout_names())}")
    return name
