"""The HTML report in a real browser: headless Debian chromium renders it, a small script checks
what rendered (tables, the plots' decoded size, the drill-down) and writes the verdict into the
DOM, which `--dump-dom` hands back."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from reinagent.report.html import report_html
from reinagent.report.loading import load
from tests.test_report import COMPLETE, make_run

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason="needs Debian's chromium (apt-get install chromium; listed in .ci/apt-packages.txt)"),
]

# Runs after 'load' (images decoded): measures what the browser actually laid out.
PROBE = """<script>
window.addEventListener('load', () => {
  const task = document.querySelector('details.task');
  task.open = true;
  const trial = task.querySelector('details.trial');
  trial.open = true;
  const imgs = [...document.querySelectorAll('img.plot')];
  const out = {
    tables: document.querySelectorAll('table').length,
    trial_rows: document.querySelectorAll('table.trials tbody tr').length,
    images: imgs.map(i => [i.id, i.complete, i.naturalWidth, i.naturalHeight, i.getBoundingClientRect().width]),
    tasks: document.querySelectorAll('details.task').length,
    steps_visible: trial.querySelector('ol.steps').checkVisibility(),
    steps_height: trial.querySelector('ol.steps').getBoundingClientRect().height,
    // closed <details> content is laid out but not rendered, so ask the renderer, not the box
    closed_reflection_visible: document.querySelector('details.task:not([open]) blockquote.reflection')
        .checkVisibility(),
    comparison: !!document.querySelector('#comparison table'),
  };
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script></body>"""


def chromium(*args: str, profile: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--virtual-time-budget=5000"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    one = make_run(root / "runs" / "reflexion", COMPLETE)
    two = make_run(root / "runs" / "none", {**COMPLETE, "c": [False, False, False]}, strategy="none")
    path = root / "report.html"
    path.write_text(report_html(load([one, two])), encoding="utf-8")
    return path


def test_report_renders_in_chromium(page, tmp_path):
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE), encoding="utf-8")
    proc = chromium("--dump-dom", probed.as_uri(), profile=tmp_path / "profile")
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"the probe did not run; chromium said: {proc.stderr[-2000:]}"
    result = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert result["comparison"]
    assert result["tables"] >= 1 + 2 * 2  # comparison + per run (trials, usage)
    assert result["trial_rows"] == 6  # 3 trials x 2 runs
    assert [i[0] for i in result["images"]] == ["plot-success", "plot-metric"]
    for _, complete, width, height, shown in result["images"]:
        assert complete and width > 300 and height > 200 and shown > 100
    assert result["tasks"] == 10
    assert result["steps_visible"] and result["steps_height"] > 0, "an opened trial shows its steps"
    assert result["closed_reflection_visible"] is False, "a closed task hides its drill-down"


def test_screenshot(page, tmp_path):
    shot = tmp_path / "shot.png"
    proc = chromium(f"--screenshot={shot}", "--window-size=1280,1600", page.as_uri(), profile=tmp_path / "profile")
    assert shot.exists(), proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a blank page is a few KB


# Issue 14 item 8: five runs at 1280 px, with the long labels real runs have (scripted model paths).
WIDTH_PROBE = """<script>
window.addEventListener('load', () => {
  const table = document.querySelector('#comparison table');
  const heads = [...table.querySelectorAll('thead th')];
  const out = {
    columns: heads.length,
    viewport: document.documentElement.clientWidth,
    page_scroll: document.documentElement.scrollWidth,
    rights: heads.map(th => th.getBoundingClientRect().right),
    scroller: table.parentElement.scrollWidth - table.parentElement.clientWidth,
  };
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script></body>"""


def test_five_runs_fit_1280px(tmp_path):
    runs = []
    for i, strategy in enumerate(["none", "last_attempt", "reflexion", "last_attempt_and_reflexion", "reflexion"]):
        model = f"scripted:/tmp/pytest-of-researcher/pytest-12/test_compare{i}/scripts/actor_model_{i}.yaml"
        runs.append(make_run(tmp_path / "runs" / f"run{i}", COMPLETE, strategy=strategy, model=model))
    page = tmp_path / "five.html"
    page.write_text(report_html(load(runs)).replace("</body>", WIDTH_PROBE), encoding="utf-8")
    proc = chromium("--dump-dom", "--window-size=1280,900", page.as_uri(), profile=tmp_path / "profile")
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"the probe did not run; chromium said: {proc.stderr[-2000:]}"
    result = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert result["columns"] == 6  # the quantity column + 5 runs
    assert result["page_scroll"] <= result["viewport"], "the page itself must not scroll sideways"
    assert max(result["rights"]) <= result["viewport"], f"a run's column is cut: {result}"
    assert result["scroller"] <= 1, "every column is visible without scrolling the table"
