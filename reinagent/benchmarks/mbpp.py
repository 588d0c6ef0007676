"""MBPP, sanitized (Austin et al., 2021): 427 hand-verified short Python tasks (CC BY 4.0).

The data is `reinagent/data/mbpp/sanitized-mbpp.json` (see PROVENANCE.md there). A task is a
one-sentence description; the model is also shown the function's signature, taken from the
reference solution, because the hidden asserts call the function by name and MBPP's own prompt
format would otherwise show the asserts themselves. The three asserts stay hidden.

Splits follow the task-id ranges of the original MBPP release: prompt 1-10, test 11-510,
validation 511-600, train 601-974; `all` is every sanitized task.
"""

from __future__ import annotations

import ast
import json
from functools import lru_cache
from typing import ClassVar

from reinagent.benchmarks.programming import ProgrammingBenchmark, ProgrammingTask
from reinagent.paths import DATA_DIR
from reinagent.programming.extract import quiet_parse

DATA_FILE = DATA_DIR / "mbpp" / "sanitized-mbpp.json"
SPLIT_RANGES = {"prompt": (1, 10), "test": (11, 510), "validation": (511, 600), "train": (601, 974)}


def entry_point_of(code: str, tests: list[str]) -> ast.FunctionDef:
    """The function of `code` that the tests call (the last such definition, as Python binds)."""
    tree = quiet_parse(code)
    defs = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    for test in tests:
        for node in ast.walk(ast.parse(test)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in defs:
                return defs[node.func.id]
    raise ValueError("no function of the reference solution is called by the tests")


def signature_of(fn: ast.FunctionDef) -> str:
    returns = f" -> {ast.unparse(fn.returns)}" if fn.returns is not None else ""
    return f"def {fn.name}({ast.unparse(fn.args)}){returns}:"


def task_text(description: str, signature: str) -> str:
    return f"{description.strip()}\nThe function must have this signature:\n```python\n{signature}\n```"


@lru_cache(maxsize=1)
def load_mbpp() -> tuple[ProgrammingTask, ...]:
    rows = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    tasks = []
    for row in rows:
        fn = entry_point_of(row["code"], row["test_list"])
        signature = signature_of(fn)
        tasks.append(ProgrammingTask(
            task_id=f"Mbpp/{row['task_id']}", text=task_text(row["prompt"], signature), entry_point=fn.name,
            setup="\n".join(row["test_imports"]), hidden_tests=tuple(row["test_list"]), canonical=row["code"]))
    return tuple(tasks)


class MBPP(ProgrammingBenchmark):
    name: ClassVar[str] = "mbpp"
    description: ClassVar[str] = "MBPP sanitized: 427 Python tasks, hidden asserts in a sandbox, pass@1"
    splits: ClassVar[tuple[str, ...]] = ("all", *SPLIT_RANGES)
    default_split: ClassVar[str] = "all"
    id_prefix: ClassVar[str] = "Mbpp"

    def all_tasks(self) -> list[ProgrammingTask]:
        return list(load_mbpp())

    def split_of(self, task: ProgrammingTask) -> str:
        number = int(task.task_id.rsplit("/", 1)[1])
        for split, (low, high) in SPLIT_RANGES.items():
            if low <= number <= high:
                return split
        return "all"
