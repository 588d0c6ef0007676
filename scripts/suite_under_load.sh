#!/usr/bin/env bash
# Run the whole test suite N times in a row while two CPU-bound processes compete for the cores:
# the suite must pass every time, on a busy machine, with no test leaning on timing.
#
#   scripts/suite_under_load.sh                 3 runs on a fresh clone of HEAD
#   scripts/suite_under_load.sh --runs 5        5 runs
#   scripts/suite_under_load.sh --tree          the current working tree instead of a clone
#   scripts/suite_under_load.sh --bootstrap     the clone gets its own .venv (scripts/bootstrap.sh
#                                               test), as a new user's would; not timed
#   scripts/suite_under_load.sh -- -x tests/test_hotpotqa.py    arguments after -- go to pytest
#
# Without --bootstrap the clone borrows this checkout's .venv (a symlink) with PYTHONPATH set
# to the clone, so the clone's code is what runs. Each run prints its pytest summary line and
# its wall time; logs are kept in the directory printed at the start. Exit status 0 only if
# every run passed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=3
mode=clone
bootstrap=0
pytest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="${2:?--runs needs a number}"; shift 2 ;;
    --runs=*) runs="${1#--runs=}"; shift ;;
    --tree) mode=tree; shift ;;
    --bootstrap) bootstrap=1; shift ;;
    --) shift; pytest_args=("$@"); break ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1; valid: --runs N, --tree, --bootstrap, -- PYTEST_ARGS" >&2; exit 2 ;;
  esac
done
case "$runs" in
  ''|*[!0-9]*|0) echo "--runs must be a positive integer, got '$runs'" >&2; exit 2 ;;
esac

# The Debian packages the tests use (bubblewrap, chromium, postgresql), as run_tests.sh does:
# without bubblewrap the sandbox tests fail rather than skip (a benchmark refuses the weak sandbox).
"$root/scripts/system-packages.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/suite-under-load.XXXXXX")"
hogs=()
cleanup() {
  # only the processes this script started
  for pid in "${hogs[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${hogs[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$mode" = clone ]; then
  tree="$work/reinagent"
  git clone --quiet "$root" "$tree"
  echo "[suite] fresh clone of $(git -C "$tree" rev-parse --short HEAD) in $tree"
  if [ "$bootstrap" = 1 ]; then
    echo "[suite] bootstrapping the clone's own .venv (not timed)"
    "$tree/scripts/bootstrap.sh" test
  else
    [ -x "$root/.venv/bin/python" ] || { echo "no $root/.venv: run scripts/bootstrap.sh test, or pass --bootstrap" >&2; exit 2; }
    ln -s "$root/.venv" "$tree/.venv"
    export PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}"
  fi
else
  tree="$root"
  echo "[suite] the working tree $tree"
fi
python="$tree/.venv/bin/python"
echo "[suite] logs in $work; $runs run(s) of: pytest ${pytest_args[*]:-(whole suite)}"

# Two CPU-bound processes beside the suite for its whole length.
for _ in 1 2; do
  yes >/dev/null &
  hogs+=("$!")
done
echo "[suite] CPU hogs: ${hogs[*]} on $(nproc) core(s)"

failed=0
for i in $(seq 1 "$runs"); do
  log="$work/run-$i.log"
  start=$(date +%s)
  set +e
  (cd "$tree" && "$python" -m pytest -q -p no:cacheprovider "${pytest_args[@]}") >"$log" 2>&1
  status=$?
  set -e
  elapsed=$(( $(date +%s) - start ))
  summary="$(grep -E '^=*.*[0-9]+ (passed|failed|error|errors|skipped|deselected)' "$log" | tail -n 1 | sed 's/^=* *//; s/ *=*$//')"
  [ -n "$summary" ] || summary="no pytest summary (exit status $status; see $log)"
  verdict=PASS
  if [ "$status" -ne 0 ]; then
    verdict=FAIL
    failed=$((failed + 1))
  fi
  printf '[suite] run %d/%d: %s  %s  (%dm%02ds)\n' "$i" "$runs" "$verdict" "$summary" $((elapsed / 60)) $((elapsed % 60))
  if [ "$status" -ne 0 ]; then
    grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/[suite]   /' || true
  fi
done

if [ "$failed" -eq 0 ]; then
  echo "[suite] all $runs run(s) passed under load"
else
  echo "[suite] $failed of $runs run(s) failed; logs in $work"
  exit 1
fi
