"""How fast does the CLI start, and does it stay clear of heavy libraries? (issue 6, part 4)

Times `reinagent --help`, `reinagent list` and `reinagent report DIR` (on a small run made here
with a scripted model) as whole subprocesses, best of N, and runs each verb once more under a
driver that lists which heavy modules ended up imported. Target: under 1 s each, and none of
torch, transformers or litellm imported. Also prints the slowest imports of `reinagent.cli`
(`python -X importtime`), the place to look when the figure grows.

    .venv/bin/python perf/startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FORBIDDEN = ("torch", "transformers", "litellm")
WATCHED = (*FORBIDDEN, "openai", "aiohttp", "httpx", "pandas", "matplotlib", "numpy", "tqdm")

# Runs one verb in-process, then reports (on stderr, after a marker) which watched modules it
# imported: stdout stays the verb's own output.
DRIVER = """
import json, sys
sys.argv = ["reinagent", *sys.argv[1:]]
from reinagent.cli import main
try:
    main()
except SystemExit:
    pass
watched = {watched!r}
print("@@" + json.dumps(sorted(m for m in watched if m in sys.modules)), file=sys.stderr)
"""


def small_run(tmp: Path) -> Path:
    from reinagent import run

    script = tmp / "model.yaml"
    script.write_text('default: "Thought: a guess.\\nAction: Finish[wrong]"\n')
    with contextlib.redirect_stderr(io.StringIO()):
        return Path(run(benchmark="hotpotqa", agent="cot-context", num_trials=2, num_envs=3,
                        model=f"scripted:{script}", run_dir=str(tmp / "run"), cache=False, progress=False))


def best_wall(args: list[str], repeat: int, env: dict[str, str]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "reinagent.cli", *args], cwd=ROOT, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        best = min(best, time.perf_counter() - start)
    return best


def imported(args: list[str], env: dict[str, str]) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", DRIVER.format(watched=WATCHED), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)
    marker = [line for line in proc.stderr.splitlines() if line.startswith("@@")]
    return json.loads(marker[-1][2:])


def slowest_imports(env: dict[str, str], n: int = 8) -> list[tuple[float, str]]:
    """(cumulative seconds, module) of the n slowest imports under `import reinagent.cli`."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import reinagent.cli"], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=True)
    rows = []
    for line in proc.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[0].strip().isdigit():
            rows.append((int(parts[1]) / 1e6, parts[2].strip()))
    return sorted(rows, reverse=True)[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per command; the best is kept")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = small_run(Path(tmp))
        commands = {"reinagent --help": ["--help"], "reinagent list": ["list"],
                    "reinagent report DIR": ["report", str(run_dir)]}
        print(f"{'command':<22}{'wall (best of ' + str(args.repeat) + ')':>20}   heavy modules imported")
        for name, argv in commands.items():
            wall = best_wall(argv, args.repeat, env)
            mods = imported(argv, env)
            bad = [m for m in mods if m in FORBIDDEN]
            failed |= bool(bad) or wall >= 1.0
            print(f"{name:<22}{wall:>18.3f} s   {', '.join(mods) or 'none'}"
                  f"{'   <-- FORBIDDEN: ' + ', '.join(bad) if bad else ''}")
    print("slowest imports of reinagent.cli (cumulative):")
    for seconds, module in slowest_imports(env):
        print(f"  {seconds * 1000:8.1f} ms  {module.strip()}")
    print(f"targets (< 1 s, none of {', '.join(FORBIDDEN)}): {'MISSED' if failed else 'met'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
