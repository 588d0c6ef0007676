"""The HTML report's template and the report package's structure (issue 20).

- The committed reports of real runs regenerate to the same content: the guard that moving HTML
  from f-strings to a jinja2 template (and any later refactor) changed nothing a reader sees.
- The template and stylesheet ship in the wheel, found through importlib.resources.
- No import circle between the report's modules.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import zipfile
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import pytest

from reinagent.report.html import report_html, stylesheet, table_html
from reinagent.report.loading import load
from reinagent.report.markdown import report_markdown

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ("report.html.j2", "macros.html.j2", "report.css", "tree.css")
# Committed by scripts/embedded_runs.sh: FOLDER/REPORT.md, FOLDER/report.html, FOLDER/RUN/report.md.
COMMITTED = ("programming_runs/embedded", "alfworld_runs/embedded", "hotpot_runs/embedded")


class _Tokens(HTMLParser):
    """An HTML page as what a reader gets: tags with their attributes and the text between them
    (whitespace collapsed), so that quoting style and line breaks between tags do not count."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.tag = ""

    def handle_starttag(self, tag, attrs):
        # Plot PNGs depend on the installed matplotlib and fonts: their presence counts, not bytes.
        attrs = [(k, "data:image/png" if k == "src" and (v or "").startswith("data:image/png") else v) for k, v in attrs]
        self.out.append(f"<{tag} {sorted(attrs)}>")
        self.tag = tag

    def handle_endtag(self, tag):
        self.out.append(f"</{tag}>")

    def handle_data(self, data):
        text = " ".join(data.split())
        if text and self.tag != "style":  # how it looks is not what it says
            self.out.append(text)


def page_tokens(page: str) -> list[str]:
    parser = _Tokens()
    parser.feed(re.sub(r"generated [0-9: -]+ from", "generated (time) from", page))
    return parser.out


@pytest.mark.parametrize("folder", COMMITTED)
def test_committed_markdown_reports_regenerate_unchanged(folder, monkeypatch):
    monkeypatch.chdir(ROOT)  # the reports name run directories as given: relative to the repository
    runs = load(folder)
    assert report_markdown([r.summary for r in runs]).rstrip("\n") + "\n" == (ROOT / folder / "REPORT.md").read_text()
    for run in runs:
        one = report_markdown([run.summary]).rstrip("\n") + "\n"
        assert one == (run.run_dir / "report.md").read_text(), run.run_dir


def test_committed_single_run_report_regenerates_unchanged(monkeypatch):
    monkeypatch.chdir(ROOT)
    (run,) = load("alfworld_runs/expert")
    assert report_markdown([run.summary]).rstrip("\n") + "\n" == (run.run_dir / "report.md").read_text()


@pytest.mark.parametrize("folder", COMMITTED[:2])
def test_committed_html_report_regenerates_unchanged(folder, monkeypatch):
    monkeypatch.chdir(ROOT)
    committed = (ROOT / folder / "report.html").read_text()
    title = re.search(r"<title>(.*?)</title>", committed).group(1)
    import html

    page = report_html(load(folder), title=html.unescape(title))
    assert page_tokens(page) == page_tokens(committed)


def test_template_and_stylesheet_ship_as_package_data():
    folder = resources.files("reinagent.report").joinpath("templates")
    for name in TEMPLATES:
        assert folder.joinpath(name).is_file(), name
    # The page inlines the one stylesheet (a report opens offline), and only there.
    css = stylesheet()
    assert "ul.tree" in css and "border-collapse" in css
    assert "border-collapse" not in (ROOT / "reinagent" / "report" / "html.py").read_text()


def test_wheel_contains_the_templates(tmp_path):
    """Built from a copy of the package (never in the shared checkout: no build/ or egg-info left)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "reinagent", src / "reinagent", ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True)
    if proc.returncode != 0 and "No module named pip" in proc.stderr:
        pytest.skip("pip is not installed in this environment")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in TEMPLATES:
        assert f"reinagent/report/templates/{name}" in names


def test_table_html_escapes_and_lets_labels_wrap():
    """The run viewer embeds these tables: cells are escaped, column labels wrap at slashes."""
    out = table_html((["", "react/none/<m>"], [["a & b", "<script>"]]), "comparison")
    assert out.startswith("<div class='scroll'><table class='comparison'><thead>")
    assert "<th>react/<wbr>none/<wbr>&lt;m&gt;</th>" in out
    assert "<td>a &amp; b</td><td>&lt;script&gt;</td>" in out


def _report_imports() -> dict[str, set[str]]:
    """report module -> the report modules it imports anywhere in it (lazily inside functions too:
    a lazy import still ties the two modules together)."""
    folder = ROOT / "reinagent" / "report"
    graph = {}
    for path in folder.glob("*.py"):
        name = path.stem
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("reinagent.report."):
                deps.add(node.module.split(".")[2])
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[2] for a in node.names if a.name.startswith("reinagent.report.")}
        graph[name] = deps - {name}
    return graph


def test_no_import_circle_in_the_report_package():
    graph = _report_imports()
    assert "markdown" not in graph["summary"]  # the old circle: markdown -> tables -> summary -> markdown
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                pytest.fail("import circle: " + " -> ".join([*trail, node, dep]))
            if dep not in state:
                visit(dep, [*trail, node])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
