"""Fake packaged models (reinagent.llm.packaged) for the tests: data-only distributions laid out
as pip installs a wheel, and the real CLI run in a child with one registered as packaged."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reinagent.llm.packaged import PackagedModel
from tests.conftest import ROOT


def fake_model(site: Path, parts: list[bytes], version: str = "1.0", *, name: str = "fake-model") -> PackagedModel:
    """Distributions reinagent-fake-partN==version laid out as pip installs a wheel; each one's
    __init__.py would leave a mark if anything ever imported it."""
    for n, data in enumerate(parts, 1):
        module = site / f"reinagent_fake_part{n}"
        (module / "data").mkdir(parents=True)
        (module / "data" / f"part{n:02d}.bin").write_bytes(data)
        (module / "__init__.py").write_text(f"open({str(site / 'IMPORTED')!r}, 'a').write('{n}')\n")
        info = site / f"reinagent_fake_part{n}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: reinagent-fake-part{n}\nVersion: {version}\n")
        (info / "RECORD").write_text("")
    whole = b"".join(parts)
    return PackagedModel(name, "Fake/Model", "reinagent-fake-part{n}", "reinagent_fake_part{n}", "1.0",
                         len(parts), len(whole), hashlib.sha256(whole).hexdigest(), "fake", part_size=len(parts[0]))


def cli_with_fake_model(model: PackagedModel, site: Path, cache: Path, run_dir: Path, *, fsize: int = 0,
                        read_only: Path | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`reinagent run --model local:fake-model` in a child with `model` registered as packaged,
    under `ulimit -f` (fsize bytes) or with the folder `read_only` made read-only (a read-only
    bind mount as root, where chmod stops nothing; chmod otherwise)."""
    code = "\n".join([
        "import resource, sys",
        f"if {fsize}: resource.setrlimit(resource.RLIMIT_FSIZE, ({fsize}, {fsize}))",
        f"sys.path.insert(0, {str(site)!r})",
        "from reinagent.llm import packaged",
        f"packaged.MODELS[{model.name!r}] = packaged.PackagedModel(**{dataclasses.asdict(model)!r})",
        "from reinagent.cli import main",
        f"sys.argv = ['reinagent', 'run', '--benchmark', 'arithmetic', '--num-envs', '1', '--num-trials', '1', "
        f"'--model', 'local:{model.name}', '--run-dir', {str(run_dir)!r}]",
        "main()",
    ])
    argv = [sys.executable, "-c", code]
    if read_only is not None and os.geteuid() == 0:
        mount = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && exec "$@"'
        argv = ["unshare", "-m", "sh", "-c", mount, str(read_only), *argv]
    env = {**os.environ, "REINAGENT_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    if read_only is not None and os.geteuid() != 0:
        _chmod_tree(read_only, 0o555, 0o444)
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env, cwd=cwd)
    finally:
        if read_only is not None and os.geteuid() != 0:
            _chmod_tree(read_only, 0o755, 0o644)


def _chmod_tree(root: Path, folders: int, files: int) -> None:
    for folder, _, names in os.walk(root):
        os.chmod(folder, folders)
        for name in names:
            os.chmod(os.path.join(folder, name), files)


def linked_model(site: Path, source: Path) -> PackagedModel:
    """A one-part fake packaged model whose data file is a hard link to `source` (a real GGUF
    file, not copied), with its size and sha256."""
    module = site / "reinagent_fake_part1"
    (module / "data").mkdir(parents=True)
    try:
        os.link(source, module / "data" / "part01.bin")
    except OSError:  # another filesystem: a copy
        import shutil

        shutil.copyfile(source, module / "data" / "part01.bin")
    info = site / "reinagent_fake_part1-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: reinagent-fake-part1\nVersion: 1.0\n")
    (info / "RECORD").write_text("")
    with open(source, "rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    size = source.stat().st_size
    return PackagedModel("fake-model", "Fake/Model", "reinagent-fake-part{n}", "reinagent_fake_part{n}", "1.0",
                         1, size, digest, "fake", part_size=size)


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path where fake model part packages are installed, and an empty cache."""
    from reinagent.llm import cache_files

    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("REINAGENT_CACHE_DIR", str(tmp_path / "cache"))
    cache_files._HASHED.clear()
    return folder
