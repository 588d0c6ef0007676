"""perf/occupancy.py: episodes in flight over a run's span, from its live records. A real run
(the fake server, one slot) gives the records; their times are then set by hand, so each count is
known: the slices, the first later-trial start and the tail after the last moment all slots were
busy."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.util import module_from_spec, spec_from_file_location

from reinagent import run
from reinagent.llm.fake_server import FakeOpenAIServer
from reinagent.store import read_records

from .conftest import ROOT

SCRIPT = ROOT / "perf" / "occupancy.py"


def _module():
    spec = spec_from_file_location("occupancy", SCRIPT)
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_slices_first_retry_and_tail_from_the_records_times(tmp_path):
    with FakeOpenAIServer() as server:  # every trial fails: 2 tasks x 2 trials
        run_dir = run(benchmark="hotpotqa", agent="cot-context", num_trials=2, num_envs=2, run_dir=str(tmp_path / "r"),
                      cache=False, progress=False, model="openai/fake", base_url=server.base_url, max_concurrency=2)
    records = read_records(run_dir)
    a, b = sorted({r.task_id for r in records})
    times = {(a, 1): (100, 110), (a, 2): (110, 120), (b, 1): (100, 130), (b, 2): (130, 140)}
    lines = [r.model_copy(update=dict(zip(("started_at", "finished_at"), times[(r.task_id, r.trial)]))).model_dump_json()
             for r in records]
    (run_dir / "records.jsonl").write_text("".join(line + "\n" for line in lines))
    found = _module().occupancy(run_dir, every=10)
    assert found["slots"] == 2 and found["span_s"] == 40 and found["first_retry_s"] == 10
    assert [(s["trial_1"], s["later"]) for s in found["slices"]] == [(2, 0), (1, 1), (1, 0), (0, 1)]
    assert found["tail_s"] == 30  # both slots busy last at 10 s (a's trial 2 and b's trial 1), the end at 40
    out = subprocess.run([sys.executable, str(SCRIPT), str(run_dir), "--every", "10", "--json"],
                         capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1])[0]["tail_s"] == 30
    assert "first later-trial episode at 0.2 min" in out.stderr


def test_a_folder_that_is_no_run_is_one_line_exit_2(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "records.jsonl").write_text('{"not a record\n')
    for folder in (tmp_path / "nope", tmp_path / "bad"):
        done = subprocess.run([sys.executable, str(SCRIPT), str(folder)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and str(folder) in done.stderr and "Traceback" not in done.stderr
