#!/usr/bin/env bash
# Install everything the suite needs into .venv/ and run the whole test suite.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$root/scripts/bootstrap.sh" test
"$root/scripts/system-packages.sh"
cd "$root"
exec .venv/bin/python -m pytest "$@"
