"""reinagent.llm.gguf_exact: the engine's Q4_K/Q4_1 matrices are the file's, not the reader's
rounding of them. Measured against gguf-py's dequantisation of the real files (the embedded
SmolLM2's Q4_1, with llama's permuted q/k rows; the packaged 1.5B's Q4_K), and on a small graph for
the groups the rule treats apart (scale 0)."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from .conftest import ROOT

ov = pytest.importorskip("openvino")
pytest.importorskip("openvino_genai")

from reinagent.llm import gguf_exact  # noqa: E402

spec = importlib.util.spec_from_file_location("gguf_offsets", ROOT / "perf" / "gguf_offsets.py")
gguf_offsets = importlib.util.module_from_spec(spec)
sys.path.insert(0, str(ROOT / "perf"))  # as when run: its sibling scripts are importable
try:
    spec.loader.exec_module(gguf_offsets)
finally:
    sys.path.remove(str(ROOT / "perf"))


def _weight(q: np.ndarray, scale: np.ndarray, zero: np.ndarray):
    """The reader's decompression of one [rows, groups, 32] weight: (u4 q - u4 zero) * f16 scale."""
    import openvino.opset13 as ops

    def u4(values):
        flat = values.astype(np.uint8).reshape(-1)
        return ov.op.Constant(ov.Tensor(flat[0::2] | (flat[1::2] << 4), list(values.shape), ov.Type.u4), shared_memory=False)

    return ops.multiply(ops.subtract(ops.convert(u4(q), ov.Type.f16), ops.convert(u4(zero), ov.Type.f16)),
                        ops.constant(scale.astype(np.float16)))


def _graph(q: np.ndarray, scale: np.ndarray, zero: np.ndarray):
    import openvino.opset13 as ops

    return ov.Model([ops.convert(_weight(q, scale, zero), ov.Type.f32)], [])


def test_a_mended_group_holds_scale_times_q_minus_offset_and_a_flat_group_its_one_number():
    rng = np.random.default_rng(7)
    q = rng.integers(0, 16, (4, 3, 32)).astype(np.uint8)
    scale = rng.uniform(0.01, 0.05, (4, 3, 1)).astype(np.float32)
    offset = rng.uniform(0.0, 0.4, (4, 3, 1)).astype(np.float32)
    scale[1, 2, 0] = 0.0  # a group of one number: -offset
    model = _graph(q, scale, np.rint(offset / np.maximum(scale, 1e-3)).clip(0, 15))  # the reader's rounded zero
    (chain,) = gguf_exact.chains(model)
    assert chain.shape == (4, 3, 32)
    gguf_exact._replace(chain, q, scale, offset, ov)
    got = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})({})[0]
    want = scale.astype(np.float16).astype(np.float32) * q - offset
    assert np.allclose(got, want, rtol=0, atol=2e-4), np.abs(got - want).max()
    assert np.allclose(got[1, 2], -offset[1, 2, 0], atol=2e-4)


def test_a_split_matrix_multiplies_as_scale_times_q_minus_offset_with_whole_zero_points():
    """A matrix a MatMul reads is split (x W^T = x [s(q - z)]^T - G(x) R^T): its product is the
    file's weights' product, a flat group's included, and its zero points stay u4 (whole numbers:
    what keeps the CPU plugin's 8-bit dynamic quantization on)."""
    import openvino.opset13 as ops

    rng = np.random.default_rng(11)
    q = rng.integers(0, 16, (6, 4, 32)).astype(np.uint8)
    scale = rng.uniform(0.01, 0.05, (6, 4, 1)).astype(np.float32)
    offset = rng.uniform(-0.1, 0.4, (6, 4, 1)).astype(np.float32)  # o/s outside 0..15 too: all in r
    scale[2, 1, 0] = 0.0
    weight = _weight(q, scale, np.rint(offset / np.maximum(scale, 1e-3)).clip(0, 15))  # the reader's rounding
    x = ops.parameter([1, 3, 128], ov.Type.f32)
    matmul = ops.matmul(x, ops.convert(ops.reshape(weight, ops.constant(np.array([6, 128], np.int64)), False),
                                       ov.Type.f32), False, True)
    model = ov.Model([ops.relu(matmul)], [x])
    (chain,) = gguf_exact.chains(model)
    assert gguf_exact.multiplied_by(chain) is not None
    gguf_exact._split(chain, gguf_exact.multiplied_by(chain), scale, offset, ov)
    zeros = chain.subtract.input_value(1).get_node().input_value(0).get_node()
    assert zeros.get_element_type() == ov.Type.u4
    inputs = rng.normal(size=(1, 3, 128)).astype(np.float32)
    # the plugin's 8-bit activations (dynamic quantization) off: the arithmetic, not its rounding, is checked
    got = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                 "DYNAMIC_QUANTIZATION_GROUP_SIZE": 0})(inputs)[0]
    want_w = (scale.astype(np.float16).astype(np.float32) * q - offset).reshape(6, 128)
    want = np.maximum(inputs @ want_w.T, 0)
    assert np.allclose(got, want, rtol=0, atol=2e-3), np.abs(got - want).max()
    rest = gguf_exact.split_rest(next(iter(chain.subtract.output(0).get_target_inputs())).get_node())
    assert rest is not None and rest.shape == (6, 4) and abs(rest[2, 1] - offset[2, 1, 0]) < 1e-3


@pytest.fixture(scope="module")
def embedded_reader(tmp_path_factory):
    """The reader's own IR of the embedded Q4_1 file (rounded offsets), made once for this module."""
    from reinagent.llm.local import embedded_gguf

    folder = tmp_path_factory.mktemp("reader") / "ir"
    gguf_exact.reader_ir(embedded_gguf(), folder)
    return folder


def test_a_chain_whose_integers_are_not_the_files_is_an_error(embedded_reader):
    from reinagent.llm.local import embedded_gguf

    model = ov.Core().read_model(str(embedded_reader / "openvino_model.xml"))
    assert gguf_exact.mend(model, embedded_gguf()) == 210  # every Q4_1 matrix of the file
    model = ov.Core().read_model(str(embedded_reader / "openvino_model.xml"))
    chain = gguf_exact.chains(model)[3]
    ints = gguf_exact.unpacked(chain.q)
    ints[-1, -1, -1] ^= 1  # one integer of the last row: row 0 still finds the tensor
    flat = ints.reshape(-1)
    chain.q.output(0).replace(ov.op.Constant(ov.Tensor(flat[0::2] | (flat[1::2] << 4), list(ints.shape), ov.Type.u4),
                                             shared_memory=False).output(0))
    with pytest.raises(ValueError, match="are not the file's"):
        gguf_exact.match(model, embedded_gguf())


def test_the_embedded_q4_1_matrices_are_the_files_weights(embedded_reader):
    from reinagent.llm.local import embedded_gguf, prepare

    errors = gguf_offsets.weight_errors(embedded_reader, prepare(embedded_gguf(), "fast").path, embedded_gguf(), limit=14)
    assert errors["reader"]["matrices"] == 14  # two layers: q and k rows permuted in the file
    assert errors["mended"]["max"] < 2e-3, errors
    assert errors["reader"]["median"] > 0.05, errors  # the reader's rounding, which the mending removes


def test_the_1_5b_q4_k_groups_are_the_files_weights():
    """Q4_K's packed scales and mins, unpacked as the mending reads them, give gguf-py's weights
    (the graph side of the mending is the embedded model's test above; the 1.5B's reader IR is slow)."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    from reinagent.llm import packaged

    tensors = GGUFReader(str(packaged.model_file(packaged.MODELS["qwen2.5-coder-1.5b"]))).tensors
    picked = [t for t in tensors if t.tensor_type.name == "Q4_K" and t.name.startswith(("blk.0.", "blk.27."))]
    assert len(picked) >= 8
    for t in picked:
        g = gguf_exact.groups(t)
        want = dequantize(t.data, t.tensor_type).reshape(g.q.shape[0], -1)
        got = (g.scale * g.q - g.offset).reshape(want.shape)
        assert np.allclose(got, want, rtol=0, atol=1e-6), (t.name, np.abs(got - want).max())


def test_the_engine_loads_the_mended_copy_and_the_response_cache_tells_the_readings_apart(tmp_path):
    from reinagent.llm.local import embedded_gguf, prepare
    from reinagent.llm.stack import ModelSettings, build_llm

    prepared = prepare(embedded_gguf(), "fast")
    assert prepared.path.name.endswith("-ov-offsets") and prepared.source in ("mended", "cache")
    assert prepare(embedded_gguf(), "fast").source == "cache"
    llm = build_llm("local", ModelSettings(cache_dir=str(tmp_path / "responses")))
    assert llm.identity["offsets"] == gguf_exact.RULE  # answers cached from the rounded reading are not replayed
