"""Which engine decodes the Qwen2.5-Coder-1.5B GGUF as the file's model: the first greedy token of
perf/engines.py's agreement prompts from three readers of the same Q4_K_M file.

    .venv/bin/python perf/engine_reference.py [--prompts 10]

- reference: transformers, the GGUF's tensors de-quantized to f32 and computed in f32 (slow, exact
  for the file's weights);
- llama.cpp: its server (the `llamacpp` extra), greedy, with the top 5 log-probs of the first token;
- embedded: reinagent's engine (OpenVINO GenAI), as `local:qwen2.5-coder-1.5b` loads it;
- embedded, exact settings: the engine's model (the reader's IR with the file's Q4 offsets,
  reinagent.llm.gguf_exact) in a plain OpenVINO GenAI pipeline with f32 arithmetic, an f32 KV cache
  and no dynamic quantisation of activations, so what remains is its reading of the file's blocks;
- reader as published: the GGUF file itself in that plain pipeline, read by OpenVINO GenAI's reader
  alone (its Q4 offsets rounded to 4-bit integers: what the engine decoded before the mending).

Each reader renders the prompt with the model's chat template; the prompt tokens each one counted
are printed, so a difference of prompt shows. Prints one line per prompt and the count of first
tokens equal to the reference's, per reader. Why it exists: perf/engines.py found the two engines'
greedy texts parting at the first token, and this says which of them moved from the file's model.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "perf"))

from engines import NAME, Embedded, messages  # noqa: E402

EXACT = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": 0}


def reference_first_tokens(path: Path, prompts: int) -> tuple[list[list[tuple[str, float]]], list[int]]:
    """The top 5 first tokens with their log-probs, and the prompt tokens, per prompt."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    rows, counts = [], []
    for task in range(prompts):
        text = tok.apply_chat_template(messages(task), add_generation_prompt=True, tokenize=False)
        ids = tok(text, return_tensors="pt", add_special_tokens=False).input_ids
        with torch.no_grad():
            top = model(ids).logits[0, -1].log_softmax(-1).topk(5)
        rows.append([(tok.decode([int(i)]), float(v)) for v, i in zip(top.values, top.indices)])
        counts.append(ids.shape[1])
    return rows, counts


def llamacpp_first_tokens(path: Path, prompts: int) -> tuple[list[list[tuple[str, float]]], list[int]]:
    import httpx

    from reinagent.llm.llamacpp import LlamaServer, ServedModel

    server = LlamaServer(ServedModel(NAME, path, "sha256 verified"), parallel=1, ctx_size=2048).start()
    try:
        rows, counts = [], []
        for task in range(prompts):
            body = {"model": NAME, "messages": messages(task), "max_tokens": 1, "temperature": 0,
                    "cache_prompt": False, "logprobs": True, "top_logprobs": 5}
            data = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=600).json()
            first = data["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            rows.append([(t["token"], t["logprob"]) for t in first])
            counts.append(data["usage"]["prompt_tokens"])
        return rows, counts
    finally:
        server.stop()


async def embedded_texts(prompts: int) -> tuple[list[str], list[int]]:
    """The engine's first 4 greedy tokens as text, and the prompt tokens, per prompt."""
    engine = Embedded()
    try:
        replies = [await engine.complete(messages(task), 4) for task in range(prompts)]
    finally:
        await engine.close()
    return [r.text for r in replies], [r.prompt_tokens for r in replies]


def exact_settings_texts(path: Path, prompts: int) -> list[str]:
    """The same, from a plain pipeline with EXACT's settings (the prompt rendered here, so the
    pipeline is told not to apply the template again)."""
    import openvino_genai as og

    pipe = og.LLMPipeline(str(path), "CPU", **EXACT)
    tok = pipe.get_tokenizer()
    config = og.GenerationConfig()
    config.max_new_tokens, config.do_sample, config.apply_chat_template = 4, False, False
    return [str(pipe.generate(tok.apply_chat_template(messages(task), add_generation_prompt=True), config))
            for task in range(prompts)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=10, help="HumanEval prompts, 1 to 164 (the first N)")
    args = ap.parse_args()
    if not 1 <= args.prompts <= 164:
        ap.error(f"--prompts must be between 1 and 164 (HumanEval's tasks), got {args.prompts}")
    from reinagent.errors import ReinagentError
    from reinagent.llm import packaged

    try:
        path = packaged.published_file(packaged.MODELS[NAME])
        llama, llama_counts = llamacpp_first_tokens(path, args.prompts)  # first: a missing extra stops it at once
        ref, ref_counts = reference_first_tokens(path, args.prompts)
        embedded, embedded_counts = asyncio.run(embedded_texts(args.prompts))
        from reinagent.llm.local import prepare

        exact = exact_settings_texts(prepare(path, "fast").path, args.prompts)
        rounded = exact_settings_texts(path, args.prompts)
    except ReinagentError as err:  # an extra missing, a file failing its hash, a server that died: one line
        print(f"perf/engine_reference.py: {err}", file=sys.stderr)
        return 2
    same = {"llama.cpp": 0, "embedded": 0, "embedded, exact settings": 0, "reader as published": 0}
    for task in range(args.prompts):
        want = ref[task][0][0]
        same["llama.cpp"] += llama[task][0][0] == want
        # the engines give text, not tokens: the first token is the reference's when the text starts with it
        same["embedded"] += embedded[task].startswith(want)
        same["embedded, exact settings"] += exact[task].startswith(want)
        same["reader as published"] += rounded[task].startswith(want)
        print(f"HumanEval/{task} (prompt tokens {ref_counts[task]}, {llama_counts[task]}, {embedded_counts[task]}): "
              f"reference {', '.join(f'{t!r} {p:.2f}' for t, p in ref[task][:3])} | "
              f"llama.cpp {', '.join(f'{t!r} {p:.2f}' for t, p in llama[task][:3])} | "
              f"embedded {embedded[task]!r} | exact settings {exact[task]!r} | reader as published {rounded[task]!r}")
    print("first token equal to the reference's: " + ", ".join(f"{k} {v} of {args.prompts}" for k, v in same.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
