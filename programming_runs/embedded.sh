#!/usr/bin/env bash
# The small programming runs on the embedded model whose reports are committed in embedded/.
# Each run: the first 5 HumanEval problems, 2 trials, no response cache (so tokens and times are
# real). Runs that already exist are resumed, not redone.
# Usage: programming_runs/embedded.sh [NAME...]   (default: all; NAME = a config in configs/)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
reinagent=.venv/bin/reinagent
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(humaneval_none humaneval_reflexion)
for name in "${names[@]}"; do
  dir=programming_runs/embedded/$name
  if [ -f "$dir/spec.json" ]; then
    "$reinagent" resume "$dir" --quiet
  else
    "$reinagent" run --config "programming_runs/configs/$name.yaml" --num-envs 5 --num-trials 2 --no-cache \
      --run-dir "$dir" --quiet
  fi
  "$reinagent" report "$dir" > "$dir/report.md"
done
# One comparison of every embedded run: markdown, HTML with drill-down, JSON and the figure.
"$reinagent" report programming_runs/embedded > programming_runs/embedded/REPORT.md
"$reinagent" report programming_runs/embedded --format json > programming_runs/embedded/report.json
"$reinagent" report programming_runs/embedded --format html --output programming_runs/embedded/report.html \
  --plot programming_runs/embedded/success_by_trial.png --title "HumanEval on the embedded model"
