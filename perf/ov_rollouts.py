"""Training rollouts: transformers' generate() vs OpenVINO GenAI (`[rl] rollout_engine`) vs the
embedded OpenVINO engine a run uses, on the same prompts.

    .venv/bin/python perf/ov_rollouts.py                 # 4 tasks x G=4, 32 new tokens, 2 steps each
    .venv/bin/python perf/ov_rollouts.py --tasks 8 --group 8

Workload: the actor prompts of the first --tasks arithmetic20 train tasks, --group samples each at
temperature 1.0 (GRPO's), at most --new-tokens per reply, the embedded SmolLM2-135M-Instruct as the
policy (fp32, as training holds it). Per engine, --steps "steps": each samples the whole batch once.

- torch: TokenRollout with generate() (rl/rollout.py), the default;
- openvino: the same TokenRollout with OpenVINORollouts (rl/ov_rollout.py); before each step the
  policy's weights change a little (as an optimiser step does) and the version moves, so every
  step pays its refresh (the first: a checked GGUF export; later: the GGUF patched in place);
- engine: the embedded model as `reinagent run` uses it (`local`, its Q4_1 GGUF, batched), the
  same chat prompts and sampling settings, through reinagent.llm.

Tokens/s = generated tokens / wall seconds. It prints each engine's figures and the ratios the
speed target reads: openvino / engine without and with the refresh (target >= 0.5).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()

    import torch

    from reinagent.llm import make_llm
    from reinagent.llm.base import GenerationParams
    from reinagent.records import Message
    from reinagent.rl.agent import RLAgent
    from reinagent.rl.config import RLAgentConfig
    from reinagent.rl.ov_rollout import OpenVINORollouts

    cfg = RLAgentConfig(env_name="arithmetic20", model="local", max_turns=1, max_response_length=args.new_tokens,
                        react_format=True, max_workers=args.tasks * args.group)
    agent = RLAgent(model="local", config=cfg)
    model, tokenizer = agent.ensure_policy()
    tasks = agent.bench.load_tasks("train")[: args.tasks]
    rollout = agent.token_rollout()
    print(f"# {args.tasks} tasks x G={args.group}, <= {args.new_tokens} new tokens, temperature 1.0, "
          f"torch threads {torch.get_num_threads()}; load average {open('/proc/loadavg').read().split()[:3]}")

    def nudge() -> None:  # an optimiser step's worth of change: the next step's rollouts see new weights
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 1e-4)

    results = {}
    for name in ("torch", "openvino"):
        rollout.engine = OpenVINORollouts(tokenizer, max_batch=args.tasks * args.group) if name == "openvino" else None
        tokens, seconds, gen_s = 0, 0.0, 0.0
        for step in range(args.steps):
            nudge()
            if rollout.engine is not None:
                rollout.engine.version = step
                gen_before = rollout.engine.generate_s
            started = time.perf_counter()
            episodes = rollout.run(model, tasks, samples=args.group, temperature=1.0, seed=step)
            wall = time.perf_counter() - started
            generated = sum(e.generated_tokens for e in episodes)
            gen = rollout.engine.generate_s - gen_before if rollout.engine is not None else wall
            print(f"{name} step {step + 1}: {generated} tokens in {wall:.1f}s ({generated / wall:.1f} tokens/s); "
                  f"generation alone {gen:.1f}s ({generated / gen:.1f} tokens/s)"
                  + (f"; refresh {rollout.engine.refresh_s[-1]:.1f}s" if rollout.engine is not None else ""))
            if step > 0 or args.steps == 1:  # the first step of each engine also pays its warm-up
                tokens, seconds, gen_s = tokens + generated, seconds + wall, gen_s + gen
        results[name] = (tokens / seconds, tokens / gen_s)
        if rollout.engine is not None:
            rollout.engine.close()

    chats = [[Message(**m) for m in rollout.prompt_messages(t)] for t in tasks for _ in range(args.group)]
    llm = make_llm("local")

    async def engine() -> tuple[int, float]:
        params = GenerationParams(max_tokens=args.new_tokens, temperature=1.0)
        await llm.generate(chats[0][:1], GenerationParams(max_tokens=1))  # loads
        tokens, seconds = 0, 0.0
        for step in range(args.steps):
            started = time.perf_counter()
            done = await asyncio.gather(*(llm.generate(c, replace(params, seed=step * 1000 + i))
                                          for i, c in enumerate(chats)))
            wall = time.perf_counter() - started
            generated = sum(c.completion_tokens for c in done)
            print(f"engine step {step + 1}: {generated} tokens in {wall:.1f}s ({generated / wall:.1f} tokens/s)")
            if step > 0 or args.steps == 1:  # as above: the first step warms up
                tokens, seconds = tokens + generated, seconds + wall
        await llm.aclose()
        return tokens, seconds

    tokens, wall = asyncio.run(engine())
    engine_rate = tokens / wall
    torch_rate, _ = results["torch"]
    ov_rate, ov_gen = results["openvino"]
    print(f"tokens/s (steps after the first): torch {torch_rate:.1f}, openvino {ov_rate:.1f} with its refresh "
          f"({ov_gen:.1f} generating), engine {engine_rate:.1f}")
    print(f"openvino / engine: {ov_gen / engine_rate:.2f} generating, {ov_rate / engine_rate:.2f} with the refresh "
          f"(target >= 0.5); torch / engine: {torch_rate / engine_rate:.2f}")


if __name__ == "__main__":
    main()
