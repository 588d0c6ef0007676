"""Which weight layout would let the local engine decode faster on this CPU? Interleaved, in one run.

    .venv/bin/python perf/fc_kernels.py [--rounds 5] [--reps 200] [--no-profile] [--json]

Issue 53 asks the engine to decode one stream as fast as llama.cpp. A decode step is one token
through every weight matrix, so its time is the weights' count over the rate at which the CPU
plugin's matrix-vector kernel gets through them. Two parts:

1. The model's own decode step, profiled: local:qwen2.5-coder-1.5b's GGUF as OpenVINO GenAI reads
   it (saved as IR in a temporary folder), a ~200-token prompt, then single-token steps with the
   plugin's per-node counters: the share of the step spent in FullyConnected, and the kernel.
2. One FullyConnected layer (1536 -> 8960, the model's MLP shape) with its weights in each layout
   the plugin takes: u4/i4/u8/i8 in groups (the GGUF's Q4_K is u4 in groups of 32, its Q6_K u8 in
   groups of 16) or per output channel, and f16; with the plugin's dynamic quantisation of
   activations at its default and off. Rounds alternate the layouts (the order reversed every
   other round); per layout the median time of one matrix-vector product, its rate in weights per
   second, the kernel the plugin chose, and the decode rate it would allow the 1.5B model if every
   matrix ran at that rate (the weights read per token, counted in the GGUF file, over the rate;
   attention and the rest ignored, so a ceiling).

Set these against llama.cpp through ratios, each of one run (the fastest layout over the file's
here, the engine over llama.cpp in perf/engines.py), not through rates from different runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from precision import cpu_name, model_path  # noqa: E402 - sibling script

K, N = 1536, 8960
# name: (element type, group size or None for per output channel, zero point)
LAYOUTS = {
    "u4 g32 (Q4_K)": ("u4", 32, True), "u8 g16 (Q6_K)": ("u8", 16, True), "u4 g128": ("u4", 128, True),
    "u4 channel": ("u4", None, True), "i4 g32 sym": ("i4", 32, False), "i4 channel sym": ("i4", None, False),
    "u8 channel": ("u8", None, True), "i8 channel sym": ("i8", None, False), "f16": ("f16", None, False),
}


def layer(kind: str, group: int | None, zero_point: bool, n: int = N, k: int = K):
    """x [1, 1, k] @ W.T, W [n, k] decompressed in the graph the way the GGUF reader writes it:
    (q - zero point) * scale per group, in f16, then f32. Returns the model and W as numpy f32."""
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    rng = np.random.default_rng(0)
    g = group or k
    shape = [n, k // g, g]
    x = ops.parameter([1, 1, k], ov.Type.f32, name="x")
    if kind == "f16":
        dense = (rng.standard_normal([n, k]) * 0.02).astype(np.float16)
        w = ops.constant(dense)
    else:
        low, high = {"u4": (0, 16), "i4": (-8, 8), "u8": (0, 256), "i8": (-128, 128)}[kind]
        q = rng.integers(low, high, shape).astype(np.int16)
        zp = np.full([n, k // g, 1], high // 2 if zero_point else 0, np.int16)
        scale = (rng.random([n, k // g, 1]) * 0.01).astype(np.float16)
        w = ops.convert(ops.constant(q, dtype=getattr(ov.Type, kind)), ov.Type.f16)
        if zero_point:
            w = ops.subtract(w, ops.convert(ops.constant(zp, dtype=getattr(ov.Type, kind)), ov.Type.f16))
        w = ops.multiply(w, ops.constant(scale))
        w = ops.reshape(w, ops.constant(np.array([n, k], np.int64)), False)
        dense = ((q - zp).astype(np.float16) * scale).reshape(n, k)
    out = ops.matmul(x, ops.convert(w, ov.Type.f32), False, True)
    return ov.Model([out], [x]), dense.astype(np.float32)


def weights_per_token(gguf: Path) -> int:
    """Elements of every matrix a token multiplies: all 2-D tensors but the embedding table, which
    is gathered, not multiplied, unless the model ties its output head to it (no output.weight)."""
    from gguf import GGUFReader

    tensors = {t.name: int(t.n_elements) for t in GGUFReader(str(gguf)).tensors if len(t.shape) == 2}
    head = 0 if "output.weight" in tensors else tensors["token_embd.weight"]
    return sum(n for name, n in tensors.items() if name != "token_embd.weight") + head


def reader_ir(gguf: Path, folder: Path) -> Path:
    """The IR that OpenVINO GenAI's GGUF reader builds from `gguf`, saved in `folder` with its
    tokenizer; the reader saves beside the file it reads, so it reads a copy. (The engine loads it
    with the file's Q4 offsets as f16 zero points, llm/gguf_exact.py: the same FullyConnected kernel.)"""
    import openvino_genai as og

    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / "model.gguf"
    shutil.copyfile(gguf, copy)
    og.LLMPipeline(str(copy), "CPU", enable_save_ov_model=True)
    copy.unlink()
    return folder


def profile_model(gguf: Path, steps: int = 16) -> dict:
    import numpy as np
    import openvino as ov

    with tempfile.TemporaryDirectory() as tmp:
        core = ov.Core()
        model = core.read_model(str(reader_ir(gguf, Path(tmp)) / "openvino_model.xml"))
        compiled = core.compile_model(model, "CPU", {"PERF_COUNT": True})
    request = compiled.create_infer_request()
    names = {i.get_any_name() for i in model.inputs}

    def step(ids: list[int], past: int) -> int:
        feed = {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, past + len(ids)), np.int64),
                "position_ids": np.arange(past, past + len(ids), dtype=np.int64)[None], "beam_idx": np.zeros(1, np.int32)}
        request.infer({k: v for k, v in feed.items() if k in names})
        return int(request.get_tensor(compiled.outputs[0]).data[0, -1].argmax())

    token, past, fc, total, kernels, walls = step(list(range(1000, 1200)), 0), 200, 0.0, 0.0, set(), []
    for _ in range(steps):
        started = time.perf_counter()
        token = step([token], past)
        walls.append(time.perf_counter() - started)
        past += 1
        for p in request.profiling_info:
            total += p.real_time.total_seconds()
            if p.node_type.startswith("FullyConnected"):
                fc += p.real_time.total_seconds()
                kernels.add(p.exec_type)
    return {"fc_share": fc / total, "fc_kernels": sorted(kernels), "step_ms_profiled": statistics.median(walls) * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=200, help="matrix-vector products timed per layout and round")
    ap.add_argument("--no-profile", action="store_true", help="skip part 1 (the model's profiled decode step)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import numpy as np
    import openvino as ov

    gguf = model_path("qwen2.5-coder-1.5b")
    per_token = weights_per_token(gguf)
    print(f"CPU: {cpu_name()}; local:qwen2.5-coder-1.5b multiplies {per_token / 1e9:.3f} G weights per token", file=sys.stderr)
    result: dict = {"cpu": cpu_name(), "weights_per_token": per_token}
    if not args.no_profile:
        result["model"] = profile_model(gguf)
        print(f"model decode step: FullyConnected {result['model']['fc_share']:.1%} of the profiled time, "
              f"kernels {result['model']['fc_kernels']}", file=sys.stderr)
    core = ov.Core()
    cases = {}
    for name, (kind, group, zp) in LAYOUTS.items():
        for dq in ("default", "off"):
            props = {} if dq == "default" else {"DYNAMIC_QUANTIZATION_GROUP_SIZE": 0}
            cases[f"{name}, dq {dq}"] = core.compile_model(layer(kind, group, zp)[0], "CPU", {"PERF_COUNT": True, **props}).create_infer_request()
    x = np.random.default_rng(1).random((1, 1, K), dtype=np.float32)
    times: dict[str, list[float]] = {c: [] for c in cases}
    for request in cases.values():
        for _ in range(5):
            request.infer([x])
    for r in range(args.rounds):
        for case in (list(cases) if r % 2 == 0 else list(cases)[::-1]):
            started = time.perf_counter()
            for _ in range(args.reps):
                cases[case].infer([x])
            times[case].append((time.perf_counter() - started) / args.reps)
    rows = []
    for case, request in cases.items():
        median = statistics.median(times[case])
        kernel = next(p.exec_type for p in request.profiling_info if p.node_type.startswith(("FullyConnected", "MatMul")))
        rows.append({"layout": case, "kernel": kernel, "ms": median * 1e3, "gweights_s": N * K / median / 1e9,
                     "spread_gweights_s": [round(N * K / t / 1e9, 1) for t in (max(times[case]), min(times[case]))],
                     "ceiling_tok_s": N * K / median / per_token})
    result["layouts"] = rows
    for row in rows:
        print(f"{row['layout']:26s} {row['kernel']:18s} {row['ms']:6.3f} ms  {row['gweights_s']:5.1f} G weights/s "
              f"(rounds {row['spread_gweights_s'][0]}-{row['spread_gweights_s'][1]})  ceiling {row['ceiling_tok_s']:5.1f} tok/s")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
