#!/usr/bin/env bash
# The small HotpotQA runs on the embedded model whose reports are committed in embedded/
# (the first 5 of the paper's 100 hard questions, 3 trials each).
# Usage: hotpot_runs/embedded.sh [NAME...]   (default: all; NAME = a config in configs/)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(cot_context_none cot_context_last_attempt cot_context_reflexion
  cot_context_last_attempt_and_reflexion cot_no_context_none cot_no_context_reflexion react_none react_reflexion)
exec scripts/embedded_runs.sh hotpot_runs 3 "HotpotQA on the embedded model" "${names[@]}"
