"""Which engine decodes the Qwen2.5-Coder-1.5B GGUF as the file's model: the first greedy token of
perf/engines.py's agreement prompts from three readers of the same Q4_K_M file.

    .venv/bin/python perf/engine_reference.py [--prompts 10]

- reference: transformers, the GGUF's tensors de-quantized to f32 and computed in f32 (slow, exact
  for the file's weights);
- llama.cpp: its server (the `llamacpp` extra), greedy, with the top 5 log-probs of the first token;
- embedded: reinagent's engine (OpenVINO GenAI), as `local:qwen2.5-coder-1.5b` loads it.

Each prompt's rendered text is the same for all three (the model's chat template; perf/engines.py
checks the token counts agree). Prints one line per prompt and the count of first tokens that equal
the reference's, per engine. Why it exists: perf/engines.py found the two engines' greedy texts
parting at the first token, and this says which of the two moved away from the file's model.
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


def reference_first_tokens(path: Path, prompts: int) -> list[list[tuple[str, float]]]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    rows = []
    for task in range(prompts):
        text = tok.apply_chat_template(messages(task), add_generation_prompt=True, tokenize=False)
        ids = tok(text, return_tensors="pt", add_special_tokens=False).input_ids
        with torch.no_grad():
            top = model(ids).logits[0, -1].log_softmax(-1).topk(5)
        rows.append([(tok.decode([int(i)]), float(v)) for v, i in zip(top.values, top.indices)])
    del model
    return rows


def llamacpp_first_tokens(path: Path, prompts: int) -> list[list[tuple[str, float]]]:
    import httpx

    from reinagent.llm.llamacpp import LlamaServer, ServedModel

    server = LlamaServer(ServedModel(NAME, path, "sha256 verified"), parallel=1, ctx_size=2048).start()
    try:
        rows = []
        for task in range(prompts):
            body = {"model": NAME, "messages": messages(task), "max_tokens": 1, "temperature": 0,
                    "cache_prompt": False, "logprobs": True, "top_logprobs": 5}
            data = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=600).json()
            first = data["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            rows.append([(t["token"], t["logprob"]) for t in first])
        return rows
    finally:
        server.stop()


async def embedded_texts(prompts: int) -> list[str]:
    engine = Embedded()
    try:
        return [(await engine.complete(messages(task), 4)).text for task in range(prompts)]
    finally:
        await engine.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=10)
    args = ap.parse_args()
    from reinagent.llm import packaged

    path = packaged.published_file(packaged.MODELS[NAME])
    ref = reference_first_tokens(path, args.prompts)
    llama = llamacpp_first_tokens(path, args.prompts)
    embedded = asyncio.run(embedded_texts(args.prompts))
    same_llama = same_embedded = 0
    for task in range(args.prompts):
        want = ref[task][0][0]
        same_llama += llama[task][0][0] == want
        # the engine gives text, not tokens: its first token is the reference's when its text starts with it
        same_embedded += embedded[task].startswith(want)
        print(f"HumanEval/{task}: reference {', '.join(f'{t!r} {p:.2f}' for t, p in ref[task][:3])} | "
              f"llama.cpp {', '.join(f'{t!r} {p:.2f}' for t, p in llama[task][:3])} | embedded {embedded[task]!r}")
    print(f"first token equal to the reference's: llama.cpp {same_llama} of {args.prompts}, "
          f"embedded {same_embedded} of {args.prompts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
