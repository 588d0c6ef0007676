"""What f32 matrix multiplication this CPU does, for reading an engine's rate against it.

    .venv/bin/python perf/cpu_flops.py [--threads 2] [--json]

numpy's matmul (OpenBLAS) on square f32 matrices, best of 5 each, and on the shape of one of
Qwen2.5-1.5B's MLP matrices (8960 x 1536) times a batch of 1 to 128 token vectors: the square
products give the cores' practical f32 peak; the model-shaped ones show how little of it a step
with few tokens reaches. docs/models.md ("The pair re-made") sets a HumanEval pair's arithmetic
against the peak: 2 x 1.31 G non-embedding weights = 2.62 GFLOP per token, prompt or completion,
plus 0.47 for the output matrix per decoded token.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def gflops(m: int, k: int, n: int, repeats: int = 5) -> float:
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.random((m, k), dtype=np.float32)
    b = rng.random((k, n), dtype=np.float32)
    a @ b  # warm the library's threads and buffers
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * m * k * n / best / 1e9


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.threads < 1:
        ap.error("--threads must be at least 1")
    # OpenBLAS reads its thread count when numpy loads it
    os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(args.threads)
    result: dict[str, float | int] = {"threads": args.threads}
    for n in (1024, 2048, 3072):
        result[f"square_{n}_gflops"] = round(gflops(n, n, n), 1)
    for tokens in (1, 8, 32, 128):
        result[f"mlp_{tokens}_tokens_gflops"] = round(gflops(8960, 1536, tokens, repeats=10), 1)
    result["peak_gflops"] = max(v for k, v in result.items() if k.startswith("square_"))
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"f32 matmul, numpy (OpenBLAS), {args.threads} threads, best of 5-10")
    for key, value in result.items():
        if key != "threads":
            print(f"  {key:<24}{value:>8.1f} GFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
