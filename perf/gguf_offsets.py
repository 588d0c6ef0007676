"""A Q4 GGUF in the engine, read two ways, in one run: OpenVINO GenAI's reader alone, and with the
file's own offsets (reinagent.llm.gguf_exact, what `local:` loads).

    .venv/bin/python perf/gguf_offsets.py [--model qwen2.5-coder-1.5b|embedded] [--rounds 3] [--tokens 128] [--prompts 10] [--no-speed] [--json]

The reader holds each group of 32 weights of a Q4_K or Q4_1 block as 4-bit integers with a scale
and a 4-bit integer zero point, so it rounds the file's offset. This script:

1. dequantises every 4-bit matrix of both readings in the plugin (f32) and sets it against
   gguf-py's dequantisation of the file's tensor: relative error ||W - W_file|| / ||W_file||,
   median and largest over the matrices;
2. (unless --no-speed) runs the engine (reinagent's OpenVINOLLM, 8 in flight at most) on both IR
   folders with perf/engines.py's interleaved rounds: prefill, one-stream decode, 4 and 8 in
   flight, decode alone at 8 in flight, medians;
3. counts the prompts, of the first `--prompts` HumanEval ones, on which the two readings give the
   same first 64 greedy tokens (they are two models: they part).

Which of the two is the file's model by its outputs is perf/engine_reference.py's question.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engines import AGREEMENT_PROMPTS, compare, cpu_model  # noqa: E402 - sibling scripts
from precision import model_path  # noqa: E402
from relayout import EmbeddedAt  # noqa: E402


def dense(model, nodes) -> list:
    """Each node's output (a [rows, groups, 32] weight) as an f32 [rows, cols] array, by the plugin."""
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    outputs = [ops.convert(n.output(0), ov.Type.f32).output(0) for n in nodes]
    values = ov.Core().compile_model(ov.Model(outputs, []), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})({})
    return [np.asarray(values[i], np.float32).reshape(n.get_output_shape(0)[0], -1) for i, n in enumerate(nodes)]


def weight_errors(reader_dir: Path, mended_dir: Path, gguf: Path, limit: int | None = None) -> dict[str, dict[str, float]]:
    """Median and largest relative error of the 4-bit matrices of each reading against the file's
    (the first `limit` of them in graph order, or all)."""
    import numpy as np
    import openvino as ov
    from gguf import GGUFReader
    from gguf.quants import dequantize

    from reinagent.llm.gguf_exact import GROUP, match, split_rest

    core = ov.Core()
    reader, mended = (core.read_model(str(d / "openvino_model.xml")) for d in (reader_dir, mended_dir))
    found = match(reader, gguf)
    products = [n for n in mended.get_ordered_ops() if n.get_type_name() == "Multiply"
                and n.input_value(0).get_node().get_type_name() == "Subtract"
                and n.input_value(0).get_node().input_value(0).get_node().get_type_name() == "Convert"
                and n.input_value(0).get_node().input_value(0).get_node().input_value(0).get_node().get_element_type().get_type_name() == "u4"]
    if len(products) != len(found):
        raise SystemExit(f"the mended IR has {len(products)} 4-bit matrices, the reader's {len(found)}")
    tensors = {t.name: t for t in GGUFReader(str(gguf)).tensors}
    errors: dict[str, list[float]] = {"reader": [], "mended": []}
    for start in range(0, len(found) if limit is None else min(limit, len(found)), 8):  # 8 at a time: memory stays small
        part = found[start:start + 8][: None if limit is None else limit - start]
        readers = dense(reader, [next(iter(m.chain.subtract.output(0).get_target_inputs())).get_node() for m in part])
        menders = dense(mended, products[start:start + 8])
        for m, a, b, product in zip(part, readers, menders, products[start:start + 8]):
            rest = split_rest(product)  # a split matrix: its MatMul subtracts R per group of 32 inputs
            if rest is not None:
                b = b - np.repeat(rest, GROUP, axis=1).reshape(b.shape)
            t = tensors[m.tensor]
            exact = dequantize(t.data, t.tensor_type).reshape(a.shape)[m.order]
            norm = float(np.linalg.norm(exact))
            errors["reader"].append(float(np.linalg.norm(a - exact)) / norm)
            errors["mended"].append(float(np.linalg.norm(b - exact)) / norm)
    return {k: {"median": statistics.median(v), "max": max(v), "matrices": len(v)} for k, v in errors.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b", help="qwen2.5-coder-1.5b, qwen2.5-coder-0.5b or embedded")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--prompts", type=int, default=AGREEMENT_PROMPTS)
    ap.add_argument("--no-speed", action="store_true", help="weight errors only")
    ap.add_argument("--json", action="store_true", help="one JSON line on stdout (progress on stderr)")
    args = ap.parse_args()
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else (lambda *a: print(*a, flush=True))
    from reinagent.llm import gguf_exact
    from reinagent.llm.local import prepare

    gguf = model_path(args.model)
    if not gguf_exact.needs_mending(gguf):
        say(f"{gguf.name} holds no Q4_K or Q4_1 tensor: the reader reads it as written")
        return 0
    result: dict = {"cpu": cpu_model(), "model": args.model}
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        reader = Path(tmp) / "reader"
        gguf_exact.reader_ir(gguf, reader)
        mended = prepare(gguf, "fast").path  # the engine's own copy (made now if need be)
        result["weight_error"] = weight_errors(reader, mended, gguf)
        say(f"CPU: {result['cpu']}; {gguf.name}; {time.perf_counter() - started:.0f} s; relative weight error of its "
            f"{result['weight_error']['reader']['matrices']} 4-bit matrices against gguf-py's: " + "; ".join(
                f"{k} median {v['median']:.5f}, largest {v['max']:.5f}" for k, v in result["weight_error"].items()))
        if not args.no_speed:
            rounds, agree = compare(lambda: [EmbeddedAt(reader, "reader"), EmbeddedAt(mended, "mended")],
                                    args.rounds, args.tokens, args.prompts, say)
            result["engines"] = {name: {k: round(statistics.median(r[k] for r in measured), 2)
                                        for k in ("prefill", "decode", "in_flight_4", "in_flight_8", "decode_8_in_flight")}
                                 for name, measured in rounds.items()}
            result["greedy_identical"] = sum(same for same, *_ in agree)
            say(f"{'median of ' + str(args.rounds) + ' rounds':<22}{'prefill':>9}{'decode':>9}{'4 in flight':>13}{'8 in flight':>13}{'decode at 8':>13}")
            for name, med in result["engines"].items():
                say(f"{name:<22}{med['prefill']:>9.1f}{med['decode']:>9.2f}{med['in_flight_4']:>13.2f}"
                    f"{med['in_flight_8']:>13.2f}{med['decode_8_in_flight']:>13.2f}")
            ratio = result["engines"]["mended"]["decode"] / result["engines"]["reader"]["decode"]
            say(f"one-stream decode, mended / reader: {ratio:.2f}; same first {64} greedy tokens on "
                f"{result['greedy_identical']} of {args.prompts} prompts")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
