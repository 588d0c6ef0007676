#!/usr/bin/env bash
# Install everything the suite needs into .venv/ and run the whole test suite.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# system packages first: the alfworld extra compiles with cmake/g++; bubblewrap and chromium
# are the sandbox and the browser test
"$root/scripts/system-packages.sh"
"$root/scripts/bootstrap.sh" test
cd "$root"
exec .venv/bin/python -m pytest "$@"
