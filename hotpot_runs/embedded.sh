#!/usr/bin/env bash
# The small HotpotQA runs on the embedded model whose reports are committed in embedded/.
# Each run: the first 5 of the paper's 100 hard questions, 3 trials, no response cache (so
# tokens and times are real). Runs that already exist are resumed, not redone.
# Usage: hotpot_runs/embedded.sh [NAME...]   (default: all; NAME = a config in configs/)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
reinagent=.venv/bin/reinagent
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(cot_context_none cot_context_last_attempt cot_context_reflexion
  cot_context_last_attempt_and_reflexion cot_no_context_none cot_no_context_reflexion react_none react_reflexion)
for name in "${names[@]}"; do
  dir=hotpot_runs/embedded/$name
  if [ -f "$dir/spec.json" ]; then
    "$reinagent" resume "$dir" --quiet
  else
    "$reinagent" run --config "hotpot_runs/configs/$name.yaml" --num-envs 5 --num-trials 3 --no-cache \
      --run-dir "$dir" --quiet
  fi
  "$reinagent" report "$dir" > "$dir/report.md"
done
# One comparison of every embedded run: markdown, HTML with drill-down, JSON and the figure.
"$reinagent" report hotpot_runs/embedded > hotpot_runs/embedded/REPORT.md
"$reinagent" report hotpot_runs/embedded --format json > hotpot_runs/embedded/report.json
"$reinagent" report hotpot_runs/embedded --format html --output hotpot_runs/embedded/report.html \
  --plot hotpot_runs/embedded/success_by_trial.png --title "HotpotQA on the embedded model"
