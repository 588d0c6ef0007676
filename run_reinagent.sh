#!/usr/bin/env bash
# Paper-style entry point (the original Reflexion scripts' parameters), on top of `reinagent`.
#
#   ./run_reinagent.sh                      the default demo: HotpotQA, cot-context, REFLEXION,
#                                           3 trials on 5 questions, embedded model, offline
#   ./run_reinagent.sh --num_trials 10 --num_envs 134 --run_name alf1 --use_memory --benchmark alfworld
#   ./run_reinagent.sh --is_resume --resume_dir runs/alf1 [--start_trial_num 4] [--num_trials 12]
#
# --use_memory      carry reflections between trials (strategy reflexion); without it the
#                   strategy is none, unless --strategy names one explicitly
# --run_name NAME   the run directory is runs/NAME in this repository
# --is_resume       continue the run in --resume_dir (a path from here, or from this repository,
#                   or a --run_name); --start_trial_num K redoes trials K and later; --num_trials N
#                   extends it to N trials
# --benchmark, --agent, --strategy, --model are passed on; any other --flag goes to `reinagent run`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
case " $* " in *" -h "*|*" --help "*)  # the comment above, before any install
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
"$root/scripts/bootstrap.sh" demo
reinagent="$root/.venv/bin/reinagent"

demo=0; [ $# -eq 0 ] && demo=1
num_trials=3; num_trials_given=""; num_envs=5; run_name=""; use_memory=0; is_resume=0; resume_dir=""; start_trial=""
benchmark=hotpotqa; agent=""; strategy=""; model=local; extra=()
need() { [ $# -ge 2 ] || { echo "error: $1 needs a value" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    --num_trials) need "$@"; num_trials="$2"; num_trials_given="$2"; shift 2 ;;
    --num_envs) need "$@"; num_envs="$2"; shift 2 ;;
    --run_name) need "$@"; run_name="$2"; shift 2 ;;
    --use_memory) use_memory=1; shift ;;
    --is_resume) is_resume=1; shift ;;
    --resume_dir) need "$@"; resume_dir="$2"; shift 2 ;;
    --start_trial_num) need "$@"; start_trial="$2"; shift 2 ;;
    --benchmark) need "$@"; benchmark="$2"; shift 2 ;;
    --agent) need "$@"; agent="$2"; shift 2 ;;
    --strategy) need "$@"; strategy="$2"; shift 2 ;;
    --model) need "$@"; model="$2"; shift 2 ;;
    *) extra+=("$1"); shift ;;
  esac
done

if [ "$is_resume" = 1 ]; then
  [ -n "$resume_dir" ] || { echo "error: --is_resume needs --resume_dir DIR" >&2; exit 2; }
  # --run_name writes under this repository; find the run the same way from any directory
  if [ ! -e "$resume_dir" ] && [ "${resume_dir#/}" = "$resume_dir" ]; then
    for candidate in "$root/$resume_dir" "$root/runs/$resume_dir"; do
      [ -e "$candidate" ] && { resume_dir="$candidate"; break; }
    done
  fi
  [ -e "$resume_dir" ] || { echo "error: --resume_dir $resume_dir does not exist here, in $root or in $root/runs" >&2; exit 2; }
  args=(resume "$resume_dir")
  [ -n "$start_trial" ] && args+=(--from-trial "$start_trial")
  [ -n "$num_trials_given" ] && args+=(--num-trials "$num_trials_given")
  rc=0; "$reinagent" "${args[@]}" "${extra[@]}" >/dev/null || rc=$?
  run_dir="$resume_dir"
else
  if [ -z "$strategy" ]; then
    if [ "$demo" = 1 ] || [ "$use_memory" = 1 ]; then strategy=reflexion; else strategy=none; fi
  fi
  [ "$demo" = 1 ] && agent=cot-context
  [ -n "$run_name" ] || run_name="${benchmark}-${agent:-default}-${strategy}-$(date +%Y%m%d-%H%M%S)"
  run_dir="$root/runs/$run_name"
  args=(run --benchmark "$benchmark" --strategy "$strategy" --num-trials "$num_trials"
        --num-envs "$num_envs" --model "$model" --run-dir "$run_dir")
  [ -n "$agent" ] && args+=(--agent "$agent")
  # stdout only names the report files: this script prints its own lines, once
  rc=0; "$reinagent" "${args[@]}" "${extra[@]}" >/dev/null || rc=$?
fi
# 3 and 4: the run finished with errored (task, trial)s (see README "Exit codes"): still report
case "$rc" in 0|3|4) ;; *) exit "$rc" ;; esac
# `reinagent run` and `resume` wrote report.md and report.html into the run directory
"$reinagent" report "$run_dir" --format json --output "$run_dir/report.json"  # never through a link at that name
cat "$run_dir/report.md"
echo "run:    $run_dir"
echo "report: $run_dir/report.html (the page with curves and each task's trials)"
echo "        $run_dir/report.md, $run_dir/report.json"
exit "$rc"
