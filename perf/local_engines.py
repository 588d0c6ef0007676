"""Local CPU engines side by side (issue 17 §2), and the parse rate of constrained actions (§3).

    .venv/bin/python perf/local_engines.py                      # the engine table
    .venv/bin/python perf/local_engines.py --new-tokens 32      # a quick smoke run
    .venv/bin/python perf/local_engines.py --engines transformers,local-fast   # a subset
    .venv/bin/python perf/local_engines.py --ir DIR             # `local-exact`/`local-bf16` on this IR export
    .venv/bin/python perf/local_engines.py --parse-rate 4       # valid-action rate, 4 HotpotQA tasks

Engines: `local-fast` (our OpenVINO GenAI adapter, `--model local --precision fast`: the embedded
GGUF read directly, Q4_1 weights), `local-exact` (`--precision exact`: the f32 IR export, made and
cached on first use with optimum-intel, or the IR directory given with --ir), `local-bf16` (the IR
with the CPU plugin's default precision, needs --ir), `hf` (our transformers engine, one call at a
time), `transformers` (plain `generate`, batched with left padding for the concurrent figure), and
the peers that are installed (perf/peer_engines.py: `ct2-f32`, `ct2-int8` for CTranslate2,
`ort-genai` for ONNX Runtime GenAI). Each engine runs in its own child process so that its
load time and peak RSS are its own. Workload (perf/engine_prompts.py): 8 different chat prompts of
about 300 tokens, `--new-tokens` new tokens each, greedy, no stop string; "single" runs them one
after the other, "8 concurrent" all at once. Tokens/s = generated tokens / wall seconds. Agreement = how many of the
8 greedy texts equal plain transformers' (the Q4_1 GGUF engines compute with other weights).

--parse-rate N runs the ReAct and CoT(context) agents on the first N HotpotQA hard100 tasks on
`local` (fast), greedy, with and without the action grammar of `reinagent.llm.constrained`, and prints the
fraction of model steps that parse to a valid action.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine_prompts import prompts  # noqa: E402  (perf/engine_prompts.py: the peers read it too)
from reinagent.llm.base import GenerationParams  # noqa: E402
from reinagent.records import Message  # noqa: E402


# ----- one engine, in a child process ----------------------------------------------------------


async def run_adapter(llm, new_tokens: int) -> dict:
    params = GenerationParams(max_tokens=new_tokens)
    started = time.perf_counter()
    await llm.generate([Message(role="user", content="Hi")], GenerationParams(max_tokens=1))  # loads
    load_s = time.perf_counter() - started
    t0 = time.perf_counter()
    single = [await llm.generate(p, params) for p in prompts()]
    single_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    batch = await asyncio.gather(*(llm.generate(p, params) for p in prompts()))
    batch_s = time.perf_counter() - t0
    await llm.aclose()
    return {"load_s": load_s, "single_tps": sum(c.completion_tokens for c in single) / single_s,
            "concurrent_tps": sum(c.completion_tokens for c in batch) / batch_s,
            "texts": [c.text for c in single], "prompt_tokens": [c.prompt_tokens for c in single]}


def run_transformers(new_tokens: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reinagent.llm.local import convert_gguf, converted_dir, embedded_gguf

    started = time.perf_counter()
    folder = converted_dir(embedded_gguf())
    if not (folder / "config.json").is_file():
        convert_gguf(embedded_gguf(), folder)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    load_s = time.perf_counter() - started
    texts = [tok.apply_chat_template([m.model_dump(include={"role", "content"}) for m in p], tokenize=False,
                                     add_generation_prompt=True) for p in prompts()]
    kwargs = {"max_new_tokens": new_tokens, "do_sample": False, "pad_token_id": tok.eos_token_id}
    outs, generated = [], 0
    t0 = time.perf_counter()
    with torch.inference_mode():
        for text in texts:
            ids = tok(text, return_tensors="pt", add_special_tokens=False)
            new = model.generate(**ids, **kwargs)[0, ids["input_ids"].shape[1]:]
            generated += len(new)
            outs.append(tok.decode(new, skip_special_tokens=True))
        single_s = time.perf_counter() - t0
        tok.padding_side = "left"
        batch = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        t0 = time.perf_counter()
        new = model.generate(**batch, **kwargs)[:, batch["input_ids"].shape[1]:]
        batch_s = time.perf_counter() - t0
    batch_generated = int((new != tok.eos_token_id).sum())
    return {"load_s": load_s, "single_tps": generated / single_s, "concurrent_tps": batch_generated / batch_s, "texts": outs}


def child(engine: str, new_tokens: int, ir: str | None) -> None:
    if engine == "transformers":
        result = run_transformers(new_tokens)
    elif engine in PEERS:
        import peer_engines

        result = {"ct2-f32": lambda: peer_engines.run_ctranslate2(new_tokens, "float32"),
                  "ct2-int8": lambda: peer_engines.run_ctranslate2(new_tokens, "int8"),
                  "ort-genai": lambda: peer_engines.run_ort_genai(new_tokens)}[engine]()
    elif engine == "hf":
        from reinagent.llm.hf import HFLLM

        result = asyncio.run(run_adapter(HFLLM(None), new_tokens))
    else:
        from reinagent.llm.openvino import OpenVINOLLM

        path, precision = {"local-fast": (None, "fast"), "local-exact": (ir, "exact"), "local-bf16": (ir, "fast")}[engine]
        result = asyncio.run(run_adapter(OpenVINOLLM(path, precision=precision), new_tokens))
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result))


PEERS = {"ct2-f32": "ctranslate2", "ct2-int8": "ctranslate2", "ort-genai": "onnxruntime_genai"}  # perf/peer_engines.py


def table(args) -> None:
    import importlib.util

    installed = [e for e, module in PEERS.items() if importlib.util.find_spec(module)]
    engines = args.engines.split(",") if args.engines else [
        "transformers", "local-fast", "local-exact", *(["local-bf16"] if args.ir else []), "hf", *installed]
    results = {}
    for engine in engines:
        cmd = [sys.executable, __file__, "--child", engine, "--new-tokens", str(args.new_tokens)] + (["--ir", args.ir] if args.ir else [])
        proc = subprocess.run(cmd, capture_output=True, text=True)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            print(f"{engine}: failed ({proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode})", flush=True)
            continue
        results[engine] = json.loads(line[7:])
    reference = results.get("transformers", {}).get("texts")
    print(f"\n8 prompts (~{max(results.get('local-fast', {}).get('prompt_tokens', [0]))} tokens), {args.new_tokens} new tokens, greedy\n")
    print(f"{'engine':<14}{'load s':>8}{'tok/s 1':>9}{'tok/s 8':>9}{'peak RSS MB':>13}{'same as HF':>12}")
    for engine, r in results.items():
        agree = f"{sum(a == b for a, b in zip(r['texts'], reference))}/{len(reference)}" if reference else "-"
        print(f"{engine:<14}{r['load_s']:>8.1f}{r['single_tps']:>9.1f}{r['concurrent_tps']:>9.1f}{r['peak_rss_mb']:>13.0f}{agree:>12}")


# ----- parse rate of constrained actions --------------------------------------------------------


async def parse_rate(n: int, max_steps: int) -> None:
    from reinagent.agents.base import Actor
    from reinagent.benchmarks import make
    from reinagent.llm.constrained import ConstrainedLLM, hotpot_regex
    from reinagent.llm.openvino import OpenVINOLLM
    from reinagent.memory import MemoryView
    from reinagent.records import Trajectory
    from reinagent.settings import AgentSettings, BenchmarkSettings
    from reinagent.strategy import ReflexionStrategy

    bench = make("hotpotqa")
    tasks = bench.load_tasks("hard100")[:n]
    base = OpenVINOLLM(None)
    for agent_name in ("react", "cot-context"):
        steps = max_steps if agent_name == "react" else None
        config = BenchmarkSettings(benchmark="hotpotqa", agent=agent_name, split="hard100", max_steps=steps)
        agent = bench.make_agent(agent_name, AgentSettings(max_steps=steps))
        for constrained in (False, True):
            llm = ConstrainedLLM(base, hotpot_regex(agent_name)) if constrained else base

            async def episode(task):
                actor = Actor(llm, Trajectory(), f"{task.task_id}/1")
                return await agent.run(task, bench.make_env(task, config), MemoryView(trial=1, strategy=ReflexionStrategy.NONE), actor)

            t0 = time.perf_counter()
            trajs = await asyncio.gather(*(episode(t) for t in tasks))
            steps = [s for t in trajs for s in t.steps]
            valid = sum(s.valid_action for s in steps)
            finished = sum(t.end_reason == "finished" for t in trajs)
            print(f"{agent_name:<12} constrained={constrained!s:<6} valid actions {valid}/{len(steps)} "
                  f"({100 * valid / max(1, len(steps)):.0f}%), episodes finished {finished}/{len(trajs)}, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
            if steps:
                print(f"    e.g. {steps[0].output[:160]!r}", flush=True)
    await base.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--ir", help="an OpenVINO IR export of the same model (optimum-cli export openvino)")
    parser.add_argument("--engines", help="comma-separated subset: transformers,local-fast,local-exact,local-bf16,hf,ct2-f32,ct2-int8,ort-genai")
    parser.add_argument("--parse-rate", type=int, metavar="N", help="measure valid actions on N HotpotQA tasks")
    parser.add_argument("--max-steps", type=int, default=4, help="ReAct step budget for --parse-rate")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.new_tokens, args.ir)
    elif args.parse_rate:
        asyncio.run(parse_rate(args.parse_rate, args.max_steps))
    else:
        table(args)


if __name__ == "__main__":
    main()
