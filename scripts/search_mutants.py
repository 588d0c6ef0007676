"""Mutation check of the search, sampling and trial-loop tests (issue 26 §5, issue 35 §7): each
mutant below is applied to a scratch copy of the package, the tests it names run against it, and
the mutant must fail at least one of them. Prints one line per mutant and exits 1 if any survives.

    .venv/bin/python scripts/search_mutants.py              # all mutants
    .venv/bin/python scripts/search_mutants.py tot-keep-1   # one
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEARCH = ("tests/test_lats.py", "tests/test_sampling.py", "tests/test_search.py",
          "-k", "not alfworld and not on_code and not cli")  # the slow CLI runs: the others cover these lines
LOOP = ("tests/test_strategy.py", "tests/test_resume.py",
        "-k", "reflection_after or memory_window or memory_size or repair or memory_before")


@dataclass(frozen=True)
class Mutant:
    path: str
    old: str  # the original text, exactly once in `path`
    new: str
    tests: tuple[str, ...] = SEARCH  # pytest arguments: the tests that must kill it


MUTANTS = {
    # the search (issue 26 §5)
    "uct-no-exploitation": Mutant("reinagent/rollouts/mcts.py", "return q + c * math.sqrt(", "return c * math.sqrt("),
    "uct-no-exploration": Mutant("reinagent/rollouts/mcts.py",
                                 "return q + c * math.sqrt(math.log(parent_visits + 1) / (visits + 1))", "return q"),
    "select-min": Mutant("reinagent/rollouts/mcts.py", "node = max(open_kids,", "node = min(open_kids,"),
    "simulate-least-valuable": Mutant("reinagent/rollouts/mcts.py", "return max(kids, key=lambda k: (self.prior(k)",
                                      "return min(kids, key=lambda k: (self.prior(k)"),
    "tot-ascending": Mutant("reinagent/rollouts/tot.py", "key=lambda i: (-(search.nodes[i].value or 0.0), i)",
                            "key=lambda i: ((search.nodes[i].value or 0.0), i)"),
    "tot-keep-1": Mutant("reinagent/rollouts/tot.py", "[: cfg.tot_keep]", "[:1]"),
    "value-first-sample": Mutant("reinagent/rollouts/value.py",
                                 "return sum(values) / len(values) if values else NEUTRAL",
                                 "return values[0] if values else NEUTRAL"),
    "seed-constant": Mutant("reinagent/llm/base.py", 'hashlib.sha256(f"{seed}:{rollout_id}".encode())',
                            'hashlib.sha256(f"{seed}".encode())'),
    # the paper's loops (issue 35 §7)
    "mcts-no-failed-backup": Mutant("reinagent/rollouts/mcts.py", "self.backprop(k, s.nodes[k].reward or 0.0)",
                                    "pass"),
    "search-reflections-unbounded": Mutant(
        "reinagent/rollouts/search.py",
        "if failure in self.reflected or (self.keep is not None and len(self.reflected) >= self.keep):",
        "if failure in self.reflected:"),
    "search-reflection-per-node": Mutant("reinagent/rollouts/search.py", "if failure in self.reflected or (",
                                         "if ("),
    "search-children-not-deduplicated": Mutant("reinagent/rollouts/search.py", "if step in seen[p]:", "if False:"),
    "reflect-after-success": Mutant(
        "reinagent/episode.py", "if not evaluation.success and trial < cfg.num_trials",
        "if trial < cfg.num_trials", LOOP),
    "resume-ignores-memory-size": Mutant(
        "reinagent/runner.py", "config = RunConfig(**{**spec.config,",
        'config = RunConfig(**{**{k: v for k, v in spec.config.items() if k != "memory_size"},', LOOP),
    "memory-window-ignored": Mutant("reinagent/memory.py", "memory = EpisodicMemory(window=window)",
                                    "memory = EpisodicMemory()", LOOP),
    "memory-from-later-trials": Mutant("reinagent/memory.py", "for k in range(1, trial):",
                                       "for k in range(1, 1000):", LOOP),
    "resume-keeps-trials-after-a-lost-one": Mutant("reinagent/resuming.py", "lost = lost_trials(records)",
                                                   "lost = {}", LOOP),
}


def failures(name: str | None, tests: tuple[str, ...]) -> list[str]:
    """The tests that fail on a scratch copy with mutant `name` applied (None: unmutated)."""
    with tempfile.TemporaryDirectory() as tmp:
        for folder in ("reinagent", "tests"):
            shutil.copytree(ROOT / folder, Path(tmp) / folder, ignore=shutil.ignore_patterns("__pycache__"))
        if name is not None:
            mutant = MUTANTS[name]
            target = Path(tmp) / mutant.path
            text = target.read_text(encoding="utf-8")
            if text.count(mutant.old) != 1:
                raise SystemExit(f"{name}: the original text is not in {mutant.path} exactly once; update this script")
            target.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
                              cwd=tmp, env={**os.environ, "PYTHONPATH": tmp},
                              capture_output=True, text=True)
    failed = [line.split(" - ")[0].removeprefix("FAILED ") for line in proc.stdout.splitlines()
              if line.startswith("FAILED")]
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not failed):
        raise SystemExit(f"pytest could not run ({name or 'unmutated'}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return failed


def check(name: str) -> bool:
    """True when the mutant is killed (some test fails)."""
    failed = failures(name, MUTANTS[name].tests)
    print(f"{name}: {'killed by ' + ', '.join(failed) if failed else 'SURVIVED'}", flush=True)
    return bool(failed)


if __name__ == "__main__":
    names = sys.argv[1:] or list(MUTANTS)
    unknown = [n for n in names if n not in MUTANTS]
    if unknown:
        raise SystemExit(f"unknown mutant {unknown[0]!r}; valid: {', '.join(MUTANTS)}")
    for tests in dict.fromkeys(MUTANTS[n].tests for n in names):  # each test set once, unmutated
        baseline = failures(None, tests)
        if baseline:
            raise SystemExit(f"the unmutated tests fail already: {', '.join(baseline)}")
    survived = [n for n in names if not check(n)]
    sys.exit(1 if survived else 0)
