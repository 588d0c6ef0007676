"""Errors that the CLI turns into one clear line (no traceback)."""

from __future__ import annotations


class ReinagentError(Exception):
    """A problem the user can fix: bad input, a missing key, a corrupt run directory."""


class ConfigError(ReinagentError):
    """Bad configuration: unknown names, invalid numbers, malformed YAML."""


def collect(problems: list[ConfigError], check, *args, **kwargs):
    """`check(*args, **kwargs)`, its ConfigError kept in `problems` (then None) rather than raised:
    what resolving a run does, so that every problem is reported at once."""
    try:
        return check(*args, **kwargs)
    except ConfigError as err:
        problems.append(err)
        return None


def raise_all(problems: list[ConfigError]) -> None:
    """Nothing, or the one problem with its own class, or every problem, one line each."""
    if problems:
        raise problems[0] if len(problems) == 1 else ConfigError("\n".join(str(p) for p in problems))


class PreflightError(ConfigError):
    """A check before the run failed: one line naming what, why and the fix (the CLI exits 2)."""


class MissingExtra(PreflightError):
    """An optional extra the run needs is not installed."""


# extra -> modules it installs that a run imports; the install hint names the extra
EXTRAS: dict[str, tuple[str, ...]] = {
    "alfworld": ("alfworld", "textworld"),
    "local": ("openvino_genai",),  # the OpenVINO engine (reinagent.llm.openvino)
    "hf": ("torch", "transformers", "safetensors"),  # transformers: hf:PATH, and local:HF_DIR checkpoints
}


def require_extra(extra: str, what: str) -> None:
    """MissingExtra, one line, when a module of `extra` (one of EXTRAS) is not installed; `what`
    names who needs it ("benchmark alfworld", "model 'local'")."""
    missing = [m for m in EXTRAS[extra] if not importable(m)]
    if missing:
        raise MissingExtra(f"{what}: needs the {extra} extra (module {missing[0]} is not installed); install it with "
                           f"`.venv/bin/pip install -e '.[{extra}]'` (or ./run_tests.sh, which installs every extra)")


def importable(module: str) -> bool:
    """Whether `import module` can work, without importing it (alfworld takes seconds)."""
    import importlib.util
    import sys

    if module in sys.modules:
        return sys.modules[module] is not None  # None: an import that is known to fail
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


class RunDirError(ReinagentError):
    """A run directory that does not exist, is not a run, or has a corrupt record file."""


class InfrastructureError(Exception):
    """The machinery failed, not the model: a broken model reply, a server that answered
    nonsense, a sandbox that could not start.

    The runner records it as the `error` of that one (task, trial), never as a failed attempt:
    no success verdict, no reflection, nothing enters the task's memory, and
    `reinagent resume --retry-errors` redoes it.
    """


class ModelError(InfrastructureError):
    """A model call that failed for good (not retryable, or retries exhausted)."""


class MalformedResponseError(ModelError):
    """A model server answered with something that is not a chat completion: invalid JSON, an
    HTML page with status 200, `message: null`, no choices. Not the model's answer."""


class SandboxError(InfrastructureError):
    """The sandbox could not run a program at all (it could not start), so there is no verdict."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run whose store exists: which run it was, so the CLI can say how many
    records are saved and the exact command that continues it. `store` is None for a run
    directory (`where` is the directory), else a database URL without its password (`where` is
    the run id)."""

    def __init__(self, where: str, store: str | None = None):
        super().__init__(where)
        self.where, self.store = where, store


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during `rl train`: the step it stopped after and the newest resumable checkpoint's
    step (0: none yet), so the CLI can say what a rerun of the same command does."""

    def __init__(self, step: int, checkpoint_step: int, steps: int):
        super().__init__(step)
        self.step, self.checkpoint_step, self.steps = step, checkpoint_step, steps


def choices(names) -> str:
    """'a, b or c' for error messages that name the valid choices."""
    names = [str(n) for n in names]
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " or " + names[-1]


def env_count(name: str, default: int, most: int = 100_000) -> int:
    """A positive whole number from the environment variable `name` (`default` when unset), at most
    `most`, or a ConfigError naming the variable: a typo in a tuning knob is one line, not a
    traceback, and 0 is refused rather than quietly read as 1."""
    import os

    raw = os.environ.get(name)
    if not raw:
        return default
    text = raw.strip()
    # isdigit() alone passes "²" (int() then fails); 10 digits bound int()'s work
    if not (text.isascii() and text.isdigit()) or len(text) > 10 or not 1 <= int(text) <= most:
        raise ConfigError(f"{name} must be a whole number from 1 to {most}, got {raw!r}")
    return int(text)
