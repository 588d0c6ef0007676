"""The engine on the 1.5B model's weights re-written as int8 per output channel, against the GGUF as
published: decode rates and greedy text, interleaved in one run (issue 53).

    .venv/bin/python perf/relayout.py [--out DIR] [--rounds 3] [--tokens 128] [--prompts 10] [--json]

perf/fc_kernels.py found that on a CPU without AVX-512 the plugin multiplies every layout through
the same f32 kernel, and that the GGUF's layouts (u4 in groups of 32 with zero points, u8 in groups
of 16) are among its slowest, symmetric int8 per output channel among its fastest. This script
takes the IR the engine loads for local:qwen2.5-coder-1.5b, dequantises each matrix it
multiplies (in the plugin, f32) and writes two variants, in DIR (default: a temporary folder):

    i8-all    every matrix as int8, one scale per output channel (symmetric: w ~= q * s)
    i8-q6k    only the file's Q6_K matrices (u8 in groups of 16: the output head, half the down
              projections and value projections) so; the Q4_K ones as the reader wrote them

It prints each variant's relative weight error (||W - W'|| / ||W||), then measures the engine
(reinagent's OpenVINOLLM, given the IR folder as `local:DIR`) on the GGUF and on each variant with
perf/engines.py's rounds: prefill, single-stream decode, 4 and 8 in flight, decode alone at 8 in
flight, order alternating;
then greedy agreement of each variant with the GGUF over the first 64 tokens of 10 HumanEval
prompts. A variant is another model: its text is not the published file's. (docs/relayout_output.txt
was made before the engine read the file's Q4 offsets: its variants and its GGUF runs were the
reader's rounding of the file, 8% off in every Q4_K matrix; docs/models.md, "The file's weights".)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engines import NAME, Embedded, agreement, cpu_model, interleaved  # noqa: E402 - sibling scripts

VARIANTS = ("i8-all", "i8-q6k")


def weight_chains(model):
    """(MatMul, the f16 [n, k] weight it multiplies, the element type stored) for every matrix."""
    chains = []
    for node in model.get_ordered_ops():
        if node.get_type_name() != "MatMul":
            continue
        convert = node.input_value(1).get_node()
        reshape = convert.input_value(0).get_node() if convert.get_type_name() == "Convert" else None
        if reshape is None or reshape.get_type_name() != "Reshape":
            continue
        stored = reshape
        while stored.get_type_name() != "Constant":
            stored = stored.input_value(0).get_node()
        chains.append((node, reshape, stored.get_output_element_type(0).get_type_name()))
    return chains


def write_variant(source: Path, target: Path, variant: str) -> float:
    """Write `variant` of the IR in `source` to `target`; return its relative weight error."""
    import shutil

    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    core = ov.Core()
    model = core.read_model(str(source / "openvino_model.xml"))
    chains = [c for c in weight_chains(model) if variant == "i8-all" or c[2] == "u8"]
    error = norm = 0.0
    for start in range(0, len(chains), 16):  # 16 matrices dequantised at a time: memory stays small
        part = chains[start:start + 16]
        outputs = [ops.convert(reshape.output(0), ov.Type.f32).output(0) for _, reshape, _ in part]
        dense = core.compile_model(ov.Model(outputs, []), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})({})
        for i, (matmul, _, _) in enumerate(part):
            w = np.asarray(dense[i], np.float32)
            scale = np.abs(w).max(axis=1, keepdims=True) / 127
            scale[scale == 0] = 1
            q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
            scale16 = scale.astype(np.float16)
            error += float(np.square(w - q * scale16.astype(np.float32)).sum())
            norm += float(np.square(w).sum())
            weight = ops.multiply(ops.convert(ops.constant(q), ov.Type.f16), ops.constant(scale16))
            matmul.input(1).replace_source_output(ops.convert(weight, ov.Type.f32).output(0))
    model.validate_nodes_and_infer_types()
    target.mkdir(parents=True, exist_ok=True)
    ov.save_model(model, str(target / "openvino_model.xml"), compress_to_fp16=False)
    for extra in source.iterdir():
        if "tokenizer" in extra.name:
            shutil.copy(extra, target)
    return (error / norm) ** 0.5


class EmbeddedAt(Embedded):
    def __init__(self, path: Path, name: str):
        from reinagent.llm.openvino import OpenVINOLLM

        self.name = name
        self.llm = OpenVINOLLM(str(path), max_batch=8, name=f"local:{name}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="where the variants are written (kept); default a temporary folder")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--prompts", type=int, default=10)
    ap.add_argument("--json", action="store_true", help="one JSON line on stdout (progress on stderr)")
    args = ap.parse_args()
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else (lambda *a: print(*a, flush=True))
    from reinagent.llm import packaged

    gguf = packaged.model_file(packaged.MODELS[NAME])
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        started = time.perf_counter()
        from reinagent.llm.local import prepare

        reader = prepare(gguf, "fast").path  # the engine's IR of the file (its Q4 offsets: llm/gguf_exact.py)
        errors = {v: write_variant(reader, out / v, v) for v in VARIANTS}
        say(f"CPU: {cpu_model()}; variants written in {time.perf_counter() - started:.0f} s to {out}; relative "
            "weight error " + ", ".join(f"{v} {e:.4f}" for v, e in errors.items()))

        async def go():
            engines = [EmbeddedAt(gguf, "gguf"), *(EmbeddedAt(out / v, v) for v in VARIANTS)]
            try:
                rounds = await interleaved(engines, args.rounds, args.tokens, say)
                agree = {e.name: await agreement([engines[0], e], args.prompts) for e in engines[1:]}
                return rounds, agree
            finally:
                for e in engines:
                    await e.close()

        rounds, agree = asyncio.run(go())
    result = {"cpu": cpu_model(), "rounds": args.rounds, "tokens": args.tokens, "weight_error": errors, "engines": {}}
    say(f"{'median of ' + str(args.rounds) + ' rounds':<22}{'prefill':>9}{'decode':>9}{'4 in flight':>13}{'8 in flight':>13}{'decode at 8':>13}{'same greedy text':>18}")
    for name, measured in rounds.items():
        med = {k: round(statistics.median(r[k] for r in measured), 2) for k in ("prefill", "decode", "in_flight_4", "in_flight_8", "decode_8_in_flight")}
        same = sum(s for s, *_ in agree[name]) if name in agree else None
        result["engines"][name] = {**med, "greedy_identical": same}
        say(f"{name:<22}{med['prefill']:>9.1f}{med['decode']:>9.2f}{med['in_flight_4']:>13.2f}{med['in_flight_8']:>13.2f}"
            f"{med['decode_8_in_flight']:>13.2f}{'' if same is None else f'{same} of {len(agree[name])}':>18}")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
