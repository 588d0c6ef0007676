"""Text from programs, models and environments never drives the terminal, and never becomes markup
in a markdown report (issue 28, section 7): `show`, `report` and the run's closing summary."""

from __future__ import annotations

from reinagent.records import Step, Trajectory, TrialRecord
from reinagent.stores.file import write_run_dir
from reinagent.terminal import plain
from tests import store_contract as contract
from tests.conftest import run_cli

OSC = "\x1b]0;pwned\x07"  # retitles the terminal
CLIPBOARD = "\x1b]52;c;ZXZpbA==\x1b\\"  # writes the clipboard
CSI = "\x1b[2J\x1b[H"  # clears the screen
SCRIPT = "<script>alert(1)</script>"


def test_plain_removes_sequences_and_controls_but_keeps_the_text():
    assert plain(f"a{OSC}b{CLIPBOARD}c{CSI}d") == "abcd"
    assert plain("red \x1b[1;31mALERT\x1b[0m") == "red ALERT"
    assert plain("c1 csi \x9b2J and osc \x9d0;t\x9c done") == "c1 csi  and osc  done"
    assert plain("bidi \u202eevil\u202c, nul\x00, bell\x07, cr\r") == "bidi evil, nul, bell, cr"
    assert plain("cut off \x1b]0;title\nnext line") == "cut off \nnext line"  # never eats later lines
    kept = "lines\n\ttabbed, ünïcödé, 数学, emoji 🙂"
    assert plain(kept) == kept


def _hostile_run(run_dir):
    hostile = f"{OSC}{CLIPBOARD}{CSI}{SCRIPT}"
    steps = [Step(prompt_len=0, output=f"Thought: {hostile}\nAction: Finish[{hostile}]", thought=hostile,
                  action=f"Finish[{hostile}]", observation=f"obs {hostile}")]
    bad = TrialRecord(task_id="a", trial=1, success=False, answer=hostile, reflection=f"reflect {hostile}",
                      trajectory=Trajectory(steps=steps, answer=hostile, end_reason="finished"),
                      started_at=1.0, finished_at=2.0)
    errored = TrialRecord(task_id="b", trial=1, success=False, error=f"ValueError: {hostile}",
                          trajectory=Trajectory(steps=[], end_reason="error"), started_at=1.0, finished_at=2.0)
    write_run_dir(run_dir, contract.spec(), [bad, errored])
    return [bad, errored]


def _no_control(text: str) -> None:
    for needle in ("\x1b", "\x07", "\x9b", "\x9d"):
        assert needle not in text, repr(text[:300])


def test_show_and_report_print_no_escapes_and_no_markup(tmp_path):
    run_dir = tmp_path / "run"
    _hostile_run(run_dir)
    for task in ("1", "2"):
        shown = run_cli("show", str(run_dir), task)
        assert shown.returncode == 0, shown.stderr
        _no_control(shown.stdout)
    assert "pwned" not in run_cli("show", str(run_dir), "1").stdout  # the title itself is gone too
    listing = run_cli("show", str(run_dir))
    _no_control(listing.stdout)

    report = run_cli("report", str(run_dir))
    assert report.returncode == 0, report.stderr
    _no_control(report.stdout)
    assert SCRIPT not in report.stdout and "&lt;script>alert(1)&lt;/script>" in report.stdout
    written = tmp_path / "report.md"
    assert run_cli("report", str(run_dir), "-o", str(written)).returncode == 0
    _no_control(written.read_text())
    html = tmp_path / "report.html"
    assert run_cli("report", str(run_dir), "--format", "html", "-o", str(html)).returncode == 0
    _no_control(html.read_text())


def test_the_runs_closing_summary_prints_no_escapes(tmp_path):
    from reinagent.outcome import Outcome

    records = _hostile_run(tmp_path / "run")
    lines = Outcome.of(records).lines(tmp_path / "run")
    assert any("ValueError" in line for line in lines)
    for line in lines:
        _no_control(line)


def test_markdown_cells_are_text_not_markup():
    from reinagent.report.markdown import table_markdown

    text = table_markdown((["error"], [[f"{SCRIPT} [click](http://evil.example) `code` a|b{OSC}"]]))
    row = text.splitlines()[-1]
    assert "<" not in row and "](" not in row and "]\\(" in row and "\\|" in row and "\\`code\\`" in row
    _no_control(row)
