"""`local:HF_DIR` on OpenVINO (the checkpoint written as GGUF) against transformers on the same dir.

    .venv/bin/python perf/gguf_checkpoint.py                        # F16, F32, Q8_0 vs transformers
    .venv/bin/python perf/gguf_checkpoint.py --types F16 --n 10     # a quick run
    .venv/bin/python perf/gguf_checkpoint.py --hf DIR               # another checkpoint (the embedded family)

Workload: the actor prompts of the first N arithmetic20 test tasks (system, few-shot examples,
question), greedy, --new-tokens new tokens, no stop string. transformers (`hf:DIR`, f32, one
generate() at a time, as a run uses it) against OpenVINO GenAI on the GGUF copy of the same
directory (reinagent.llm.gguf_export) in each tensor type, all N prompts submitted at once
(continuous batching, 8 at a time). Agreement = how many of the N greedy texts equal
transformers'. Tokens/s = generated tokens / wall seconds (the model load is timed apart).
F32 is written too but OpenVINO GenAI 2026.4's GGUF reader refuses F32 matrices ("Unsupported
quantization type"): the script prints that line instead of figures. `F16+f32` (not in the
default list) is the F16 file with f32 inference (INFERENCE_PRECISION_HINT, as `exact` sets it),
straight on the pipeline: it tells the F16 weights' share of the differences from bf16 arithmetic's.

    .venv/bin/python perf/gguf_checkpoint.py --types F16,F16+f32 --texts /tmp/t.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reinagent.llm.base import GenerationParams  # noqa: E402


def prompts(n: int):
    from reinagent.benchmarks import make
    from reinagent.memory import MemoryView
    from reinagent.settings import AgentSettings
    from reinagent.strategy import ReflexionStrategy

    bench = make("arithmetic20")
    agent = bench.make_agent("cot", AgentSettings())
    tasks = bench.load_tasks("test")[:n]
    return [agent.prompt(task, MemoryView(1, ReflexionStrategy.NONE)) for task in tasks]


async def timed(llm, chats, new_tokens: int, together: bool) -> tuple[list[str], int, float, float]:
    params = GenerationParams(max_tokens=new_tokens)
    started = time.perf_counter()
    await llm.generate(chats[0][:1], GenerationParams(max_tokens=1))  # loads (and writes the GGUF)
    load = time.perf_counter() - started
    started = time.perf_counter()
    if together:
        done = await asyncio.gather(*(llm.generate(c, params) for c in chats))
    else:
        done = [await llm.generate(c, params) for c in chats]
    wall = time.perf_counter() - started
    await llm.aclose()
    return [c.text for c in done], sum(c.completion_tokens for c in done), wall, load


def f32_inference(path: Path, chats, new_tokens: int) -> tuple[list[str], int, float, float]:
    import openvino_genai as og

    from reinagent.llm.openvino import _encode

    started = time.perf_counter()
    scheduler = og.SchedulerConfig()
    scheduler.cache_size, scheduler.max_num_seqs = 2, 8
    pipe = og.ContinuousBatchingPipeline(str(path), scheduler, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    tokenizer = pipe.get_tokenizer()
    load = time.perf_counter() - started
    config = og.GenerationConfig()
    config.max_new_tokens, config.do_sample = new_tokens, False
    ids = [_encode(tokenizer, chat) for chat in chats]
    started = time.perf_counter()
    out = pipe.generate(ids, [config] * len(ids))
    wall = time.perf_counter() - started
    generated = [list(o.m_generation_ids[0]) for o in out]
    return [tokenizer.decode(g, skip_special_tokens=True) for g in generated], sum(map(len, generated)), wall, load


def main() -> None:
    from reinagent.llm import gguf_export, make_llm
    from reinagent.llm.local import converted_dir, embedded_gguf

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hf", type=Path, default=None, help="a HF directory of the embedded family (default: the dequantised embedded model)")
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--types", default="F16,Q8_0,F32")
    ap.add_argument("--texts", type=Path, help="write every engine's texts to this JSON file (transformers' under 'transformers')")
    ap.add_argument("--reference", type=Path, help="take transformers' texts from an earlier --texts file instead of running it")
    args = ap.parse_args()
    hf = args.hf or converted_dir(embedded_gguf())
    chats = prompts(args.n)
    print(f"{'engine':<22} {'agree':>6} {'tokens':>7} {'wall s':>7} {'tok/s':>7} {'load s':>7}")
    if args.reference:
        ref = json.loads(args.reference.read_text())["transformers"][:args.n]
    else:
        ref, tokens, wall, load = asyncio.run(timed(make_llm(f"hf:{hf}"), chats, args.new_tokens, together=False))
        print(f"{'transformers f32 x1':<22} {args.n:>3}/{args.n:<2} {tokens:>7} {wall:>7.1f} {tokens / wall:>7.1f} {load:>7.1f}")
    saved = {"transformers": ref}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.types.split(","):
            tensor_type = kind.split("+")[0]
            target = Path(tmp) / f"ckpt-{tensor_type}.gguf"
            if not target.is_file():
                started = time.perf_counter()
                gguf_export.write_gguf(hf, target, embedded_gguf(), tensor_type)
                print(f"  wrote {tensor_type} in {time.perf_counter() - started:.1f} s ({target.stat().st_size / 2**20:.0f} MiB)")
            try:
                if kind == "F16+f32":
                    texts, tokens, wall, load = f32_inference(target, chats, args.new_tokens)
                else:
                    texts, tokens, wall, load = asyncio.run(timed(make_llm(f"local:{target}"), chats, args.new_tokens, together=True))
            except Exception as err:  # noqa: BLE001 - a type the reader refuses: say so, go on
                print(f"openvino {kind} x8: {str(err).splitlines()[-1]}")
                continue
            agree = sum(a == b for a, b in zip(texts, ref, strict=True))
            saved[kind] = texts
            label = f"openvino {kind} x8"
            print(f"{label:<22} {agree:>3}/{args.n:<2} {tokens:>7} {wall:>7.1f} {tokens / wall:>7.1f} {load:>7.1f}")
    if args.texts:
        args.texts.write_text(json.dumps(saved, indent=1))


if __name__ == "__main__":
    main()
