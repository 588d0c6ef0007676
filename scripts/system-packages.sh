#!/usr/bin/env bash
# Debian packages the tests use (bubblewrap for the sandbox, chromium for the HTML report test,
# postgresql for the PostgreSQL store tests: they run initdb/pg_ctl from /usr/lib/postgresql/*/bin).
# Listed in .ci/apt-packages.txt; installed only when missing and when we may (root).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
list="$root/.ci/apt-packages.txt"
[ -f "$list" ] || exit 0
missing=()
while read -r pkg; do
  [ -z "$pkg" ] || [ "${pkg#\#}" != "$pkg" ] && continue
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done < "$list"
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "[system-packages] not root; please install: ${missing[*]} (tests that need them will skip)" >&2
  exit 0
fi
echo "[system-packages] apt-get install ${missing[*]}" >&2
apt-get update -qq >/dev/null 2>&1 || true
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 \
  || echo "[system-packages] could not install ${missing[*]}; tests that need them will skip" >&2
exit 0
