"""perf/rl_throughput.py's rollout / generate measurement (issue 53): a tiny interleaved run in a
subprocess, checked for its structure only (rounds, alternation, the same sampled tokens, the
fields it prints), never for a time or a ratio; and its bad input as one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import ROOT, one_line_error
from .test_rl import tiny_model  # noqa: F401  (the module-scoped tiny model fixture)

pytest.importorskip("torch")
pytest.importorskip("transformers")

SCRIPT = ROOT / "perf" / "rl_throughput.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "REINAGENT_TORCH_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600,
                          env=env, cwd=ROOT)


def test_interleaved_rounds_print_the_median_ratio_and_its_spread(tiny_model):  # noqa: F811
    proc = _run("--model", f"local:{tiny_model}", "--steps", "0", "--rounds", "4", "--batch-size", "2",
                "--group-size", "2", "--max-response-length", "4", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout  # --json: stdout holds only the JSON line
    result = json.loads(lines[0])
    assert result["rounds"] == 4 and len(result["ratios"]) == 4
    # the rounds alternate which of the two runs first, so drift in the load falls on both
    assert result["first"] == ["rollout", "generate", "rollout", "generate"]
    # both start from the round's seed and sample the same tokens: a like-for-like comparison
    assert result["same_tokens_rounds"] == 4
    ratios = sorted(result["ratios"])
    assert result["ratio_min"] == ratios[0] and result["ratio_max"] == ratios[-1]
    assert ratios[0] <= result["ratio_q1"] <= result["ratio_median"] <= result["ratio_q3"] <= ratios[-1]
    assert len(result["cpu_ratios"]) == 4
    assert min(result["cpu_ratios"]) == result["cpu_ratio_min"] <= result["cpu_ratio_median"] <= result["cpu_ratio_max"]
    assert result["rollout_tok_s"] > 0 and result["generate_tok_s"] > 0 and result["torch_threads"] == 1
    # the human-readable lines go to stderr under --json
    assert "rollout / generate: median" in proc.stderr and "quartiles" in proc.stderr
    assert "per round (r: rollout first, g: generate first): r" in proc.stderr and "over CPU seconds: median" in proc.stderr


@pytest.mark.parametrize("args, needle", [
    (("--rounds", "0"), "--rounds"),
    (("--model", "local:/no/such/model", "--steps", "0"), "/no/such/model"),
], ids=["rounds", "model"])
def test_bad_input_is_one_line(args, needle):
    proc = _run(*args)
    assert proc.returncode == 2
    one_line_error(proc, needle)
