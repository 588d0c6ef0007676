"""A Hugging Face checkpoint of the embedded model, written once as a GGUF file for OpenVINO GenAI.

A checkpoint of training (`reinagent rl train`, distillation) is a HF directory. transformers runs
it one `generate()` at a time; OpenVINO GenAI reads a GGUF file directly (its llama reader) and
batches. So `local:HF_DIR` at precision `fast` writes the checkpoint once as GGUF into the models
cache and the engine loads that, exactly as it loads the embedded model's own file.

What is supported, and checked before anything is written (`mismatch`): a LlamaForCausalLM whose
shape (hidden size, layers, heads, KV heads, FFN size, vocab, rope, norm epsilon) equals the
embedded SmolLM2-135M-Instruct's and whose tokenizer is the embedded one (vocab, merges, special
tokens). Then every metadata key of the embedded GGUF (hyper-parameters, tokenizer) is copied
as it is; only the chat template is the checkpoint's own. Anything else (another family, another
tokenizer, weights not in safetensors) stays on transformers (`reinagent.llm.make_llm` says why
in one line).

Tensors are named and laid out as llama.cpp's convert_hf_to_gguf.py does for LlamaForCausalLM,
with its q/k row permutation (HF's rotate-half rope layout -> GGUF's interleaved pairs), which
transformers' GGUF loader undoes (tests/test_local_gguf_export.py checks the round trip).

Tensor type: F16 (TENSOR_TYPE; docs/cli.md "Models"). Measured on the dequantised embedded model,
30 arithmetic20 actor prompts, greedy, 32 new tokens (perf/gguf_checkpoint.py, shared 2 cores):
F16 25 of 30 texts equal to transformers f32's at 232 tok/s batched (30 of 30 with f32 inference:
the five are the CPU plugin's bf16 arithmetic, not the F16 weights); Q8_0 13 of 30 at 199 tok/s;
transformers one call at a time 16 tok/s. F32 is refused by OpenVINO GenAI 2026.4's GGUF reader
("Unsupported quantization type"), so it is written only for checks. 1-D tensors (the RMS norms)
stay F32, as llama.cpp keeps them. An untied lm_head is written as output.weight, which OpenVINO
reads (tested).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
import uuid
from functools import lru_cache
from pathlib import Path
from typing import Any

TENSOR_TYPES = ("F16", "Q8_0", "F32")  # F32: the writer's, for checks; OpenVINO GenAI does not read it
# F16: nearly twice Q8_0's agreement with transformers (25 vs 13 of 30 greedy texts) at about the
# same speed (faster in one run, 13 % slower in another); both ~14x transformers one call at a time
TENSOR_TYPE = "F16"
_FILE_TYPE = {"F32": 0, "F16": 1, "Q8_0": 7}  # llama.cpp's LlamaFileType (general.file_type)
_NEEDS = ("gguf", "safetensors", "torch")

# config.json field -> the embedded GGUF's key that must hold the same value
_SHAPE = {
    "hidden_size": "llama.embedding_length", "num_hidden_layers": "llama.block_count",
    "num_attention_heads": "llama.attention.head_count", "num_key_value_heads": "llama.attention.head_count_kv",
    "intermediate_size": "llama.feed_forward_length", "vocab_size": "llama.vocab_size",
    "max_position_embeddings": "llama.context_length",
}

_LAYER = {  # HF name inside model.layers.N -> GGUF name inside blk.N
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
}
_TOP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}


def gguf_name(hf_name: str) -> str | None:
    """llama.cpp's name for a LlamaForCausalLM tensor; None for one it has no place for."""
    if hf_name in _TOP:
        return _TOP[hf_name]
    parts = hf_name.split(".", 3)  # model layers N rest
    if len(parts) == 4 and parts[:2] == ["model", "layers"] and parts[2].isdigit() and parts[3] in _LAYER:
        return f"blk.{parts[2]}.{_LAYER[parts[3]]}"
    return None


def permute(weights, n_head: int, n_head_kv: int | None = None):
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's rows from rotate-half order
    (first half, second half) to interleaved pairs, the order llama.cpp's rope expects."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def gguf_file(hf_folder: Path, cache: Path, tensor_type: str | None = None) -> Path:
    """Where the GGUF copy of `hf_folder` lives in the models folder `cache`: keyed like
    `reinagent.llm.local.ir_dir` (the contents of its weights, config and tokenizer) and the
    tensor type, so new weights under an unchanged config.json get a new copy."""
    from reinagent.llm.checkpoint_key import checkpoint_key

    tensor_type = tensor_type or TENSOR_TYPE
    key = hashlib.sha256(f"{checkpoint_key(hf_folder, cache)}:{tensor_type}".encode()).hexdigest()[:10]
    return cache / f"{hf_folder.name}-{key}-{tensor_type.lower()}.gguf"


def mismatch(hf_folder: Path, reference: Path) -> str | None:
    """None when `hf_folder` can be written as a GGUF file with the metadata of `reference` (the
    embedded model's GGUF); otherwise why not, in a few words. Cached per folder and
    config/tokenizer mtimes (it reads the reference's tokenizer: seconds)."""
    stamps = tuple(_mtime(hf_folder / name) for name in ("config.json", "tokenizer.json"))
    return _mismatch(str(hf_folder.resolve()), str(reference), stamps)


@lru_cache(maxsize=32)
def _mismatch(folder: str, reference: str, _stamps: tuple) -> str | None:
    try:
        return _check(Path(folder), reference)
    except Exception as err:  # noqa: BLE001 - a broken file (JSON, safetensors header): transformers will say more
        return f"its files could not be read as a llama checkpoint ({type(err).__name__}: {err})"


def _check(hf: Path, reference: str) -> str | None:
    missing = [name for name in _NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        return f"writing it as GGUF needs {', '.join(missing)} (pip install 'reinagent[hf]')"
    config = json.loads((hf / "config.json").read_text())
    if config.get("model_type") != "llama" or "LlamaForCausalLM" not in (config.get("architectures") or []):
        return f"model_type {config.get('model_type')!r} is not the embedded model's llama (LlamaForCausalLM)"
    fields = _reference(reference)
    for name, key in _SHAPE.items():
        if config.get(name) != fields[key]:
            return f"{name} {config.get(name)} differs from the embedded model's {fields[key]}"
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    if head_dim != fields["llama.rope.dimension_count"]:
        return f"head_dim {head_dim} differs from the embedded model's {fields['llama.rope.dimension_count']}"
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}  # transformers 5 / 4
    theta = rope.get("rope_theta", config.get("rope_theta"))
    kind = rope.get("rope_type", rope.get("type", "default"))
    if theta != fields["llama.rope.freq_base"] or kind != "default":
        return f"rope ({theta}, {kind}) differs from the embedded model's ({fields['llama.rope.freq_base']}, default)"
    if abs(config.get("rms_norm_eps", 0) - fields["llama.attention.layer_norm_rms_epsilon"]) > 1e-9:
        return f"rms_norm_eps {config.get('rms_norm_eps')} differs from the embedded model's"
    if config.get("attention_bias") or config.get("mlp_bias") or config.get("hidden_act", "silu") != "silu":
        return "biases or an activation other than silu: not the embedded model's layers"
    names = _tensor_names(hf)
    if names is None:
        return "its weights are not in safetensors files"
    unknown = sorted(n for n in names if gguf_name(n) is None)
    if unknown:
        return f"tensor {unknown[0]} has no place in a llama GGUF"
    wanted = {"model.embed_tokens.weight", "model.norm.weight"} | {
        f"model.layers.{i}.{part}" for i in range(config["num_hidden_layers"]) for part in _LAYER}
    if not config.get("tie_word_embeddings", False):  # LlamaConfig's default: untied
        wanted.add("lm_head.weight")
    absent = sorted(wanted - set(names))
    if absent:
        return f"tensor {absent[0]} is missing"
    return _tokenizer_mismatch(hf, fields)


def _tokenizer_mismatch(hf: Path, fields: dict[str, Any]) -> str | None:
    path = hf / "tokenizer.json"
    if not path.is_file():
        return "it has no tokenizer.json to compare with the embedded tokenizer"
    tok = json.loads(path.read_text())
    model = tok.get("model") or {}
    tokens, merges = fields["tokenizer.ggml.tokens"], fields["tokenizer.ggml.merges"]
    vocab = model.get("vocab") or {}
    if model.get("type") != "BPE" or len(vocab) != len(tokens) or any(tokens[i] != t for t, i in vocab.items() if i < len(tokens)):
        return "its tokenizer's vocabulary is not the embedded model's"
    theirs = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
    if theirs != merges:
        return "its tokenizer's merges are not the embedded model's"
    if any(a["id"] >= len(tokens) or tokens[a["id"]] != a["content"] for a in tok.get("added_tokens", [])):
        return "its tokenizer's added tokens are not the embedded model's"
    special = json.loads((hf / "tokenizer_config.json").read_text()) if (hf / "tokenizer_config.json").is_file() else {}
    for role in ("bos", "eos"):
        want = tokens[fields[f"tokenizer.ggml.{role}_token_id"]]
        got = special.get(f"{role}_token")
        got = got.get("content") if isinstance(got, dict) else got
        if got is not None and got != want:
            return f"its {role} token {got!r} is not the embedded model's {want!r}"
    return None


@lru_cache(maxsize=2)
def _reference(path: str) -> dict[str, Any]:
    """The embedded GGUF's metadata as plain values (reading it takes a few seconds: once)."""
    from gguf import GGUFReader

    return {name: field.contents() for name, field in GGUFReader(path).fields.items()}


def _tensor_names(hf: Path) -> list[str] | None:
    files = _safetensors(hf)
    if not files:
        return None
    from safetensors import safe_open

    names: list[str] = []
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            names += list(f.keys())
    return names


def _safetensors(hf: Path) -> list[Path]:
    index = hf / "model.safetensors.index.json"
    if index.is_file():
        return sorted({hf / name for name in json.loads(index.read_text())["weight_map"].values()})
    return [hf / "model.safetensors"] if (hf / "model.safetensors").is_file() else []


def _mtime(path: Path) -> int:
    return path.stat().st_mtime_ns if path.exists() else 0


def write_gguf(hf_folder: Path, target: Path, reference: Path, tensor_type: str | None = None) -> None:
    """Write `hf_folder` (checked by `mismatch`) as a GGUF file at `target` with the metadata of
    `reference`: to a temporary sibling first, renamed into place when complete (a killed write
    leaves no half file; one killed over an hour ago is removed)."""
    import gguf
    from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter
    from safetensors import safe_open

    tensor_type = tensor_type or TENSOR_TYPE
    if tensor_type not in TENSOR_TYPES:
        from reinagent.errors import ConfigError

        raise ConfigError(f"GGUF tensor type must be one of {', '.join(TENSOR_TYPES)}, got {tensor_type!r}")
    reason = mismatch(hf_folder, reference)
    if reason:
        from reinagent.errors import ConfigError

        raise ConfigError(f"{hf_folder} cannot be written as the embedded model's GGUF: {reason}")
    config = json.loads((hf_folder / "config.json").read_text())
    n_head, n_kv = config["num_attention_heads"], config["num_key_value_heads"]
    tied = config.get("tie_word_embeddings", False)
    target.parent.mkdir(parents=True, exist_ok=True)
    for old in target.parent.glob(f".{target.name}.tmp-*"):
        if time.time() - old.stat().st_mtime > 3600:
            old.unlink(missing_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    template = _chat_template(hf_folder)  # the checkpoint's own, read once
    writer = GGUFWriter(str(tmp), "llama")
    try:
        for name, field in gguf.GGUFReader(str(reference)).fields.items():
            if name.startswith("GGUF.") or name in ("general.architecture", "general.file_type"):
                continue  # the writer's own header; the file type is this file's
            if name == "tokenizer.chat_template" and template:
                continue
            sub = field.types[-1] if field.types[0] == GGUFValueType.ARRAY else None
            writer.add_key_value(name, field.contents(), field.types[0], sub_type=sub)
        writer.add_file_type(_FILE_TYPE[tensor_type])
        if template:
            writer.add_chat_template(template)
        for file in _safetensors(hf_folder):
            with safe_open(str(file), framework="pt") as f:
                for name in f.keys():
                    if name == "lm_head.weight" and tied:
                        continue
                    data = f.get_tensor(name).float().numpy()
                    if name.endswith("q_proj.weight"):
                        data = permute(data, n_head, n_head)
                    elif name.endswith("k_proj.weight"):
                        data = permute(data, n_head, n_kv)
                    _add(writer, gguf_name(name), data, tensor_type, GGMLQuantizationType)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()  # flushed before the rename: a reader never sees a short file
        os.replace(tmp, target)
    finally:
        writer.close()
        tmp.unlink(missing_ok=True)


def _add(writer, name: str, data, tensor_type: str, qtypes) -> None:
    import numpy as np

    from gguf.quants import quantize

    if data.ndim == 1 or tensor_type == "F32":
        writer.add_tensor(name, np.ascontiguousarray(data, dtype=np.float32))
    elif tensor_type == "F16":
        writer.add_tensor(name, data.astype(np.float16))
    else:
        writer.add_tensor(name, quantize(data, qtypes.Q8_0), raw_dtype=qtypes.Q8_0)


def _chat_template(hf: Path) -> str | None:
    """The checkpoint's own chat template (chat_template.jinja, or tokenizer_config.json's)."""
    if (hf / "chat_template.jinja").is_file():
        return (hf / "chat_template.jinja").read_text()
    config = hf / "tokenizer_config.json"
    template = json.loads(config.read_text()).get("chat_template") if config.is_file() else None
    return template if isinstance(template, str) else None
