"""Greedy replies of a packaged Qwen model on the `local` engine against a transformers reference.

    .venv/bin/python scripts/qwen_agreement.py [qwen2.5-coder-0.5b] [--tokens 48]

The reference is transformers in f32 on the published GGUF file (gguf-py dequantises every tensor,
Q5_0 included, exactly); the engine runs the file `local:NAME` loads (for the 0.5B, its Q5_0
tensors re-written as Q8_0, which keeps every weight: reinagent/llm/packaged.py). Both decode
greedily, one prompt at a time, through the model's own chat template. The engine runs twice: at
f32 inference and an f32 KV cache, and at the CPU's defaults (bf16 arithmetic where the CPU has
it, a u8 KV cache), which is what a run uses. For the 0.5B the re-written file also goes through
the same transformers reference, which must reproduce the published file's replies exactly. Printed per prompt: the tokens both produced before their first difference, and
whether the whole reply is equal. Differences come from arithmetic (kernels, accumulation order,
bf16), not from the weights.
"""

from __future__ import annotations

import argparse
import sys
import time

PROMPTS = [
    "Write a Python function `is_prime(n)` that returns True when n is a prime number.",
    "Write a Python function that returns the second largest distinct value of a list, or None.",
    "What is 17 + 25? Reply with the number only.",
    "Name the capital of France and one river that flows through it.",
    "Explain in one sentence what a hash table is.",
    "Fix this function so that it returns the sum of a list: def total(xs): return xs[0]",
    "A train travels 60 km in 45 minutes. What is its speed in km/h? Show the calculation.",
    "Write a unit test with assert for a function `reverse(s)` that reverses a string.",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name", nargs="?", default="qwen2.5-coder-0.5b")
    ap.add_argument("--tokens", type=int, default=48)
    args = ap.parse_args()

    import openvino_genai as og
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reinagent.llm import packaged
    from reinagent.llm.local import models_cache

    model = packaged.MODELS[args.name]
    engine_file = packaged.model_file(model)
    published = models_cache() / f"{model.name}.gguf"
    started = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(published.parent, gguf_file=published.name)
    ref = AutoModelForCausalLM.from_pretrained(published.parent, gguf_file=published.name, dtype=torch.float32)
    ref.eval()
    print(f"transformers reference loaded from {published.name} in {time.perf_counter() - started:.0f} s", flush=True)
    chats = [[{"role": "user", "content": p}] for p in PROMPTS]
    texts = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
    reference = []
    for text in texts:
        ids = tok(text, return_tensors="pt", add_special_tokens=False).input_ids
        with torch.no_grad():
            out = ref.generate(ids, max_new_tokens=args.tokens, do_sample=False)
        reference.append(_until_eos(out[0, ids.shape[1]:].tolist(), tok.eos_token_id))
    del ref

    rows = []
    if engine_file != published:  # the re-written file through the same reference: must equal it exactly
        ref = AutoModelForCausalLM.from_pretrained(engine_file.parent, gguf_file=engine_file.name, dtype=torch.float32)
        ref.eval()
        for i, text in enumerate(texts):
            ids = tok(text, return_tensors="pt", add_special_tokens=False).input_ids
            with torch.no_grad():
                out = ref.generate(ids, max_new_tokens=args.tokens, do_sample=False)
            got = _until_eos(out[0, ids.shape[1]:].tolist(), tok.eos_token_id)
            rows.append(("transformers Q8_0", i, _common(reference[i], got), len(reference[i]), got == reference[i]))
        del ref
    f32 = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"}
    for label, props in (("engine f32", f32), ("engine default", {})):
        pipe = og.LLMPipeline(str(engine_file), "CPU", **props)
        for i, text in enumerate(texts):
            ids = tok(text, return_tensors="pt", add_special_tokens=False).input_ids
            config = og.GenerationConfig()
            config.max_new_tokens, config.do_sample = args.tokens, False
            import openvino as ov

            result = pipe.generate(ov.Tensor(ids.numpy()), config)
            got = _until_eos(list(result.tokens[0]), tok.eos_token_id)
            rows.append((label, i, _common(reference[i], got), len(reference[i]), got == reference[i]))
        del pipe
    print(f"{'engine':<16} {'prompt':>6} {'agree':>6} {'of':>4}  equal")
    for label, i, agree, total, equal in rows:
        print(f"{label:<16} {i:>6} {agree:>6} {total:>4}  {'yes' if equal else 'no'}")
    for label in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == label]
        print(f"{label}: {sum(r[4] for r in mine)} of {len(mine)} greedy replies equal to transformers f32; "
              f"{sum(r[2] for r in mine)} of {sum(r[3] for r in mine)} tokens before the first difference")
    return 0


def _until_eos(ids: list[int], eos: int) -> list[int]:
    return ids[: ids.index(eos)] if eos in ids else ids


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


if __name__ == "__main__":
    sys.exit(main())
