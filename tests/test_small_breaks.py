"""Issue 45's "smaller" breaks, each as it was reproduced: non-finite numbers in records, the
report's header lines, the viewer's comparison of a repeated run, check-answers' malformed lines,
the RL trainer's temporary files, and AgentGym's env_idx-style clients."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reinagent.store import RECORDS
from tests.conftest import one_line_error, run_cli
from tests.test_report import COMPLETE, make_run


def plant(run: Path, line: int, field: str, literal: str) -> None:
    """Set `field` of records.jsonl's line `line` (1-based) to a raw JSON literal, as a hand edit would."""
    path = run / RECORDS
    lines = path.read_text().splitlines()
    lines[line - 1], n = re.subn(rf'"{field}":[^,}}]+', f'"{field}":{literal}', lines[line - 1])
    assert n == 1
    path.write_text("\n".join(lines) + "\n")


def viewer_client(root: Path):
    from fastapi.testclient import TestClient

    from reinagent.viewer.app import create_app

    return TestClient(create_app(root), base_url="http://127.0.0.1")  # a loopback Host (guard.py)


# ----- non-finite numbers ---------------------------------------------------------------------


@pytest.mark.parametrize("literal", ["Infinity", "-Infinity", "1e999", "NaN"])
def test_a_non_finite_timestamp_is_corruption_that_repair_moves(tmp_path, literal):
    """Was: `report` died with OverflowError (-inf) or printed nonsense, and `repair` said
    "all 10 lines are sound". Now every reader names file:line and repair quarantines it."""
    run = make_run(tmp_path / "run", COMPLETE)
    plant(run, 3, "started_at", literal)
    one_line_error(run_cli("report", str(run)), f"{RECORDS}:3", "JSON cannot hold", "reinagent repair")
    fixed = run_cli("repair", str(run))
    assert fixed.returncode == 0 and "moved line 3" in fixed.stdout, fixed.stdout + fixed.stderr
    assert run_cli("report", str(run)).returncode == 0


def test_the_viewer_run_page_names_the_bad_line(tmp_path):
    make_run(tmp_path / "run", COMPLETE)
    plant(tmp_path / "run", 3, "finished_at", "-Infinity")
    client = viewer_client(tmp_path)
    page = client.get("/runs/run")
    assert page.status_code == 409 and "records.jsonl:3" in page.text
    assert client.get("/").status_code == 200  # the listing still answers, the run as a problem


def test_finite_timestamps_far_apart_give_an_unknown_duration_and_strict_json(tmp_path):
    """1e308 and -1e308 are finite, but their difference overflows to inf: the report said
    OverflowError, and --format json printed `Infinity`, which is not JSON."""
    run = make_run(tmp_path / "run", COMPLETE)
    plant(run, 3, "started_at", "-1e308")
    plant(run, 3, "finished_at", "1e308")
    md = run_cli("report", str(run))
    assert md.returncode == 0 and "wall time unknown" in md.stdout, md.stderr
    out = run_cli("report", "--format", "json", str(run))
    assert out.returncode == 0, out.stderr

    def refuse(constant):
        raise AssertionError(f"{constant} in the JSON report")

    data = json.loads(out.stdout, parse_constant=refuse)
    assert data["wall_s"] is None


def test_branch_of_a_run_holding_nan_writes_nothing(tmp_path):
    """Was: the branch copied reward NaN, pydantic wrote it as null, and the branch could not be
    read back. Now the source is refused (file:line) before anything is written."""
    run = make_run(tmp_path / "src", {"a": [False, True], "b": [False, False]}, num_trials=2)
    plant(run, 1, "reward", "NaN")
    target = tmp_path / "branch"
    proc = run_cli("branch", str(run), "--strategy", "last_attempt", "--run-dir", str(target))
    one_line_error(proc, f"{RECORDS}:1")
    assert proc.returncode == 2 and not target.exists()


# ----- the viewer's comparison ----------------------------------------------------------------


def test_a_run_named_many_times_is_compared_once(tmp_path, monkeypatch):
    """Was: 6,000 repeats of one name drew 6,000 curves (40 s of CPU per request)."""
    from reinagent.report import plots

    make_run(tmp_path / "a", COMPLETE)
    make_run(tmp_path / "b", COMPLETE)
    drawn: list[int] = []
    real = plots.learning_curve_figure

    def counting(summaries):
        drawn.append(len(summaries))
        return real(summaries)

    monkeypatch.setattr(plots, "learning_curve_figure", counting)
    client = viewer_client(tmp_path)
    query = "&".join(["run=a"] * 300 + ["run=b"] * 300)
    assert client.get(f"/compare/plot.png?{query}").status_code == 200 and drawn == [2]
    page = client.get(f"/compare?{query}")
    assert page.status_code == 200 and page.text.count('href="/runs/a"') == 1
    many = "&".join(f"run=r{i}" for i in range(51))
    refused = client.get(f"/compare/plot.png?{many}")
    assert refused.status_code == 400 and "at most 50" in refused.text


# ----- report.md's header lines ---------------------------------------------------------------

EVIL = "x`<img src=x onerror=alert(1)>`"


def test_report_md_header_values_are_text_in_a_markdown_renderer_that_passes_html(tmp_path):
    """Was: a backtick in the model name closed its code span, and a renderer that passes HTML
    (markdown-it with html on, as many do) produced a live <img onerror>."""
    from markdown_it import MarkdownIt

    from reinagent.report.loading import load
    from reinagent.report.markdown import report_markdown

    run = make_run(tmp_path / "run", COMPLETE, model=EVIL, agent=f"cot{EVIL}", strategy=f"``{EVIL}``")
    one = report_markdown([load([run])[0].summary])
    two = report_markdown([load([run])[0].summary, load([make_run(tmp_path / "b", COMPLETE)])[0].summary])
    for md in (one, two):
        html = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
        assert "<img" not in html, [line for line in html.splitlines() if "<img" in line]
        assert "&lt;img src=x onerror=alert(1)&gt;" in html  # still shown, as text


# ----- check-answers --------------------------------------------------------------------------


@pytest.mark.parametrize("line, needle", [
    (b'{"task_id": "test/0", "answer": "\xff\xfe"}\n', "not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested too deeply"),
    (b'{"task_id": ' + b"1" * 5000 + b', "answer": "3"}\n', "4300 digits"),
])
def test_malformed_answer_lines_are_one_line_and_exit_2(tmp_path, line, needle):
    """Was: "internal error: UnicodeDecodeError / RecursionError / AttributeError", exit 1."""
    answers = tmp_path / "answers.jsonl"
    answers.write_bytes(b'{"task_id": "test/0", "answer": "3"}\n' + line)
    proc = run_cli("check-answers", "--benchmark", "gsm8k", "--answers", str(answers))
    one_line_error(proc, f"{answers}:2", needle)
    assert proc.returncode == 2


# ----- the RL trainer's temporary copies ------------------------------------------------------


def test_scratch_dir_removes_what_a_killed_run_left(tmp_path):
    from reinagent.rl.loop import SCRATCH, scratch_dir

    left = tmp_path / SCRATCH / "openvino" / "policy"
    left.mkdir(parents=True)
    (left / "model.safetensors").write_bytes(b"0" * 1024)  # a killed run's copy of the policy
    fresh = scratch_dir(tmp_path)
    assert fresh == tmp_path / SCRATCH and list(fresh.iterdir()) == []

