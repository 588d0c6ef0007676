"""`reinagent report` of runs that live in a store (issue 19 §1): the runs are exported to a
temporary folder and reported as run directories; the report equals the run directory's."""

from __future__ import annotations

import glob
import json
import tempfile

import pytest

from reinagent.report.loading import load
from reinagent.store import read_log, read_spec
from reinagent.stores import open_store
from reinagent.stores.base import StoreError
from reinagent.stores.file import write_run_dir
from reinagent.stores.report import store_runs, store_url_of
from tests import store_contract as contract
from tests.conftest import one_line_error, run_cli


@pytest.fixture
def stored(tmp_path):
    """The same run as a run directory and as run `r1` (and `r2`) of a SQLite store."""
    source = tmp_path / "r1"
    write_run_dir(source, contract.spec(), contract.a_log())
    url = f"sqlite:///{tmp_path}/runs.db"
    with open_store(url) as db:
        db.import_log("r1", read_spec(source), read_log(source))
        contract.write(db, "r2", contract.a_log()[:2])
    return url, source


def _without_paths(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in ("run_dir", "store", "run_id")}


def test_arguments_name_a_store_or_run_directories():
    assert store_url_of(["runs/a", "runs/b"], None) == (None, ["runs/a", "runs/b"])
    assert store_url_of(["sqlite:///x.db", "a", "b"], None) == ("sqlite:///x.db", ["a", "b"])
    assert store_url_of(["a"], "postgresql://h/db") == ("postgresql://h/db", ["a"])
    assert store_url_of(["postgresql://h/db"], None) == ("postgresql://h/db", [])


def test_a_stored_run_reports_as_its_run_directory(stored):
    url, source = stored
    before = set(glob.glob(f"{tempfile.gettempdir()}/reinagent-report-*"))
    with store_runs([url, "r1"]) as paths:
        assert [p.rsplit("/", 1)[1] for p in paths] == ["r1"]
        from_store = load(paths)[0].summary
    assert _without_paths(from_store) == _without_paths(load([source])[0].summary)
    with store_runs([url]) as paths:  # no id: every run of the store
        assert [p.rsplit("/", 1)[1] for p in paths] == ["r1", "r2"]
    with pytest.raises(StoreError, match="no run 'nope'"):
        with store_runs(["nope"], url):
            pass
    assert set(glob.glob(f"{tempfile.gettempdir()}/reinagent-report-*")) == before  # nothing left behind


def _report_has_store_option() -> bool:
    from reinagent.report.cli import report

    return any(p.name == "store" for p in report.params)


@pytest.mark.skipif(not _report_has_store_option(), reason="reinagent/report/cli.py lacks --store (the lead's diff)")
def test_cli_report_of_a_store(stored):
    url, source = stored
    expected = json.loads(run_cli("report", str(source), "--format", "json").stdout)
    for args in ([url, "r1"], ["--store", url, "r1"]):
        done = run_cli("report", *args, "--format", "json")
        assert done.returncode == 0, done.stderr
        assert _without_paths(json.loads(done.stdout)) == _without_paths(expected)
    # the report names the store and the run id, never the temporary copy (deleted by then)
    summary = json.loads(run_cli("report", "--store", url, "r1", "--format", "json").stdout)
    assert (summary["store"], summary["run_id"], summary["run_dir"]) == (url, "r1", None)
    md = run_cli("report", "--store", url, "r1").stdout
    assert f"store `{url}`, run id `r1`" in md and "reinagent-report-" not in md and "run directory" not in md
    html = run_cli("report", "--store", url, "r1", "--format", "html").stdout
    assert f"store <code>{url}</code>, run id <code>r1</code>" in html and "reinagent-report-" not in html
    # --store without an id: every run of the store (docs/stores.md)
    every = run_cli("report", "--store", url, "--format", "json")
    assert every.returncode == 0, every.stderr
    assert [s["run_id"] for s in json.loads(every.stdout)] == ["r1", "r2"]
    nothing = run_cli("report")
    assert nothing.returncode == 2 and "--store URL" in nothing.stderr
    one_line_error(run_cli("report", "--store", url, "nope"), "no run 'nope'")
    one_line_error(run_cli("report", url.replace("runs.db", "typo.db")), "typo.db does not exist")
