#!/usr/bin/env bash
# JupyterLab on notebooks/, from the repo's .venv/. As root (containers, CI machines) Jupyter
# refuses to start without --allow-root, so the flag is added then, and only then.
#   scripts/notebooks.sh [more jupyter lab flags, e.g. --no-browser --port 8890]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jupyter="$root/.venv/bin/jupyter"
[ -x "$jupyter" ] || { echo "error: $jupyter is missing; install the notebooks extra: .venv/bin/pip install -e '.[notebooks]'" >&2; exit 2; }
flags=()
[ "$(id -u)" = 0 ] && flags+=(--allow-root)
echo "jupyter lab $root/notebooks ${flags[*]:-}" >&2
exec "$jupyter" lab "$root/notebooks" "${flags[@]}" "$@"
