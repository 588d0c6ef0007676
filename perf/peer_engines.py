"""Peer CPU engines for perf/local_engines.py: CTranslate2 and ONNX Runtime GenAI.

Neither is a dependency of reinagent (`pip install -e '.[peers]'` to measure them). Both read
the same dequantised HF copy of the embedded GGUF that transformers uses, converted once into `$REINAGENT_CACHE_DIR/models/peers/` (CTranslate2's converter; ONNX
Runtime GenAI's model builder, fp32, CPU). Neither does continuous batching: the "8 concurrent"
figure is CTranslate2's static batch of 8 (`generate_batch`) and, for ONNX Runtime GenAI, 8
generators stepped from 8 threads.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from engine_prompts import prompts  # not from local_engines.py, which imports this file


def _hf_folder() -> Path:
    from reinagent.llm.local import convert_gguf, converted_dir, embedded_gguf

    folder = converted_dir(embedded_gguf())
    if not (folder / "config.json").is_file():
        convert_gguf(embedded_gguf(), folder)
    return folder


def _peer_dir(name: str) -> Path:
    from reinagent.llm.local import models_cache

    return models_cache() / "peers" / f"{_hf_folder().name}-{name}"


def _chat_texts(tok) -> list[str]:
    return [tok.apply_chat_template([m.model_dump(include={"role", "content"}) for m in p], tokenize=False,
                                    add_generation_prompt=True) for p in prompts()]


def run_ctranslate2(new_tokens: int, compute_type: str) -> dict:
    import ctranslate2
    from transformers import AutoTokenizer

    started = time.perf_counter()
    hf = _hf_folder()
    target = _peer_dir(f"ct2-{compute_type}")
    if not (target / "model.bin").is_file():
        ctranslate2.converters.TransformersConverter(str(hf)).convert(str(target), quantization=compute_type, force=True)
    tok = AutoTokenizer.from_pretrained(hf)
    gen = ctranslate2.Generator(str(target), device="cpu", compute_type=compute_type)
    load_s = time.perf_counter() - started
    tokens = [tok.convert_ids_to_tokens(tok(t, add_special_tokens=False)["input_ids"]) for t in _chat_texts(tok)]
    kwargs = {"max_length": new_tokens, "sampling_topk": 1, "include_prompt_in_result": False}
    t0 = time.perf_counter()
    single = [gen.generate_batch([t], **kwargs)[0].sequences_ids[0] for t in tokens]
    single_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    batch = [r.sequences_ids[0] for r in gen.generate_batch(tokens, **kwargs)]
    batch_s = time.perf_counter() - t0
    return {"load_s": load_s, "single_tps": sum(map(len, single)) / single_s,
            "concurrent_tps": sum(map(len, batch)) / batch_s,
            "texts": [tok.decode(ids, skip_special_tokens=True) for ids in single]}


def run_ort_genai(new_tokens: int) -> dict:
    import onnxruntime_genai as og

    started = time.perf_counter()
    hf = _hf_folder()
    target = _peer_dir("ort-fp32")
    if not (target / "genai_config.json").is_file():
        subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf), "-o", str(target),
                        "-p", "fp32", "-e", "cpu", "-c", str(target.parent / "ort-build-cache")],
                       check=True, capture_output=True)
    model = og.Model(str(target))
    tokenizer = og.Tokenizer(model)
    load_s = time.perf_counter() - started
    from transformers import AutoTokenizer

    texts = _chat_texts(AutoTokenizer.from_pretrained(hf))

    def generate(text: str) -> list[int]:
        ids = tokenizer.encode(text)
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=len(ids) + new_tokens, do_sample=False)
        generator = og.Generator(model, params)
        generator.append_tokens(ids)
        while not generator.is_done():
            generator.generate_next_token()
        return list(generator.get_sequence(0))[len(ids):]

    t0 = time.perf_counter()
    single = [generate(t) for t in texts]
    single_s = time.perf_counter() - t0
    batch: list[list[int]] = [[] for _ in texts]

    def worker(i: int) -> None:
        batch[i] = generate(texts[i])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(texts))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batch_s = time.perf_counter() - t0
    eos = model_eos(target)
    return {"load_s": load_s, "single_tps": sum(map(len, single)) / single_s,
            "concurrent_tps": sum(map(len, batch)) / batch_s,
            "texts": [tokenizer.decode([i for i in ids if i not in eos]) for ids in single]}


def model_eos(target: Path) -> set[int]:
    import json

    eos = json.loads((target / "genai_config.json").read_text())["model"]["eos_token_id"]
    return set(eos) if isinstance(eos, list) else {eos}
