#!/usr/bin/env bash
# The small ALFWorld runs on the embedded model whose reports are committed in embedded/
# (the first 5 unseen games, 3 trials each).
# Usage: alfworld_runs/embedded.sh [NAME...]   (default: all; NAME = a config in configs/)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(react_none react_reflexion)
exec scripts/embedded_runs.sh alfworld_runs 3 "ALFWorld on the embedded model" "${names[@]}"
