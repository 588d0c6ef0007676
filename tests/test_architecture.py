"""The house rules of docs/architecture.md, checked: its worked examples run (a benchmark, an agent,
a run end to end, a rollout and a store), no import circle between the package's files, no module
over 400 lines, and every package's docstring names what lives in it.
"""

from __future__ import annotations

import ast
import re
import sys
import tempfile
import types
from pathlib import Path

import pytest

from tests import store_contract as contract
from tests.conftest import ROOT

PACKAGE = ROOT / "reinagent"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MAX_LINES = 400

# Files allowed past the limit, each with its reason: none today.
OVER_LIMIT_ALLOWED: dict[str, str] = {}

# Import circles allowed: none.
CIRCLES_ALLOWED: list[frozenset[str]] = []

# Package docstrings that do not name their files yet: none today.
DOCSTRING_EXEMPT: dict[str, str] = {}


# -- the worked examples ----------------------------------------------------------------------------

def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_the_page_has_the_four_worked_examples():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    for heading in ("### An agent", "### A benchmark", "### Running it end to end", "### A rollout", "### A store"):
        assert heading in text
    for name in ("Env", "Rollout", "Executor", "Store", "Learner", "Strategy"):
        assert re.search(rf"^\| {name} \|", text, re.M), f"the interfaces table has no row for {name}"
    assert len(_python_blocks(text)) == 5


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    """The page's python blocks, run once in order in one module (so `__name__` is an importable
    path, as in a user's package); what they register is removed afterwards."""
    from reinagent import benchmarks
    from reinagent.rollouts import base as rollouts

    module = types.ModuleType("architecture_examples")
    work = tmp_path_factory.mktemp("examples")
    before = dict(benchmarks.REGISTRY), dict(rollouts._REGISTRY)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, module.__name__, module)
        patch.setattr(tempfile, "tempdir", str(work))  # the examples' mkdtemp() lands here
        patch.chdir(work)
        try:
            for number, block in enumerate(_python_blocks(ARCHITECTURE.read_text(encoding="utf-8")), 1):
                code = compile(block, f"{ARCHITECTURE.name} python block {number}", "exec")
                exec(code, module.__dict__)  # noqa: S102 - our own documentation's code
            yield module.__dict__
        finally:
            for registry, saved in zip((benchmarks.REGISTRY, rollouts._REGISTRY), before):
                registry.clear()
                registry.update(saved)


def test_the_worked_examples_run_end_to_end(examples):
    """The blocks assert their own results (the echo run solves both tasks in trial 2 after a
    reflection; best-of-3 makes three passes in trial 1); here, what they left behind."""
    from reinagent.records import TrialRecord
    from reinagent.store import read_records, read_spec

    records = read_records(examples["run_dir"])  # the best-of-3 run
    assert read_spec(examples["run_dir"]).config["rollout"] == "best-of-3"
    assert {(r.task_id, r.trial) for r in records} == {(f"echo/{w}", t) for w in ("apple", "pear") for t in (1, 2)}
    failed = [r for r in records if r.trial == 1]
    assert all(r.reflection and not r.success for r in failed)
    assert all(isinstance(r, TrialRecord) for r in examples["store"].read_records("echo"))


@pytest.mark.parametrize("check", [
    contract.check_log_and_live_records, contract.check_nul_characters_round_trip,
    contract.check_idempotent_writes, contract.check_racing_writers, contract.check_one_writer,
    contract.check_spec_history_and_missing_runs, contract.check_query,
], ids=lambda f: f.__name__)
def test_the_example_store_keeps_the_store_contract(examples, check):
    check(examples["MemoryStore"]())


def test_an_unknown_rollout_names_the_registered_ones(examples):
    from reinagent.config import build_config
    from reinagent.errors import ConfigError

    with pytest.raises(ConfigError, match="best-of-3"):
        build_config(None, rollout="best-of-4")


# -- import circles ---------------------------------------------------------------------------------

def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(root: Path = ROOT) -> dict[str, Path]:
    return {_module_name(p, root): p for p in sorted((root / "reinagent").rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module a dotted name lives in: `reinagent.a.b.Name` -> `reinagent.a.b`."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported(path: Path, root: Path = ROOT, modules: dict[str, Path] | None = None) -> set[str]:
    """Modules of the package this file imports when it is imported, and under TYPE_CHECKING.

    Counted: imports at module level, in class bodies and in any `if`/`try` there (a
    TYPE_CHECKING import is a dependency of the file's types as much as a runtime one). Not
    counted: imports inside functions, the package's way of loading heavy or optional parts on use.
    Not counted either: the parent packages Python runs first (`import a.b` runs a/__init__.py), or
    every module would sit in a circle with reinagent/__init__.py."""
    modules = modules if modules is not None else _modules(root)
    me = _module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Import):
                names.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(up + ([child.module] if child.module else []))
                names.add(base)
                names.update(f"{base}.{alias.name}" for alias in child.names)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    found = {_resolve(n, modules) for n in names if n == "reinagent" or n.startswith("reinagent.")}
    return {m for m in found if m and m != me}


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.add(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(frozenset(part))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_the_circle_finder_finds_a_type_checking_circle(tmp_path):
    """The check itself can fail: a TYPE_CHECKING import back is a circle, a function's is not."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert _circles(graph) == [frozenset({"a", "b"})]
    pkg = tmp_path / "reinagent"
    pkg.mkdir()
    (pkg / "x.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from reinagent.y import Y\n")
    (pkg / "y.py").write_text("def f():\n    from reinagent.x import X\n")
    assert _imported(pkg / "x.py", tmp_path) == {"reinagent.y"}
    assert _imported(pkg / "y.py", tmp_path) == set()


def test_no_import_circle_between_files():
    modules = _modules()
    graph = {name: _imported(path, ROOT, modules) for name, path in modules.items()}
    circles = _circles(graph)
    unexpected = [sorted(c) for c in circles if c not in CIRCLES_ALLOWED]
    assert not unexpected, f"import circles (move the shared names down a floor): {unexpected}"
    stale = [sorted(c) for c in CIRCLES_ALLOWED if c not in circles]
    assert not stale, f"allowed circles that are gone: delete them from CIRCLES_ALLOWED: {stale}"


def test_task_has_one_home_and_its_old_paths_still_work():
    import reinagent.benchmarks
    import reinagent.benchmarks.base
    from reinagent.task import Task

    assert reinagent.benchmarks.base.Task is Task and reinagent.benchmarks.Task is Task
    assert "reinagent.benchmarks.base" not in _imported(PACKAGE / "agents" / "base.py")


# -- sizes and docstrings ---------------------------------------------------------------------------

def _allowed_over(rel: str) -> bool:
    return any(rel == key or (key.endswith("/") and rel.startswith(key)) for key in OVER_LIMIT_ALLOWED)


def test_no_module_over_400_lines():
    over = {}
    for path in PACKAGE.rglob("*.py"):
        rel = str(path.relative_to(ROOT))
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and not _allowed_over(rel):
            over[rel] = lines
    assert not over, f"modules over {MAX_LINES} lines (split them by job): {over}"
    for key in OVER_LIMIT_ALLOWED:  # an entry for a file that is gone is stale
        assert (ROOT / key).exists(), f"OVER_LIMIT_ALLOWED names {key}, which does not exist"


def test_the_sandbox_harness_is_sent_as_one_program():
    """harness.py lost its serve mode to harness_serve.py (size): the child still gets one source
    that defines the serve mode before harness.py's last line calls main()."""
    from reinagent.sandbox.process import HARNESS

    compile(HARNESS, "harness", "exec")
    assert HARNESS.index("def _serve(") < HARNESS.index("def main(") < HARNESS.rindex("main()")
    assert HARNESS.rstrip().endswith("main()")


def test_every_package_docstring_names_what_lives_there():
    missing = {}
    for init in sorted(PACKAGE.rglob("__init__.py")):
        package = init.parent
        rel = str(package.relative_to(ROOT))
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert doc.strip(), f"{rel}/__init__.py has no docstring"
        if rel in DOCSTRING_EXEMPT:
            continue
        parts = [p.name for p in package.glob("*.py") if p.name != "__init__.py"]
        parts += [p.name + "/" for p in package.iterdir() if (p / "__init__.py").is_file()]
        unnamed = [p for p in sorted(parts) if not re.search(r"(?<![\w/.])" + re.escape(p), doc)]
        if unnamed:
            missing[rel] = unnamed
    assert not missing, f"package docstrings that do not name these files: {missing}"
    for rel in DOCSTRING_EXEMPT:
        assert (ROOT / rel / "__init__.py").is_file(), f"DOCSTRING_EXEMPT names {rel}, which is not a package"
