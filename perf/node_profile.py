"""Where a step of the engine's model goes, node by node: the CPU plugin's own counters.

    .venv/bin/python perf/node_profile.py [--model qwen2.5-coder-1.5b] [--rows 1] [--tokens 1]
                                          [--set PROPERTY=VALUE ...] [--steps 3]

Compiles the IR the engine loads for a packaged `local` model (llm/local.prepare: the file's
weights, llm/gguf_exact.py) with PERF_COUNT on, the engine's precision choice and 2 threads, and
runs its stateful form directly (not the continuous-batching pipeline: its attention is SDPA, not
the paged kernel, and it computes logits for every position): a prefill of `--rows` sequences of
`--tokens` tokens, then `--steps` timed steps of the same shape. Prints the wall of each step and,
for the last, the time by (node type, kernel) and the slowest nodes, with the output matrix (the
last MatMul, "the output matrix") named. `--rows 16 --tokens 1` is a decode step at 16 in flight,
`--rows 1 --tokens 64` a prefill chunk. `--set DYNAMIC_QUANTIZATION_GROUP_SIZE=16` and the like
try a plugin property.

What it showed on an AMD Zen 4, 2 cores (docs/node_profile_output_amd_zen4.txt): one sequence's
step is about 70 ms, of which the Q4 matrices about 50 ms, the Q6_K output matrix 11 ms and the
split's corrections (gguf_exact: G(x) R^T, f32 GEMMs) 9 ms; at 16 rows the output matrix is 61 of
218 ms: its Q6_K groups of 16 get no 8-bit activations at the plugin's default groups of 32 (27 of
168 ms with DYNAMIC_QUANTIZATION_GROUP_SIZE=16, which slows the Q4 matrices' prefill instead).
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from precision import model_path  # noqa: E402


def prop(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--set: PROPERTY=VALUE, e.g. DYNAMIC_QUANTIZATION_GROUP_SIZE=16; got {text!r}")
    return key, int(value) if value.isdigit() else value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    from reinagent.llm.packaged import MODELS

    ap.add_argument("--model", default="qwen2.5-coder-1.5b", choices=["embedded", *sorted(MODELS)])
    ap.add_argument("--rows", type=int, default=1, help="sequences in the batch")
    ap.add_argument("--tokens", type=int, default=1, help="tokens of each sequence a step")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--set", type=prop, action="append", default=[], help="a CPU plugin property, PROPERTY=VALUE")
    args = ap.parse_args()
    import openvino as ov

    from reinagent.llm import cpu_precision
    from reinagent.llm.local import prepare

    from reinagent.errors import ReinagentError

    try:
        ir = prepare(model_path(args.model), "fast").path
    except ReinagentError as err:  # the model's extra not installed, a full cache: one line
        ap.error(str(err))
    config = {"PERF_COUNT": True, "INFERENCE_NUM_THREADS": 2, **cpu_precision.choose("fast").properties("fast"),
              **dict(args.set)}
    core = ov.Core()
    model = core.read_model(str(ir / "openvino_model.xml"))
    output = [op.get_friendly_name() for op in model.get_ordered_ops() if op.get_type_name() == "MatMul"][-1]
    request = core.compile_model(model, "CPU", config).create_infer_request()
    rows, n = args.rows, args.tokens
    rng = np.random.default_rng(0)

    def inputs(past: int) -> dict:
        return {"input_ids": rng.integers(100, 5000, (rows, n)), "attention_mask": np.ones((rows, past + n), np.int64),
                "position_ids": np.tile(np.arange(past, past + n), (rows, 1)), "beam_idx": np.arange(rows, dtype=np.int32)}

    request.reset_state()
    request.infer(inputs(0))
    for step in range(1, args.steps + 1):
        started = time.perf_counter()
        request.infer(inputs(step * n))
        print(f"step {step}: {1000 * (time.perf_counter() - started):.1f} ms ({rows} x {n} tokens)")
    by_kind: collections.Counter = collections.Counter()
    nodes = []
    for p in request.profiling_info:
        ms = p.real_time.total_seconds() * 1000
        by_kind[(p.node_type, p.exec_type)] += ms
        nodes.append((ms, p.node_name, p.node_type))
    print(f"{args.model}, {ir.name}, {config}")
    print(f"last step by node type and kernel, {sum(by_kind.values()):.1f} ms counted:")
    for (kind, kernel), ms in by_kind.most_common(8):
        print(f"  {ms:8.2f} ms  {kind} ({kernel})")
    print("slowest nodes:")
    for ms, name, kind in sorted(nodes, reverse=True)[:5]:
        print(f"  {ms:8.2f} ms  {name} {kind}" + ("  <- the output matrix" if name == output else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
