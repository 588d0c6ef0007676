#!/usr/bin/env bash
# The small ALFWorld runs on the embedded model whose reports are committed in embedded/.
# Each run: the first 5 unseen games, 3 trials, no response cache (so tokens and times are
# real). Runs that already exist are resumed, not redone.
# Usage: alfworld_runs/embedded.sh [NAME...]   (default: all; NAME = a config in configs/)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
reinagent=.venv/bin/reinagent
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(react_none react_reflexion)
for name in "${names[@]}"; do
  dir=alfworld_runs/embedded/$name
  if [ -f "$dir/spec.json" ]; then
    "$reinagent" resume "$dir" --quiet
  else
    "$reinagent" run --config "alfworld_runs/configs/$name.yaml" --num-envs 5 --num-trials 3 --no-cache \
      --run-dir "$dir" --quiet
  fi
  "$reinagent" report "$dir" > "$dir/report.md"
done
# One comparison of every embedded run: markdown, HTML with drill-down, JSON and the figure.
"$reinagent" report alfworld_runs/embedded > alfworld_runs/embedded/REPORT.md
"$reinagent" report alfworld_runs/embedded --format json > alfworld_runs/embedded/report.json
"$reinagent" report alfworld_runs/embedded --format html --output alfworld_runs/embedded/report.html \
  --plot alfworld_runs/embedded/success_by_trial.png --title "ALFWorld on the embedded model"
