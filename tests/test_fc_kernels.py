"""perf/fc_kernels.py (issue 53) times one layer per weight layout; what it times must be that layout
and that product. Each layout's graph, compiled by the CPU plugin as the script does, must compute
x @ W.T with W = (q - zero point) * scale, and keep its weights in the element type it names."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from .conftest import ROOT

ov = pytest.importorskip("openvino")
spec = importlib.util.spec_from_file_location("fc_kernels", ROOT / "perf" / "fc_kernels.py")
fc_kernels = importlib.util.module_from_spec(spec)
sys.path.insert(0, str(ROOT / "perf"))  # as when run: its sibling perf/precision.py is importable
try:
    spec.loader.exec_module(fc_kernels)
finally:
    sys.path.remove(str(ROOT / "perf"))


@pytest.mark.parametrize("name", list(fc_kernels.LAYOUTS))
def test_each_layout_computes_its_dequantised_product(name):
    kind, group, zero_point = fc_kernels.LAYOUTS[name]
    model, dense = fc_kernels.layer(kind, group, zero_point, n=64, k=256)
    constants = [op for op in model.get_ops() if op.get_type_name() == "Constant"]
    weights = max(constants, key=lambda op: int(np.prod(op.get_output_shape(0))))  # the 64 x 256 one
    assert weights.get_output_element_type(0).get_type_name() == kind
    x = np.random.default_rng(3).standard_normal((1, 1, 256)).astype(np.float32)
    got = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})([x])[0]
    want = x @ dense.T
    assert np.allclose(got, want, rtol=1e-2, atol=1e-2 * np.abs(want).max())
    subtracts = any(op.get_type_name() == "Subtract" for op in model.get_ops())
    assert subtracts == zero_point  # a symmetric layout has no zero point to subtract
    if zero_point:  # q is stored unsigned around its middle: the dequantised weights are centred
        assert abs(float(dense.mean())) < 0.3 * float(np.abs(dense).mean())  # 1 without it
