#!/usr/bin/env bash
# The embedded model's NONE vs REFLEXION experiment on the paper's 100 hard HotpotQA questions
# (or, with BENCH=alfworld, all 134 unseen ALFWorld games), with constrained actions, 3 trials:
# does Reflexion help a 135M model at all, and is it more than chance? Each run's peak RSS is sampled every 5 s beside it (flat across trials = records
# are streamed, not held). Runs that exist are resumed, not redone.
#
#   scripts/embedded_experiment.sh                  cot_context_none cot_context_reflexion
#   scripts/embedded_experiment.sh react_none react_reflexion
#   BENCH=alfworld scripts/embedded_experiment.sh    react_none react_reflexion, 134 games
#   MODEL=local:PATH TRIALS=5 scripts/embedded_experiment.sh ...
#
# Output: hotpot_runs/embedded100/NAME/ (records, spec, report.md, rss.tsv) and
# hotpot_runs/embedded100/REPORT.md (with the McNemar tests of report/significance.py);
# alfworld_runs/embedded134/ for ALFWorld.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
model="${MODEL:-ov}"
trials="${TRIALS:-3}"
bench="${BENCH:-hotpot}"
case "$bench" in
  hotpot) tasks="${TASKS:-100}"; defaults=(cot_context_none cot_context_reflexion) ;;
  alfworld) tasks="${TASKS:-134}"; defaults=(react_none react_reflexion) ;;
  *) echo "BENCH must be hotpot or alfworld, got '$bench'" >&2; exit 2 ;;
esac
out="${bench}_runs/embedded$tasks"
reinagent=.venv/bin/reinagent
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${defaults[@]}")
mkdir -p "$out"

sample_rss() {  # PID FILE: "unix_time rss_kib" every 5 s while PID lives (children included)
  local pid="$1" file="$2"
  while kill -0 "$pid" 2>/dev/null; do
    local rss
    rss=$(ps -o rss= --ppid "$pid" -p "$pid" 2>/dev/null | awk '{s+=$1} END {print s+0}')
    echo "$(date +%s) $rss" >> "$file"
    sleep 5
  done
}

for name in "${names[@]}"; do
  dir="$out/$name"
  if [ -f "$dir/spec.json" ]; then
    "$reinagent" resume "$dir" --quiet &
  else
    "$reinagent" run --config "${bench}_runs/configs/$name.yaml" --model "$model" --constrained \
      --num-envs "$tasks" --num-trials "$trials" --run-dir "$dir" --quiet &
  fi
  pid=$!
  sample_rss "$pid" "$out/$name.rss.tsv" &
  sampler=$!
  status=0
  wait "$pid" || status=$?
  wait "$sampler" 2>/dev/null || true
  mv -f "$out/$name.rss.tsv" "$dir/rss.tsv" 2>/dev/null || true
  "$reinagent" report "$dir" --output "$dir/report.md"  # never through a link at that name
  echo "[experiment] $name exited $status; peak RSS $(awk '$2>m{m=$2} END{printf "%.0f MiB", m/1024}' "$dir/rss.tsv")"
done
"$reinagent" report "$out" --output "$out/REPORT.md"  # never through a link at that name
"$reinagent" report "$out" --format json --output "$out/report.json"  # never through a link at that name
echo "[experiment] report: $out/REPORT.md"
