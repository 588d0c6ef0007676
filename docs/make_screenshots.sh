#!/usr/bin/env bash
# Rebuild docs/report-screenshot.png (top of a report: comparison and learning curves) and
# docs/report-drilldown.png (one question's trials opened) from the committed HotpotQA runs,
# with headless Debian chromium. Usage: docs/make_screenshots.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
.venv/bin/reinagent report hotpot_runs/embedded/cot_context_none hotpot_runs/embedded/cot_context_reflexion \
  --format html -o "$tmp/report.html" --title "HotpotQA, CoT with context, embedded model" 2>/dev/null
# The report itself has no script; these copies add one that opens a question's drill-down.
python3 - "$tmp" <<'PY'
import sys
tmp = sys.argv[1]
page = open(f"{tmp}/report.html", encoding="utf-8").read()
drill = """<script>window.addEventListener('load', () => {
  const task = document.querySelectorAll('#run-1 details.task')[0];
  task.open = true;
  task.querySelectorAll('details.trial').forEach((t, i) => { t.open = i < 2; });
  const h = document.createElement('h3'); h.textContent = 'Tasks (drill-down)';
  document.body.prepend(task); document.body.prepend(h);
  document.querySelectorAll('body>section,body>h1,body>p').forEach(e => e.style.display = 'none');
});</script></body>"""
open(f"{tmp}/drill.html", "w", encoding="utf-8").write(page.replace("</body>", drill))
PY
shot() {
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$tmp/profile" --hide-scrollbars \
    --virtual-time-budget=3000 --window-size="$3" --screenshot="$2" "file://$1" 2>/dev/null
}
shot "$tmp/report.html" docs/report-screenshot.png 1200,1100
shot "$tmp/drill.html" docs/report-drilldown.png 1200,1300
