#!/usr/bin/env bash
# Small runs on the embedded model for one experiment folder, and their reports.
# Each run: the first 5 tasks, TRIALS trials, no response cache (so tokens and times are real).
# Runs that already exist are resumed, not redone.
# Usage: scripts/embedded_runs.sh FOLDER TRIALS "TITLE" NAME...   (NAME = a config in FOLDER/configs/)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
folder="$1"; trials="$2"; title="$3"; shift 3
reinagent=.venv/bin/reinagent
for name in "$@"; do
  dir="$folder/embedded/$name"
  if [ -f "$dir/spec.json" ]; then
    "$reinagent" resume "$dir" --quiet
  else
    "$reinagent" run --config "$folder/configs/$name.yaml" --num-envs 5 --num-trials "$trials" --no-cache \
      --run-dir "$dir" --quiet
  fi
  "$reinagent" report "$dir" --output "$dir/report.md"  # never through a link at that name
done
# One comparison of every embedded run: markdown, HTML with drill-down, JSON and the figure.
"$reinagent" report "$folder/embedded" --output "$folder/embedded/REPORT.md"  # never through a link at that name
"$reinagent" report "$folder/embedded" --format json --output "$folder/embedded/report.json"  # never through a link at that name
"$reinagent" report "$folder/embedded" --format html --output "$folder/embedded/report.html" \
  --plot "$folder/embedded/success_by_trial.png" --title "$title"
