"""Errors that the CLI turns into one clear line (no traceback)."""

from __future__ import annotations


class ReinagentError(Exception):
    """A problem the user can fix: bad input, a missing key, a corrupt run directory."""


class ConfigError(ReinagentError):
    """Bad configuration: unknown names, invalid numbers, malformed YAML."""


class RunDirError(ReinagentError):
    """A run directory that does not exist, is not a run, or has a corrupt record file."""


class ModelError(Exception):
    """A model call that failed for good (not retryable, or retries exhausted).

    The runner records it as the error of that one (task, trial) and carries on.
    """


def choices(names) -> str:
    """'a, b or c' for error messages that name the valid choices."""
    names = [str(n) for n in names]
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " or " + names[-1]
