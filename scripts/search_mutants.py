"""Mutation check of the search and sampling tests (issue 26 §5): each mutant below is applied to a
scratch copy of the package, the search tests run against it, and the mutant must fail at least
one of them. Prints one line per mutant and exits 1 if any mutant survives.

    .venv/bin/python scripts/search_mutants.py              # all mutants
    .venv/bin/python scripts/search_mutants.py tot-keep-1   # one
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["tests/test_lats.py", "tests/test_sampling.py", "tests/test_search.py"]
SKIP = "not alfworld and not on_code and not cli"  # the slow CLI runs: the others cover these lines

# name -> (file, original text, mutated text)
MUTANTS = {
    "uct-no-exploitation": ("reinagent/rollouts/mcts.py", "return q + c * math.sqrt(", "return c * math.sqrt("),
    "uct-no-exploration": ("reinagent/rollouts/mcts.py",
                           "return q + c * math.sqrt(math.log(parent_visits + 1) / (visits + 1))", "return q"),
    "select-min": ("reinagent/rollouts/mcts.py", "node = max(open_kids,", "node = min(open_kids,"),
    "simulate-least-valuable": ("reinagent/rollouts/mcts.py", "return max(kids, key=lambda k: (self.prior(k)",
                                "return min(kids, key=lambda k: (self.prior(k)"),
    "tot-ascending": ("reinagent/rollouts/tot.py", "key=lambda i: (-(search.nodes[i].value or 0.0), i)",
                      "key=lambda i: ((search.nodes[i].value or 0.0), i)"),
    "tot-keep-1": ("reinagent/rollouts/tot.py", "[: cfg.tot_keep]", "[:1]"),
    "value-first-sample": ("reinagent/rollouts/value.py", "return sum(values) / len(values) if values else NEUTRAL",
                           "return values[0] if values else NEUTRAL"),
    "seed-constant": ("reinagent/llm/base.py", 'hashlib.sha256(f"{seed}:{rollout_id}".encode())',
                      'hashlib.sha256(f"{seed}".encode())'),
}


def failures(name: str | None) -> list[str]:
    """The tests that fail on a scratch copy with mutant `name` applied (None: unmutated)."""
    with tempfile.TemporaryDirectory() as tmp:
        for folder in ("reinagent", "tests"):
            shutil.copytree(ROOT / folder, Path(tmp) / folder, ignore=shutil.ignore_patterns("__pycache__"))
        if name is not None:
            path, old, new = MUTANTS[name]
            target = Path(tmp) / path
            text = target.read_text(encoding="utf-8")
            if text.count(old) != 1:
                raise SystemExit(f"{name}: the original text is not in {path} exactly once; update this script")
            target.write_text(text.replace(old, new), encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", SKIP, *TESTS],
                              cwd=tmp, env={**os.environ, "PYTHONPATH": tmp},
                              capture_output=True, text=True)
    failed = [line.split(" - ")[0].removeprefix("FAILED ") for line in proc.stdout.splitlines()
              if line.startswith("FAILED")]
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not failed):
        raise SystemExit(f"pytest could not run ({name or 'unmutated'}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return failed


def check(name: str) -> bool:
    """True when the mutant is killed (some test fails)."""
    failed = failures(name)
    print(f"{name}: {'killed by ' + ', '.join(failed) if failed else 'SURVIVED'}", flush=True)
    return bool(failed)


if __name__ == "__main__":
    names = sys.argv[1:] or list(MUTANTS)
    unknown = [n for n in names if n not in MUTANTS]
    if unknown:
        raise SystemExit(f"unknown mutant {unknown[0]!r}; valid: {', '.join(MUTANTS)}")
    baseline = failures(None)
    if baseline:
        raise SystemExit(f"the unmutated tests fail already: {', '.join(baseline)}")
    survived = [n for n in names if not check(n)]
    sys.exit(1 if survived else 0)
