"""`reinagent view` as a real server process on a free loopback port: its JSON and HTML
endpoints, live progress of a run that is really running, and (marker `browser`) the pages as
headless Chromium renders them at 1280 px, with the screenshots kept in docs/.

Set REINAGENT_UPDATE_SCREENSHOTS=1 to copy the screenshots into docs/viewer-*.png."""

from __future__ import annotations

import html
import os
import re
import selectors
import shutil
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from reinagent.llm.fake_server import FakeOpenAIServer
from reinagent.runlock import RunLock
from reinagent.store import RECORDS
from tests.conftest import CLI, ROOT
from tests.test_browse import VIVA, make_runs
from tests.test_report import make_run

DEADLINE_S = 120.0  # generous: the machine is shared; every wait polls and ends as soon as it can
HOSTILE = "<script>alert(1)</script>"


def wait_until(predicate, what: str, deadline_s: float = DEADLINE_S, every_s: float = 0.1):
    end = time.monotonic() + deadline_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every_s)


class Viewer:
    """`reinagent view ROOT --port 0` in a subprocess; the URL is read from its first line."""

    def __init__(self, root: Path, cwd: Path = ROOT):
        self.proc = subprocess.Popen([*CLI, "view", str(root), "--port", "0"], cwd=cwd, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})
        line = self._first_line()
        found = re.search(r"viewer: (http://127\.0\.0\.1:\d+)/", line)
        assert found, f"viewer said {line!r}; stderr: {self.proc.stderr.read() if self.proc.poll() is not None else ''}"
        self.url = found.group(1)
        self.client = httpx.Client(base_url=self.url, timeout=30)
        wait_until(self._up, "the viewer to answer")

    def _first_line(self) -> str:
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            assert sel.select(timeout=DEADLINE_S), "the viewer printed nothing"
        return self.proc.stdout.readline()

    def _up(self) -> bool:
        assert self.proc.poll() is None, self.proc.stderr.read()
        try:
            return self.client.get("/api/runs").status_code == 200
        except httpx.TransportError:
            return False

    def get(self, path: str, **kw) -> httpx.Response:
        return self.client.get(path, **kw)

    def close(self) -> None:
        self.client.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    runs = make_runs(tmp_path_factory.mktemp("viewer"))
    make_run(runs / "hostile", {HOSTILE: [False, False], "b": [True]}, num_trials=2)
    return runs


@pytest.fixture(scope="module")
def viewer(root):
    v = Viewer(root)
    yield v
    v.close()


def test_api_lists_runs(viewer):
    data = viewer.get("/api/runs").json()
    runs = {r["run_id"]: r for r in data["runs"]}
    assert set(runs) == {"reflexion", "none", "killed", "hostile"} and data["problems"] == []
    assert (runs["reflexion"]["status"], runs["reflexion"]["solved"], runs["reflexion"]["num_tasks"]) == ("finished", 1, 2)
    assert runs["killed"]["status"] == "incomplete"
    assert runs["killed"]["current_trial"] == {"trial": 2, "attempted": 1, "expected": 2}


def test_api_run_and_task(viewer):
    run = viewer.get("/api/runs/reflexion").json()
    assert run["summary"]["trials"][1]["solved"] == 1
    assert run["tasks"][0]["number"] == 1 and VIVA in run["tasks"][0]["question"]
    assert run["tasks"][0]["verdict"] == "solved at trial 2"
    task = viewer.get("/api/runs/reflexion/tasks/1").json()
    assert task["task_id"] == "5a7613c15542994ccc9186bf" and [r["trial"] for r in task["records"]] == [1, 2]
    assert task["records"][0]["reflection"] == "Check the paragraph."
    assert task["records"][1]["memory"] == ["Check the paragraph."]
    missing = viewer.get("/api/runs/nope")
    assert missing.status_code == 404 and "no run 'nope'" in missing.json()["detail"]
    out_of_range = viewer.get("/api/runs/reflexion/tasks/3")
    assert out_of_range.status_code == 404 and "tasks 1 to 2" in out_of_range.json()["detail"]


def test_pages(viewer):
    index = viewer.get("/")
    assert index.status_code == 200 and "text/html" in index.headers["content-type"]
    assert index.text.count('<tr data-run="') == 4 and 'value="reflexion"' in index.text
    assert '<span class="status finished"' in index.text and '<span class="status incomplete"' in index.text

    run = html.unescape(viewer.get("/runs/reflexion").text)
    assert VIVA in run and "solved at trial 2" in run and "<table class='trials'>" in run
    assert 'href="/runs/reflexion/tasks/1"' in run

    task = html.unescape(viewer.get("/runs/reflexion/tasks/1").text)
    assert f'<h1 class="question" id="question">{VIVA}' in task
    assert "Finish[wrong]" in task and "Finish[Gesellschaft mit beschränkter Haftung]" in task
    assert "reflection written after trial 1" in task and "Check the paragraph." in task
    assert "memory: reflections in this trial's prompt" in task and "Episodic memory" in task
    assert 'href="/runs/reflexion/tasks/2"' in task  # the next task

    compare = viewer.get("/compare", params=[("run", "reflexion"), ("run", "none")]).text
    assert "<table class='comparison'>" in compare and "cot-context/<wbr>reflexion/<wbr>" in compare
    assert 'href="/runs/reflexion/tasks/1">trial 2</a>' in compare  # the task matrix
    assert 'href="/runs/none/tasks/1">no (2)</a>' in compare
    plot = viewer.get("/compare/plot.png", params=[("run", "reflexion"), ("run", "none")])
    assert plot.status_code == 200 and plot.content[:8] == b"\x89PNG\r\n\x1a\n"


def test_page_errors(viewer):
    missing = viewer.get("/runs/nope")
    assert missing.status_code == 404 and "no run &#39;nope&#39;" in missing.text
    one = viewer.get("/compare", params={"run": "reflexion"})
    assert one.status_code == 400 and "pick two or more runs" in one.text
    assert viewer.get("/runs/reflexion/tasks/0").status_code == 404


def test_text_from_runs_is_escaped(viewer):
    page = viewer.get("/runs/hostile").text + viewer.get("/runs/hostile/tasks/1").text
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_no_internet_assets(viewer):
    """Everything the pages load comes from the viewer itself."""
    pages = [viewer.get(p).text for p in ("/", "/runs/reflexion", "/runs/reflexion/tasks/1")]
    pages.append(viewer.get("/compare", params=[("run", "reflexion"), ("run", "none")]).text)
    for page in pages:
        for ref in re.findall(r"""(?:src|href)=["']([^"']+)""", page):
            assert ref.startswith(("/", "#", "data:")), ref
    for asset in ("/static/viewer.css", "/static/viewer.js"):
        body = viewer.get(asset)
        assert body.status_code == 200 and "http://" not in body.text and "https://" not in body.text
        assert "@import" not in body.text


def test_view_bad_input(tmp_path):
    proc = subprocess.run([*CLI, "view", str(tmp_path / "nope")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "does not exist" in proc.stderr
    with RunLock(tmp_path):  # any open port will do: take one and ask the viewer for it
        import socket

        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            proc = subprocess.run([*CLI, "view", str(tmp_path), "--port", str(port)], cwd=ROOT,
                                  capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in proc.stderr and "--port" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_live_progress_of_a_running_run(tmp_path):
    """A real `reinagent run` whose second episode waits on the model: the viewer (and `runs`)
    show it running with 1 of 2 episodes done; once the model answers, it shows finished."""
    gate = threading.Event()

    def reply(messages):
        last = messages[-1]["content"] if messages else ""
        if "Question:" in last and VIVA not in last:  # task 2's episode (task 1 is VIVA Media)
            gate.wait(timeout=DEADLINE_S)
        return "Thought: x\nAction: Finish[wrong]"

    root = tmp_path / "runs"
    run_dir = root / "live"
    root.mkdir()
    viewer = Viewer(root)
    with FakeOpenAIServer(reply=reply) as server:
        proc = subprocess.Popen(
            [*CLI, "run", "--num-envs", "2", "--num-trials", "1", "--strategy", "none", "--max-concurrency", "1",
             "--model", "openai/fake", "--base-url", server.base_url, "--run-dir", str(run_dir), "--no-cache",
             "--quiet"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            def one_done():
                assert proc.poll() is None, proc.stderr.read()
                runs = viewer.get("/api/runs").json()["runs"]
                return runs and runs[0]["records"] == 1 and runs[0]

            live = wait_until(one_done, "the first episode's record")
            assert live["status"] == "running"
            assert live["current_trial"] == {"trial": 1, "attempted": 1, "expected": 2}
            page = viewer.get("/").text
            assert '<span class="status running"' in page and "trial 1/1 · 1/2" in page
            listed = subprocess.run([*CLI, "runs", str(root)], cwd=ROOT, capture_output=True, text=True, timeout=120)
            # trial 1 of 1 begun, 1 of its 2 records done, 0 of 2 tasks solved, 0 errors
            assert re.search(r"^live\s.*\brunning\s+1/1\s+1/2\s+0/2\s+0\b", listed.stdout, re.M), listed.stdout
        finally:
            gate.set()
            try:
                proc.wait(timeout=DEADLINE_S)
            finally:
                if proc.poll() is None:
                    proc.kill()
        assert proc.returncode == 0, proc.stderr.read()
    done = viewer.get("/api/runs").json()["runs"][0]
    assert (done["status"], done["records"]) == ("finished", 2)
    assert len((run_dir / RECORDS).read_text().splitlines()) == 2
    viewer.close()


# --- in a real browser ---------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def chromium(*args: str, profile: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
             f"--user-data-dir={profile}", "--virtual-time-budget=3000", "--window-size=1280,900"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=timeout)


COMMITTED = ("react_reflexion", "react_none", "cot_context_reflexion")  # real runs of the embedded model


@pytest.fixture(scope="module")
def shown(root, tmp_path_factory):
    """Three committed runs, two scripted ones, and "killed" held by a writer, so the list shows a
    running run. Served as the relative folder `runs`, as a user would type it."""
    top = tmp_path_factory.mktemp("shown")
    for name in COMMITTED:
        shutil.copytree(ROOT / "hotpot_runs" / "embedded" / name, top / "runs" / "embedded" / name)
    for name in ("reflexion", "killed"):
        shutil.copytree(root / name, top / "runs" / "scripted" / name)
    v = Viewer(Path("runs"), cwd=top)
    with RunLock(top / "runs" / "scripted" / "killed"):
        yield v
    v.close()


def _dom(url: str, tmp_path: Path) -> str:
    proc = chromium("--dump-dom", url, profile=tmp_path / "profile")
    assert "<html" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


def _screenshot(url: str, tmp_path: Path, name: str, height: int) -> Path:
    shot = tmp_path / name
    proc = chromium(f"--screenshot={shot}", f"--window-size=1280,{height}", url, profile=tmp_path / "profile")
    assert shot.exists(), proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 30_000  # a blank page is a few KB
    if os.environ.get("REINAGENT_UPDATE_SCREENSHOTS"):
        shutil.copyfile(shot, ROOT / "docs" / name)
    return shot


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install chromium)")
def test_runs_page_in_chromium(shown, tmp_path):
    dom = _dom(shown.url + "/", tmp_path)
    assert 'data-viewer-js="ready"' in dom, "viewer.js ran without an error"
    assert dom.count('<tr data-run="') == 5 and "embedded/react_reflexion" in dom
    assert re.search(r'<tr data-run="scripted/killed" class="running">', dom)
    assert '<span class="status running" data-field="status">running</span>' in dom
    assert "trial 2/3 · 1/2" in dom
    _screenshot(shown.url + "/", tmp_path, "viewer-runs.png", 520)


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install chromium)")
def test_task_page_in_chromium(shown, tmp_path):
    url = shown.url + "/runs/scripted/reflexion/tasks/1"
    dom = _dom(url, tmp_path).replace("&#39;", "'")
    assert f'<h1 class="question" id="question">{VIVA}' in dom
    assert '<section class="trial kind-bad" id="trial-1">' in dom and '<section class="trial kind-ok" id="trial-2">' in dom
    assert re.search(r'<aside class="memory" id="memory">.*Check the paragraph\.', dom, re.S)
    _screenshot(url, tmp_path, "viewer-task.png", 1000)


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install chromium)")
def test_compare_page_in_chromium(shown, tmp_path):
    url = shown.url + "/compare?" + "&".join(f"run=embedded/{name}" for name in COMMITTED) + "&run=scripted/reflexion"
    dom = _dom(url, tmp_path)
    assert "<table class=\"comparison\">" in dom or "<table class='comparison'>" in dom or 'class="comparison"' in dom
    assert dom.count('<img class="plot"') == 1
    _screenshot(url, tmp_path, "viewer-compare.png", 900)
