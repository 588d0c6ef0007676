"""`local:HF_DIR` on OpenVINO: a checkpoint of the embedded model written once as GGUF
(reinagent.llm.gguf_export), checked on the real dequantised embedded model.

The round trip reads the written file back with transformers' own GGUF loader (an independent
reading of llama.cpp's layout, q/k permutation included) and compares every tensor with the
source. The engine test compares OpenVINO's greedy reply with transformers' on the same
directory. Nothing here asserts timing."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from reinagent.errors import ConfigError
from reinagent.llm import gguf_export, local, make_llm, on_openvino
from reinagent.llm.base import GenerationParams


def _embedded_available() -> bool:
    try:
        local.embedded_gguf()
    except ConfigError:
        return False
    return all(importlib.util.find_spec(m) is not None for m in ("transformers", "gguf", "safetensors", "openvino_genai"))


pytestmark = pytest.mark.skipif(not _embedded_available(), reason="needs the embedded model and the local and hf extras")


@pytest.fixture(scope="module")
def hf_dir() -> Path:
    """The dequantised embedded model: a plain HF directory, as training writes one."""
    folder = local.converted_dir(local.embedded_gguf())
    if not (folder / "config.json").is_file():
        local.convert_gguf(local.embedded_gguf(), folder)
    return folder


@pytest.fixture(scope="module")
def cache(tmp_path_factory, hf_dir) -> Path:
    """A private cache root holding the default (F16) GGUF copy of `hf_dir`, written once."""
    root = tmp_path_factory.mktemp("cache")
    gguf_export.write_gguf(hf_dir, gguf_export.gguf_file(hf_dir, local.models_cache(str(root))), local.embedded_gguf())
    return root


def like(hf_dir: Path, into: Path, **config) -> Path:
    """A checkpoint folder sharing `hf_dir`'s weights and tokenizer (links), its config changed."""
    into.mkdir()
    for item in hf_dir.iterdir():
        if item.name != "config.json":
            (into / item.name).symlink_to(item)
    data = json.loads((hf_dir / "config.json").read_text())
    (into / "config.json").write_text(json.dumps({**data, **config}))
    return into


# ----- the file: names, layout, values --------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("tensor_type", ["F32", "F16"])
def test_round_trip_through_transformers_gguf_loader(hf_dir, cache, tmp_path, tensor_type):
    """Every tensor transformers reads back from our file equals the source (F32), or the
    source rounded to fp16 (F16; the RMS norms stay F32). Without llama.cpp's q/k permutation
    (or with k permuted by the query heads) attn q/k come back scrambled and this fails."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    if tensor_type == "F16":
        path = gguf_export.gguf_file(hf_dir, local.models_cache(str(cache)))  # the default type, written by the fixture
    else:
        path = tmp_path / "m.gguf"
        gguf_export.write_gguf(hf_dir, path, local.embedded_gguf(), tensor_type)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    back = model.state_dict()
    source = load_file(str(hf_dir / "model.safetensors"))
    assert source and set(source) <= set(back)
    for name, value in source.items():
        want = value.half().float() if tensor_type == "F16" and value.dim() > 1 else value
        assert torch.equal(back[name], want), name


def test_tensor_names_and_permutation_are_llama_cpps():
    import numpy as np

    assert gguf_export.gguf_name("model.embed_tokens.weight") == "token_embd.weight"
    assert gguf_export.gguf_name("model.layers.12.self_attn.k_proj.weight") == "blk.12.attn_k.weight"
    assert gguf_export.gguf_name("model.layers.3.mlp.down_proj.weight") == "blk.3.ffn_down.weight"
    assert gguf_export.gguf_name("lm_head.weight") == "output.weight"
    assert gguf_export.gguf_name("model.layers.0.self_attn.rotary_emb.inv_freq") is None
    # one head of dimension 4: rows (0, 1 | 2, 3) in rotate-half order -> pairs (0, 2), (1, 3)
    rows = np.arange(4).reshape(4, 1)
    assert gguf_export.permute(rows, 1).ravel().tolist() == [0, 2, 1, 3]
    # k: 2 query heads over 1 KV head permute as 1 head
    assert gguf_export.permute(np.arange(4).reshape(4, 1), 2, 1).ravel().tolist() == [0, 2, 1, 3]


def test_a_failed_write_leaves_no_file(hf_dir, tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(gguf_export, "_add", fail)
    target = tmp_path / "out" / "m.gguf"
    target.parent.mkdir()
    stale, live = target.parent / ".m.gguf.tmp-1-killed", target.parent / ".m.gguf.tmp-2-writing"
    stale.write_bytes(b"GGUF")
    live.write_bytes(b"GGUF")
    os.utime(stale, (1, 1))  # killed long ago; `live` may be another process writing now
    with pytest.raises(OSError, match="disk full"):
        gguf_export.write_gguf(hf_dir, target, local.embedded_gguf())
    assert list(target.parent.iterdir()) == [live]


# ----- routing and the engine -----------------------------------------------------------------


@pytest.mark.slow
def test_local_hf_dir_runs_on_openvino_with_transformers_greedy_text(hf_dir, cache, monkeypatch):
    """The agreement measure (docs/cli.md "Models"): of 4 arithmetic20 actor prompts, at least 3
    greedy texts equal transformers f32's. Decoded one sequence at a time (deterministic), so the
    texts do not depend on how a busy machine happens to batch the requests. Not all 4: the CPU
    plugin computes in bf16 where the CPU has it, which flips near-tie tokens (25 of 30 equal in
    perf/gguf_checkpoint.py; 30 of 30 with f32 inference). A wrong layout agrees on none."""
    from reinagent.benchmarks import make
    from reinagent.config import build_config
    from reinagent.llm.hf import HFLLM
    from reinagent.llm.openvino import OpenVINOLLM
    from reinagent.memory import MemoryView
    from reinagent.strategy import ReflexionStrategy

    monkeypatch.setenv("REINAGENT_CACHE_DIR", str(cache))
    llm = make_llm(f"local:{hf_dir}", deterministic=True)
    assert isinstance(llm, OpenVINOLLM) and on_openvino(f"local:{hf_dir}")
    assert isinstance(make_llm(f"hf:{hf_dir}"), HFLLM)  # hf:PATH stays transformers
    from reinagent.runner import make_spec
    from reinagent.plan import resolve

    # actions constrained by default, as for `local` (the OpenVINO engine has structured output)
    assert make_spec(resolve(build_config(model=f"local:{hf_dir}", agent="react"), task_ids=(), check_models=False)).settings["constrained"] is True
    bench = make("arithmetic20")
    agent = bench.make_agent("cot", build_config(benchmark="arithmetic20", model="local"))
    chats = [agent.prompt(task, MemoryView(1, ReflexionStrategy.NONE)) for task in bench.load_tasks("test")[:4]]
    params = GenerationParams(max_tokens=24)

    async def both():
        ov = await asyncio.gather(*(llm.generate(chat, params) for chat in chats))
        info = llm.load_info
        await llm.aclose()
        hf = make_llm(f"hf:{hf_dir}")
        return ov, info, [await hf.generate(chat, params) for chat in chats]

    ov, info, hf = asyncio.run(both())
    assert info["engine"] == "openvino-genai" and info["source"] == "cache"  # the fixture's file, reused
    assert info["path"] == str(gguf_export.gguf_file(hf_dir, local.models_cache(str(cache))))
    assert all(c.text for c in hf)
    equal = sum(a.text == b.text for a, b in zip(ov, hf, strict=True))
    assert equal >= 3, [(a.text, b.text) for a, b in zip(ov, hf, strict=True)]


def test_another_family_falls_back_to_transformers_with_one_line(hf_dir, tmp_path, capsys):
    from reinagent.llm.hf import HFLLM

    other = like(hf_dir, tmp_path / "small", num_hidden_layers=2)
    llm = make_llm(f"local:{other}")
    assert isinstance(llm, HFLLM) and not on_openvino(f"local:{other}")
    make_llm(f"local:{other}")  # the reflector's copy: said once
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "num_hidden_layers 2" in lines[0] and "transformers" in lines[0]
    assert lines[0].startswith(f"local:{other}: ") and "Traceback" not in lines[0]


def test_another_tokenizer_falls_back(hf_dir, tmp_path):
    other = like(hf_dir, tmp_path / "tok")
    (other / "tokenizer.json").unlink()
    tok = json.loads((hf_dir / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    a, b = "hello", "world"
    vocab[a], vocab[b] = vocab[b], vocab[a]  # two ids swapped: another tokenizer
    (other / "tokenizer.json").write_text(json.dumps(tok))
    assert "vocabulary" in gguf_export.mismatch(other, local.embedded_gguf())
    assert not on_openvino(f"local:{other}")
    other2 = like(hf_dir, tmp_path / "qwen", model_type="qwen2", architectures=["Qwen2ForCausalLM"])
    assert "qwen2" in gguf_export.mismatch(other2, local.embedded_gguf())


def test_a_broken_checkpoint_falls_back_without_a_traceback(hf_dir, tmp_path):
    broken = like(hf_dir, tmp_path / "broken")
    (broken / "config.json").write_text("{not json")
    assert "could not be read" in local.transformers_reason(broken)
    assert not on_openvino(f"local:{broken}")
    rope = like(hf_dir, tmp_path / "rope", rope_parameters={"rope_theta": 100000.0, "rope_type": "linear", "factor": 2.0})
    assert "rope" in gguf_export.mismatch(rope, local.embedded_gguf())


def test_without_openvino_a_checkpoint_stays_on_transformers(hf_dir, monkeypatch):
    monkeypatch.setattr(local, "has_openvino", lambda: False)
    assert "OpenVINO GenAI is not installed" in local.transformers_reason(hf_dir)
    assert not on_openvino(f"local:{hf_dir}")


def test_exact_on_a_hf_dir_keeps_the_optimum_export(hf_dir, monkeypatch):
    monkeypatch.setattr(local, "can_export", lambda: False)
    assert local.transformers_reason(hf_dir, "exact").startswith("precision exact on a HF directory needs optimum-intel")
    assert not on_openvino(f"local:{hf_dir}", "exact")
    with pytest.raises(ConfigError, match="optimum-intel"):
        local.check_exportable(hf_dir, "exact")
    local.check_exportable(hf_dir, "fast")  # fast needs no export tool: the GGUF writer
    monkeypatch.setattr(local, "can_export", lambda: True)
    assert on_openvino(f"local:{hf_dir}", "exact")


# ----- the cache --------------------------------------------------------------------------------


def test_cache_reuses_the_file_and_a_newer_config_writes_a_new_one(hf_dir, tmp_path, monkeypatch):
    """Keyed like the IR export: the contents of the checkpoint's files (and the tensor type)."""
    ckpt = like(hf_dir, tmp_path / "ckpt")
    written: list[Path] = []

    def counting(folder, target, reference, tensor_type=None):  # the writer itself is the round trip's test
        written.append(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"GGUF")

    monkeypatch.setattr(gguf_export, "write_gguf", counting)
    root = str(tmp_path / "cache")
    first = local.prepare(ckpt, "fast", root)
    assert first.source == "exported" and first.path.is_file() and first.path.parent == Path(root) / "models"
    inode = first.path.stat().st_ino
    again = local.prepare(ckpt, "fast", root)
    assert again == local.Prepared(first.path, "cache") and len(written) == 1 and first.path.stat().st_ino == inode
    data = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**data, "torch_dtype": "float32"}))  # training wrote it again
    newer = local.prepare(ckpt, "fast", root)
    assert newer.source == "exported" and newer.path != first.path and len(written) == 2
    made = sorted(p.name for p in (Path(root) / "models").iterdir() if p.name != "digests.json")
    assert made == sorted([first.path.name, newer.path.name])


@pytest.mark.slow
def test_preflight_asks_for_both_extras_for_a_checkpoint_on_openvino(hf_dir, tmp_path):
    from reinagent.llm import needed_extras

    other = like(hf_dir, tmp_path / "small", num_hidden_layers=2)
    assert needed_extras((f"local:{hf_dir}",)) == ["local", "hf"]
    assert needed_extras((f"local:{other}",)) == ["hf"]
    shutil.rmtree(other)


@pytest.mark.slow
def test_an_untied_output_weight_is_written_and_read(hf_dir, tmp_path, monkeypatch):
    """A checkpoint with its own lm_head (tie_word_embeddings false) gets an output.weight that
    OpenVINO uses: with the embedding's rows shuffled into lm_head both engines say the same
    gibberish (were output.weight ignored, OpenVINO would answer in English)."""
    import torch
    from safetensors.torch import load_file, save_file

    from reinagent.records import Message

    untied = tmp_path / "untied"
    untied.mkdir()
    for item in hf_dir.iterdir():
        if item.name not in ("config.json", "model.safetensors"):
            (untied / item.name).symlink_to(item)
    config = json.loads((hf_dir / "config.json").read_text())
    (untied / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": False}))
    weights = load_file(str(hf_dir / "model.safetensors"))
    embed = weights["model.embed_tokens.weight"]
    weights["lm_head.weight"] = embed[torch.randperm(embed.shape[0], generator=torch.Generator().manual_seed(0))].clone()
    save_file(weights, str(untied / "model.safetensors"), metadata={"format": "pt"})
    monkeypatch.setenv("REINAGENT_CACHE_DIR", str(tmp_path / "cache"))
    question = [Message(role="user", content="What is the capital of France?")]

    async def both():
        texts = []
        for model in (f"local:{untied}", f"hf:{untied}"):
            llm = make_llm(model)
            texts.append((await llm.generate(question, GenerationParams(max_tokens=12))).text)
            await llm.aclose()
        return texts

    ov, hf = asyncio.run(both())
    assert ov == hf and "Paris" not in ov
