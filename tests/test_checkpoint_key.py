"""The cached GGUF/IR copies of `local:HF_DIR` are keyed on what the checkpoint holds (issue 45
item 5): new weights under an untouched config.json get a new copy; an unchanged checkpoint is
neither copied nor hashed again. The writers are replaced by recorders (their own tests are in
tests/test_local_gguf_export.py), so nothing here needs a model or the extras."""

from __future__ import annotations

import os
from pathlib import Path

from reinagent.llm import checkpoint_key as ck
from reinagent.llm import gguf_export, local


def checkpoint(folder: Path, weights: bytes) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "tokenizer.json").write_text('{"model": {}}')
    (folder / "model.safetensors").write_bytes(weights)
    return folder


def rewrite_keeping_stamp(path: Path, data: bytes) -> None:
    """New contents of the same size with the old mtime, as a copy with preserved times leaves it."""
    st = path.stat()
    assert len(data) == st.st_size
    path.write_bytes(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_new_weights_under_the_same_config_get_a_new_gguf(tmp_path, monkeypatch):
    ckpt = checkpoint(tmp_path / "ckpt", b"A" * 4096)
    written: list[Path] = []

    def recording(folder, target, reference, tensor_type=None):
        written.append(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"GGUF")

    monkeypatch.setattr(gguf_export, "write_gguf", recording)
    monkeypatch.setattr(local, "embedded_gguf", lambda: tmp_path / "embedded.gguf")
    root = str(tmp_path / "cache")
    config_mtime = (ckpt / "config.json").stat().st_mtime_ns
    first = local.prepare(ckpt, "fast", root)
    assert first.source == "exported" and len(written) == 1
    assert local.prepare(ckpt, "fast", root) == local.Prepared(first.path, "cache")
    rewrite_keeping_stamp(ckpt / "model.safetensors", b"B" * 4096)  # training wrote new weights only
    assert (ckpt / "config.json").stat().st_mtime_ns == config_mtime
    second = local.prepare(ckpt, "fast", root)
    assert second.source == "exported" and second.path != first.path and len(written) == 2


def test_the_ir_export_is_keyed_on_the_weights_too(tmp_path):
    ckpt = checkpoint(tmp_path / "ckpt", b"A" * 64)
    root = str(tmp_path / "cache")
    before = local.ir_dir(ckpt, root)
    assert local.ir_dir(ckpt, root) == before
    rewrite_keeping_stamp(ckpt / "model.safetensors", b"C" * 64)
    assert local.ir_dir(ckpt, root) != before


def test_an_unchanged_checkpoint_is_hashed_once_and_a_touched_one_keeps_its_key(tmp_path, monkeypatch):
    ckpt = checkpoint(tmp_path / "ckpt", b"A" * 64)
    cache = tmp_path / "models"
    hashed: list[str] = []
    real = ck._file_digest

    def counting(path):
        hashed.append(path.name)
        return real(path)

    monkeypatch.setattr(ck, "_file_digest", counting)
    key = ck.checkpoint_key(ckpt, cache)
    assert sorted(hashed) == ["config.json", "model.safetensors", "tokenizer.json"]
    assert ck.checkpoint_key(ckpt, cache) == key and len(hashed) == 3  # remembered in digests.json
    st = (ckpt / "config.json").stat()
    os.utime(ckpt / "config.json", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched, same bytes
    assert ck.checkpoint_key(ckpt, cache) == key and hashed[3:] == ["config.json"]
    (ckpt / "optimizer.pt").write_bytes(b"state")  # not part of the model
    assert ck.checkpoint_key(ckpt, cache) == key


def test_a_garbled_digest_index_is_recomputed_not_fatal(tmp_path):
    ckpt = checkpoint(tmp_path / "ckpt", b"A" * 64)
    cache = tmp_path / "models"
    key = ck.checkpoint_key(ckpt, cache)
    (cache / "digests.json").write_text("{not json")
    assert ck.checkpoint_key(ckpt, cache) == key


def test_the_chat_template_files_are_part_of_the_key(tmp_path):
    """Issue 54: chat_template.jinja (read before tokenizer_config.json's template by gguf_export
    and transformers) was not keyed, so an edited template reused the stale converted model."""
    ckpt = checkpoint(tmp_path / "ckpt", b"A" * 64)
    cache = tmp_path / "models"
    (ckpt / "chat_template.jinja").write_text("{{ messages }}")
    key = ck.checkpoint_key(ckpt, cache)
    (ckpt / "chat_template.jinja").write_text("{{ messages }}!")
    edited = ck.checkpoint_key(ckpt, cache)
    assert edited != key
    (ckpt / "additional_chat_templates").mkdir()  # transformers' named templates
    (ckpt / "additional_chat_templates" / "tool_use.jinja").write_text("{{ tools }}")
    named = ck.checkpoint_key(ckpt, cache)
    assert named != edited
    (ckpt / "additional_chat_templates" / "tool_use.jinja").write_text("{{ tools }}!")
    assert ck.checkpoint_key(ckpt, cache) != named
    root = str(tmp_path / "cache")
    before = gguf_export.gguf_file(ckpt, local.models_cache(root))
    (ckpt / "chat_template.jinja").write_text("{{ messages }}?")
    assert gguf_export.gguf_file(ckpt, local.models_cache(root)) != before  # the GGUF copy is made again
