"""perf/pair_budget.py (issue 53): the decode floor of a pair from its records and measured rates.
Records are written here by hand, so each count is known: a branch's copied trial is not counted,
reflection calls are, and the floor divides by the better of the engine's decode rates (one stream,
8 in flight with prefill taken out), never by a rate with prefill in it."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import ROOT

SCRIPT = ROOT / "perf" / "pair_budget.py"


def record(trial: int, calls: list[tuple[int, int]], start: float, end: float, *, reflections=(), copied=None) -> dict:
    as_calls = lambda pairs: [{"prompt_tokens": p, "completion_tokens": c, "latency_s": 1.0} for p, c in pairs]  # noqa: E731
    return {"task_id": "T/0", "trial": trial, "trajectory": {"calls": as_calls(calls)},
            "reflection_calls": as_calls(reflections), "started_at": start, "finished_at": end, "copied_from": copied,
            "copied_calls": len(calls) + len(reflections) if copied else 0}


def write_run(folder, records) -> None:
    folder.mkdir()
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_floor_counts_the_pairs_own_calls_at_the_best_rate(tmp_path):
    write_run(tmp_path / "reflexion", [record(1, [(100, 600), (50, 300)], 0, 60, reflections=[(80, 100)]),
                                       record(2, [(120, 200)], 60, 120)])
    write_run(tmp_path / "none", [record(1, [(100, 600), (50, 300)], 0, 60, copied="reflexion"),  # made once
                                  record(2, [(90, 400)], 1000, 1060)])
    rates = {"cpu": "test CPU", "embedded_decode_tok_s": 2.0, "embedded_8_in_flight_tok_s": 99.0,
             "embedded_decode_8_in_flight_tok_s": 8.0, "llamacpp_decode_tok_s": 5.0,
             "llamacpp_8_in_flight_tok_s": 99.0, "llamacpp_decode_8_in_flight_tok_s": 1.0}
    (tmp_path / "engines_output.txt").write_text("# stderr\nsome line\n" + json.dumps(rates) + "\n")
    older = {k: v for k, v in rates.items() if "decode_8" not in k}  # before decode at 8 was measured
    (tmp_path / "older_output.txt").write_text(json.dumps(older) + "\n")
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "reflexion"), str(tmp_path / "none"),
                          "--rates", str(tmp_path / "engines_output.txt"), str(tmp_path / "older_output.txt"), "--json"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["work"] == {"calls": 5, "prompt_tokens": 440, "completion_tokens": 1600, "span_s": 180.0}
    floors = {f["engine"]: f["decode_floor_min"] for f in result["floors"]}
    assert floors == {"engine": 1600 / 8.0 / 60, "llama.cpp": 1600 / 5.0 / 60}
    assert result["tok_s_for_30_min"] == 1600 / 1800


def test_missing_run_dir_is_one_line_exit_2(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "nope"), "--rates", str(tmp_path / "x.txt")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "nope: no such file or directory" in done.stderr and "Traceback" not in done.stderr


def test_a_partly_copied_record_counts_only_its_own_calls(tmp_path):
    part = record(2, [(100, 600), (50, 300)], 0, 60)
    part["copied_calls"] = 1  # the first call came from the parent, the second was made here
    write_run(tmp_path / "run", [part])
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("pair_budget", SCRIPT)
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.tokens([tmp_path / "run"]) == {"calls": 1, "prompt_tokens": 50, "completion_tokens": 300, "span_s": 60.0}


def test_floor_at_more_in_flight_takes_the_best_rate_measured_up_to_it(tmp_path):
    write_run(tmp_path / "run", [record(1, [(100, 3200)], 0, 60)])
    levels = {"cpu": "test CPU", "embedded_decode_8_tok_s": 10.0, "embedded_decode_16_tok_s": 20.0,
              "embedded_decode_32_tok_s": 40.0, "llamacpp_decode_8_tok_s": 8.0, "llamacpp_decode_32_tok_s": 16.0}
    (tmp_path / "in_flight_output.txt").write_text(json.dumps(levels) + "\n")

    def floors(n: int) -> dict:
        out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "run"), "--rates",
                              str(tmp_path / "in_flight_output.txt"), "--in-flight", str(n), "--json"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        return {f["engine"]: f["decode_floor_min"] for f in json.loads(out.strip().splitlines()[-1])["floors"]}

    assert floors(32) == {"engine": 3200 / 40.0 / 60, "llama.cpp": 3200 / 16.0 / 60}
    assert floors(16) == {"engine": 3200 / 20.0 / 60, "llama.cpp": 3200 / 8.0 / 60}  # 32's rate is not reachable
    assert floors(4) == {}  # nothing measured with several requests up to 4
