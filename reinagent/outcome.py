"""How a finished `run` or `resume` ends: its exit code and, when (task, trial)s errored, one
summary of the error kinds, so a script can tell a clean run from a broken one.

Exit codes of `reinagent run` / `reinagent resume` (docs/cli.md "Exit codes"):

    0    every (task, trial) was judged (solved or not)
    1    internal error (a bug; REINAGENT_DEBUG=1 shows the traceback)
    2    bad input or a failed preflight check: nothing ran
    3    some (task, trial)s ended in an error (listed by kind); `resume --retry-errors` redoes them
    4    every (task, trial) ended in an error: nothing was judged
    130  interrupted (finished (task, trial)s are saved)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from reinagent.records import TrialRecord
from reinagent.terminal import plain, shell_word

# The records come from the caller (cli.py reads them with runner.load_run): the runner imports
# this module, so this module never imports the runner.

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_SOME_ERRORS = 3
EXIT_ALL_ERRORS = 4


def error_kind(error: str) -> str:
    """'model error: HTTP 500 ...' -> 'model error'; 'KeyError: x' -> 'KeyError'."""
    head = error.split(":", 1)[0].strip()
    return head if head and len(head) <= 40 else "error"


@dataclass
class Outcome:
    records: int = 0
    errors: int = 0
    kinds: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)  # kind -> its first error, as recorded

    @classmethod
    def of(cls, records: list[TrialRecord]) -> "Outcome":
        out = cls(records=len(records))
        for rec in sorted(records, key=lambda r: (r.trial, r.task_id)):
            if rec.error is None:
                continue
            out.errors += 1
            kind = error_kind(rec.error)
            out.kinds[kind] += 1
            out.examples.setdefault(kind, f"{rec.task_id} trial {rec.trial}: {rec.error}")
        return out

    @property
    def exit_code(self) -> int:
        if self.errors == 0:
            return EXIT_OK
        return EXIT_ALL_ERRORS if self.errors == self.records else EXIT_SOME_ERRORS

    def lines(self, run_dir: str | Path) -> list[str]:
        """The summary printed at the end (nothing when no (task, trial) errored)."""
        if not self.errors:
            return []
        share = "every" if self.errors == self.records else f"{self.errors} of {self.records}"
        kinds = ", ".join(f"{kind} x{n}" for kind, n in self.kinds.most_common())
        out = [f"errors: {share} (task, trial)s ended in an error ({kinds})"]
        for kind, _ in self.kinds.most_common(3):
            out.append(f"  e.g. {_short(self.examples[kind])}")
        out.append(f"  details: reinagent report {shell_word(run_dir)}; redo them: reinagent resume {shell_word(run_dir)} --retry-errors")
        return out


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(plain(text).split())  # a program's error text must not drive the terminal
    return text if len(text) <= limit else text[: limit - 3] + "..."
