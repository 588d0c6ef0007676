"""The models cache's own files (issue 54 item 5; reinagent/llm/cache_files.py, packaged.py,
checkpoint_key.py): copies trusted for their pinned size and sha256 only, stamps read as bounded
regular files, parts sized before copying, and a full disk, `ulimit -f` or a read-only cache
answered in one line with exit 2. Small synthetic files throughout: the real 0.5B's pinned
re-write is checked by tests/test_qwen_models.py, which loads it."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import subprocess
import threading
from pathlib import Path

import pytest

from reinagent.errors import ConfigError
from reinagent.llm import cache_files, packaged
from reinagent.llm.cache_files import writing
from reinagent.llm.packaged import PackagedModel
from tests.conftest import one_line_error
from tests.packaged_fakes import cli_with_fake_model, fake_model, site  # noqa: F401 - a fixture


# ----- the Q5_0 -> Q8_0 re-write, pinned ---------------------------------------------------------


def _q5_0_gguf(path: Path) -> bytes:
    """A small GGUF file with one Q5_0 tensor (random blocks) and one F32 tensor."""
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(54)
    raw = rng.integers(0, 256, size=(4, 2 * 22), dtype=np.uint8)  # 4 rows of 64 weights
    for block in range(2):
        raw[:, block * 22:block * 22 + 2] = rng.normal(0, 0.05, size=(4, 1)).astype(np.float16).view(np.uint8)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny")
    writer.add_tensor("blk.0.attn_q.weight", raw, raw_dtype=gguf.GGMLQuantizationType.Q5_0)
    writer.add_tensor("output_norm.weight", rng.normal(size=64).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


def _rewritten_model(site: Path, tmp_path: Path) -> tuple[PackagedModel, str]:
    """A fake packaged model whose file has a Q5_0 tensor, its re-write pinned as packaged.py pins
    the 0.5B's; the re-write made twice must give the same bytes (else nothing could be pinned)."""
    data = _q5_0_gguf(tmp_path / "source.gguf")
    half = len(data) // 2 + 1
    model = fake_model(site, [data[:half], data[half:]])
    hashes = []
    for n in (1, 2):
        packaged.rewrite_q5_0(tmp_path / "source.gguf", tmp_path / f"rewrite{n}.gguf")
        hashes.append(hashlib.sha256((tmp_path / f"rewrite{n}.gguf").read_bytes()).hexdigest())
    assert hashes[0] == hashes[1]  # deterministic
    size = (tmp_path / "rewrite1.gguf").stat().st_size
    return dataclasses.replace(model, rewrite_q5_0=True, rewritten_size=size, rewritten_sha256=hashes[0]), hashes[0]


def test_a_flipped_byte_in_the_rewritten_file_is_rewritten_not_loaded(site, tmp_path, capsys):
    model, pinned = _rewritten_model(site, tmp_path)
    path = packaged.model_file(model)
    assert path.name == "fake-model.q8_0.gguf" and hashlib.sha256(path.read_bytes()).hexdigest() == pinned
    assert "re-writing its Q5_0 tensors" in capsys.readouterr().err
    data = bytearray(path.read_bytes())
    data[-7] ^= 1  # a weight's bit, the size unchanged
    path.write_bytes(bytes(data))
    # a stamp beside it claiming the flipped file is good counts for nothing (the old check trusted it)
    flipped = hashlib.sha256(bytes(data)).hexdigest()
    (path.parent / (path.name + ".json")).write_text(
        f'{{"source_sha256": "{model.sha256}", "sha256": "{flipped}", "size": {len(data)}}}')
    cache_files._HASHED.clear()  # a new process
    assert packaged.model_file(model) == path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == pinned
    assert "re-writing its Q5_0 tensors" in capsys.readouterr().err


def test_a_rewrite_that_differs_from_the_pin_is_refused_and_not_published(site, tmp_path):
    model, _ = _rewritten_model(site, tmp_path)
    wrong = dataclasses.replace(model, rewritten_sha256="0" * 64)
    with pytest.raises(ConfigError, match=r"not the pinned .* bytes 0000000000000000\.\.\. \(made with gguf 0\.19\.0") as err:
        packaged.model_file(wrong)
    assert "pip install --no-deps gguf==0.19.0" in str(err.value) and "\n" not in str(err.value)
    cache = tmp_path / "cache" / "models"
    assert not (cache / "fake-model.q8_0.gguf").exists() and not list(cache.glob(".fake-model.q8_0.gguf.tmp-*"))


# ----- parts sized before copying --------------------------------------------------------------


def test_an_oversized_part_is_refused_before_a_byte_is_copied(site, tmp_path):
    model = fake_model(site, [b"x" * 100, b"y" * 100, b"z" * 10])
    part = site / "reinagent_fake_part2" / "data" / "part02.bin"
    os.truncate(part, 2 << 30)  # 2 GB, sparse: it costs no disk, but copying it would read 2 GB
    with pytest.raises(ConfigError) as err:
        packaged.model_file(model)
    assert "part reinagent-fake-part2 of local:fake-model holds 2,147,483,648 bytes, not the published 100" in str(err.value)
    assert not (tmp_path / "cache" / "models").exists()  # nothing was copied: not even a folder made


# ----- stamps and indexes: bounded regular files -----------------------------------------------


def _finishes(call, timeout: float = 120.0):
    """call() in a thread; its result, or a failure when it has not returned by `timeout`."""
    out: list = []
    thread = threading.Thread(target=lambda: out.append(call()), daemon=True)
    thread.start()
    thread.join(timeout)
    assert out, f"{call} did not return in {timeout} s (it blocks on a planted file)"
    return out[0]


def test_a_planted_fifo_or_device_in_place_of_the_digest_index_is_read_as_no_index(tmp_path):
    from reinagent.llm import checkpoint_key as ck

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text('{"model_type": "llama"}')
    cache = tmp_path / "models"
    key = ck.checkpoint_key(ckpt, cache)
    (cache / "digests.json").unlink()
    os.mkfifo(cache / "digests.json")  # a plain open() of it waits for a writer forever
    assert _finishes(lambda: ck.checkpoint_key(ckpt, cache)) == key
    (cache / "digests.json").unlink()
    (cache / "digests.json").symlink_to("/dev/zero")  # read_text() of it fills memory
    assert _finishes(lambda: ck.checkpoint_key(ckpt, cache)) == key
    assert (cache / "digests.json").is_file() and not (cache / "digests.json").is_symlink()  # saved anew
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    assert _finishes(lambda: cache_files.read_json(tmp_path / "zero.json")) is None
    big = tmp_path / "big.json"
    big.write_text("[" + "0," * (cache_files.MAX_STAMP_BYTES // 2) + "0]")
    assert cache_files.read_json(big) is None  # over the bound: not parsed
    assert cache_files.file_sha256(tmp_path / "ckpt") is None  # a folder is not hashed as a file


# ----- full disk, ulimit -f, read-only cache ---------------------------------------------------


@pytest.mark.parametrize(("code", "says"), [
    (errno.ENOSPC, "the disk is full"), (errno.EFBIG, "a file size limit (ulimit -f) stops the write"),
    (errno.EDQUOT, "the disk quota is used up"), (errno.EROFS, "it is on a read-only filesystem"),
])
def test_disk_errors_while_writing_the_cache_are_one_line_naming_the_fix(tmp_path, code, says):
    with pytest.raises(ConfigError) as err, writing(tmp_path, "local:x", needs=2 * 10**9):
        raise OSError(code, os.strerror(code))
    line = str(err.value)
    assert line.startswith(f"local:x: cannot write the models cache {tmp_path}: {says}") and "\n" not in line
    assert "REINAGENT_CACHE_DIR" in line
    if code in (errno.ENOSPC, errno.EDQUOT):
        assert "free space there (about 2.0 GB)" in line
    if code == errno.EFBIG:
        assert "lift the limit (ulimit -f unlimited) (about 2.0 GB)" in line


def test_other_os_errors_and_unreadable_sources_are_not_called_a_cache_problem(tmp_path):
    with pytest.raises(FileNotFoundError), writing(tmp_path, "local:x"):
        raise FileNotFoundError(errno.ENOENT, "gone")
    with pytest.raises(PermissionError), writing(tmp_path, "local:x"):  # the cache is writable: not its fault
        raise PermissionError(errno.EACCES, "a source file")


def test_a_cache_folder_not_writable_by_you_is_named_so(tmp_path, monkeypatch):
    """What a non-root user meets in a chmod'ed cache (root here is not stopped by chmod, so the
    folder's answer to access(2) stands in)."""
    monkeypatch.setattr(cache_files, "_can_write", lambda folder: folder != tmp_path)
    with pytest.raises(ConfigError, match=r"^local:x: cannot write the models cache .*: it is not writable by you "
                                          r"\(Permission denied\); make it writable, or set REINAGENT_CACHE_DIR"):
        with writing(tmp_path, "local:x"):
            raise PermissionError(errno.EACCES, "Permission denied")


def _can_mount_read_only(tmp_path: Path) -> bool:
    if os.geteuid() != 0:
        return True  # chmod does it
    probe = tmp_path / "probe"
    probe.mkdir()
    done = subprocess.run(["unshare", "-m", "sh", "-c", f'mount --bind {probe} {probe} && mount -o remount,ro,bind {probe} {probe}'],
                          capture_output=True)
    return done.returncode == 0


def test_a_file_size_limit_while_assembling_is_one_line_exit_2(site, tmp_path):
    model = fake_model(site, [b"a" * 40_000, b"b" * 40_000])
    proc = cli_with_fake_model(model, site, tmp_path / "cache", tmp_path / "run", fsize=16_384)
    assert proc.returncode == 2, proc.stderr
    one_line_error(_only_errors(proc), "local:fake-model: cannot write the models cache",
                   "a file size limit (ulimit -f) stops the write", "REINAGENT_CACHE_DIR")
    assert proc.stderr.count("assembling 2 parts") == 1  # tried once, not once per question about the file
    assert not (tmp_path / "run").exists()
    assert not (tmp_path / "cache" / "models" / "fake-model.gguf").exists()


def test_a_read_only_empty_cache_is_one_line_exit_2(site, tmp_path):
    if not _can_mount_read_only(tmp_path):
        pytest.skip("root here cannot make a read-only bind mount (unshare -m), and chmod does not stop root")
    model = fake_model(site, [b"a" * 1000, b"b" * 10])
    cache = tmp_path / "cache"
    cache.mkdir()
    proc = cli_with_fake_model(model, site, cache, tmp_path / "run", read_only=cache)
    assert proc.returncode == 2, proc.stderr
    line = one_line_error(_only_errors(proc), "local:fake-model: cannot write the models cache", "REINAGENT_CACHE_DIR")
    assert "read-only filesystem" in line or "not writable by you" in line
    assert not (tmp_path / "run").exists()


def test_a_read_only_cache_holding_verified_files_says_the_engine_needs_write_access(site, tmp_path):
    """The files verify, so nothing is written; but OpenVINO GenAI opens a GGUF file O_RDWR (strace
    of 2026.4.1), and it failed with "Failed to open ... with gguf_open" and a hint about the
    model path and the local extra. Now one line says why and what to do, before the engine runs."""
    pytest.importorskip("openvino_genai")
    if not _can_mount_read_only(tmp_path):
        pytest.skip("root here cannot make a read-only bind mount (unshare -m), and chmod does not stop root")
    model = fake_model(site, [b"GGUF" + b"a" * 996, b"b" * 10])
    cache = tmp_path / "cache"
    packaged.model_file(model)  # assembled and verified while writable
    before = sorted(p.name for p in (cache / "models").iterdir())
    proc = cli_with_fake_model(model, site, cache, tmp_path / "run", read_only=cache)
    assert proc.returncode == 2, proc.stderr
    line = one_line_error(_only_errors(proc), "fake-model.gguf", "OpenVINO GenAI opens a GGUF file for writing",
                          "REINAGENT_CACHE_DIR")
    assert ("read-only filesystem" in line) == (os.geteuid() == 0)
    assert sorted(p.name for p in (cache / "models").iterdir()) == before
    assert not (tmp_path / "run").exists()  # the run that never started leaves no directory


def _only_errors(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """The child's stderr without the progress lines a run prints before it fails."""
    said = ("run directory:", "run id:", "loading model", "local:fake-model: assembling", "removed ",
            "warning: response cache")  # the response cache is in the read-only cache too: run without it
    kept = [line for line in proc.stderr.splitlines() if not line.startswith(said)]
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout, "\n".join(kept) + "\n")


def test_a_full_disk_while_dequantising_and_on_the_hf_engine_is_one_line(tmp_path, monkeypatch):
    """The dequantised copy (`hf`, `--precision exact`, distillation) writes the same cache: a full
    disk there is the same one line, and the hf engine passes it on as it is, not as "failed to load"."""
    import asyncio

    from reinagent.llm import hf, local

    def full(gguf, target):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(local, "_convert_gguf", full)
    with pytest.raises(ConfigError, match=r"the dequantised copy of m\.gguf: cannot write the models cache .*: the disk is full"):
        local.convert_gguf(tmp_path / "m.gguf", tmp_path / "models" / "m-123")

    def cannot(source, device, cache_root):
        local.convert_gguf(tmp_path / "m.gguf", tmp_path / "models" / "m-123")

    pytest.importorskip("torch")
    monkeypatch.setattr(hf, "_load", cannot)
    monkeypatch.setattr(hf, "_WORKERS", {})  # a worker an earlier test loaded would answer without _load
    llm = hf.HFLLM(None, name="hf")
    from reinagent.llm.base import GenerationParams
    from reinagent.records import Message

    with pytest.raises(ConfigError, match="the disk is full"):
        asyncio.run(llm.generate([Message(role="user", content="Hi")], GenerationParams(max_tokens=1)))


def test_a_gguf_file_you_cannot_write_is_named_before_the_engine_opens_it(tmp_path, monkeypatch):
    """As a non-root user meets it (chmod 444): access(2) says no, and the one line says why."""
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    cache_files.check_engine_can_open(model)  # writable: nothing to say
    cache_files.check_engine_can_open(tmp_path)  # an IR folder: the engine does not write it
    monkeypatch.setattr(cache_files.os, "access", lambda path, mode: mode != os.W_OK)
    with pytest.raises(ConfigError, match=r"^model file .*m\.gguf is not writable by you, and OpenVINO GenAI opens a GGUF "
                                          r"file for writing even to read it; make it writable"):
        cache_files.check_engine_can_open(model)
