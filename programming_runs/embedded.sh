#!/usr/bin/env bash
# The small HumanEval runs on the embedded model whose reports are committed in embedded/
# (the first 5 problems, 2 trials each).
# Usage: programming_runs/embedded.sh [NAME...]   (default: all; NAME = a config in configs/)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(humaneval_none humaneval_reflexion)
exec scripts/embedded_runs.sh programming_runs 2 "HumanEval on the embedded model" "${names[@]}"
