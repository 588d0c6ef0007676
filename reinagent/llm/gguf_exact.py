"""The GGUF file's own weights in the engine: OpenVINO GenAI's reader with its zero points mended.

OpenVINO GenAI (2026.4) reads a Q4_K or Q4_1 block as 4-bit integers in groups of 32 with one
scale and one *4-bit integer* zero point per group: w = s * (q - z). The file's weights are
w = d*sc * q - dmin*m (Q4_K) and w = d * q + m (Q4_1), whose offset over the scale is rarely a whole
number, so the reader rounds it: the Q4_K/Q4_1 matrices it builds are 8-9% away from the file's
(relative Frobenius error against gguf-py's dequantisation, median over a file's matrices; 11.7%
at most; its Q6_K and Q8_0 ones are the file's to 0.02%). The engine then decodes another model than
llama.cpp and transformers do (docs/models.md, "The file's weights").

`write_exact_ir` keeps what the reader builds (graph, tokenizer, the 4-bit integers, which are the
file's) and gives every such matrix the file's weights. Each matrix is matched to its GGUF tensor
by its integers, which must equal the file's, row for row (a llama file stores its q and k rows
permuted; the reader undoes that, and so does the match); anything that does not match exactly is
an error, not a guess. Two ways, by what reads the matrix:

- a matrix multiplied (a MatMul, all but the token embedding): split. Per group,
  w = s*q - o = s*(q - z) - r with z the whole number nearest o/s in 0..15 (a u4 zero point, as the
  reader's) and r = o - s*z, so x W^T = x [s*(q - z)]^T - G(x) R^T, where G(x) sums x over each
  group of 32 inputs and R [rows, groups] holds the r's (f16). The first product keeps the reader's
  form, u4 integers with u4 zero points, which the CPU plugin runs with its dynamic quantization
  (the activations in 8 bits per group, int8 dot products: as llama.cpp multiplies); the second is
  1/32 of the work. A fractional zero point (`offsets-f16-1`, the rule before) turned that off: on
  an AMD Zen 4 prefill ran 1.6x and decoding 1.2x slower than the reader's own rounded matrices
  (perf/gguf_offsets.py; docs/models.md, "The file's weights").
- a matrix gathered (the token embedding): its groups' scales and zero points replaced by the
  file's, as f16 constants (z = o / s is then a fraction, which a lookup takes as it is). A group
  whose scale is 0 (all its weights the same number) gets its integers rewritten to hold that number.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GROUP = 32
REST = "file-offsets-rest"  # the friendly name's end of a split matrix's R constant
MENDED = ("Q4_K", "Q4_1")  # the block types whose offsets the reader rounds
RULE = "offsets-split-1"  # part of the cache key and the response cache's model identity: bump on change


def needs_mending(gguf: Path) -> bool:
    """Whether the file holds a tensor of a block type the reader rounds (reads the header only).
    False for a file gguf-py cannot parse: the engine's own load then says what is wrong with it."""
    from gguf import GGUFReader

    try:
        tensors = GGUFReader(str(gguf)).tensors
    except Exception:  # noqa: BLE001 - truncated or not GGUF at all: not ours to report here
        return False
    return any(t.tensor_type.name in MENDED for t in tensors)


@dataclass
class Groups:
    """A tensor's 4-bit weights in groups of 32, in the file's row order: w = scale * q - offset."""

    q: np.ndarray  # uint8 [rows, cols / 32, 32], 0..15
    scale: np.ndarray  # f32 [rows, cols / 32, 1]
    offset: np.ndarray  # f32 [rows, cols / 32, 1]: w = scale * q - offset


def groups(tensor) -> Groups:
    """The 4-bit integers, scales and offsets of a Q4_K or Q4_1 tensor of gguf-py's GGUFReader."""
    from gguf.quants import Q4_K

    rows, cols = int(tensor.shape[1]), int(tensor.shape[0])  # gguf lists the fastest axis first
    kind = tensor.tensor_type.name
    blocks = np.asarray(tensor.data, np.uint8).reshape(-1, 144 if kind == "Q4_K" else 20)
    if kind == "Q4_K":  # 256 weights: d, dmin (f16), 8 six-bit scales and mins, 128 bytes of nibbles
        d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
        dmin = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
        sc, mins = Q4_K.get_scale_min(blocks[:, 4:16].copy())
        scale, offset = d * sc.astype(np.float32), dmin * mins.astype(np.float32)
        nibbles = blocks[:, 16:].reshape(-1, 4, 1, 32) >> np.array([0, 4], np.uint8).reshape(1, 1, 2, 1)
    elif kind == "Q4_1":  # 32 weights: d, m (f16), 16 bytes of nibbles
        scale = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
        offset = -blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
        nibbles = blocks[:, 4:].reshape(-1, 1, 1, 16) >> np.array([0, 4], np.uint8).reshape(1, 1, 2, 1)
    else:
        raise ValueError(f"{tensor.name}: {kind} is not one of {MENDED}")
    q = (nibbles & 0x0F).reshape(rows, cols // GROUP, GROUP)
    return Groups(q, scale.reshape(rows, cols // GROUP, 1), offset.reshape(rows, cols // GROUP, 1))


def llama_rows(rows: int, heads: int) -> np.ndarray:
    """The file's row for each of the reader's rows of a llama q or k matrix: convert_hf_to_gguf
    interleaves each head's two rotary halves, and the reader (as transformers) puts them back."""
    half = rows // heads // 2
    return np.arange(rows).reshape(heads, half, 2).transpose(0, 2, 1).reshape(rows)


@dataclass
class Chain:
    """One decompression in the reader's graph: Convert(u4 q) - Convert(u4 zero), times scale."""

    subtract: object
    q: object  # the u4 Constant
    scale: object  # the f16 Constant
    shape: tuple[int, int, int]


def chains(model) -> list[Chain]:
    found = []
    for node in model.get_ordered_ops():
        if node.get_type_name() != "Subtract":
            continue
        a, b = (node.input_value(i).get_node() for i in (0, 1))
        if not (a.get_type_name() == b.get_type_name() == "Convert"):
            continue
        q, zero = a.input_value(0).get_node(), b.input_value(0).get_node()
        if q.get_type_name() != "Constant" or zero.get_type_name() != "Constant" or q.get_element_type().get_type_name() != "u4":
            continue
        multiply = next(iter(node.output(0).get_target_inputs())).get_node()
        scale = multiply.input_value(1).get_node()
        if multiply.get_type_name() != "Multiply" or scale.get_type_name() != "Constant":
            continue
        found.append(Chain(node, q, scale, tuple(q.get_output_shape(0))))
    return found


def unpacked(constant) -> np.ndarray:
    """A u4 Constant's values, low nibble first, in its shape."""
    packed = np.asarray(constant.get_data(), np.uint8)
    out = np.empty(packed.size * 2, np.uint8)
    out[0::2], out[1::2] = packed & 0x0F, packed >> 4
    return out.reshape(tuple(constant.get_output_shape(0)))


@dataclass
class Match:
    chain: Chain
    tensor: str  # its name in the file
    groups: Groups  # the file's, in the file's row order
    order: np.ndarray  # the file's row for each of the graph's rows


def match(model, gguf: Path) -> list[Match]:
    """The file's tensor of every 4-bit chain of the reader's graph, in graph order. A chain whose
    integers match no tensor of the file raises ValueError."""
    from gguf import GGUFReader

    reader = GGUFReader(str(gguf))
    fields = {f.name: f for f in reader.fields.values()}
    arch = bytes(fields["general.architecture"].parts[-1]).decode()
    heads = {key: int(fields[f"{arch}.attention.{key}"].parts[-1][0]) for key in ("head_count", "head_count_kv")
             if f"{arch}.attention.{key}" in fields}
    found = chains(model)
    waiting = {unpacked_row(c.q, c.shape[1] * GROUP).tobytes(): c for c in found}
    matched: dict[int, Match] = {}
    for tensor in reader.tensors:
        if tensor.tensor_type.name not in MENDED or not waiting:
            continue
        file = groups(tensor)
        key = file.q[0].tobytes()  # row 0 is row 0 in either order
        chain = waiting.get(key)
        if chain is None or chain.shape != file.q.shape:
            continue
        orders = [np.arange(file.q.shape[0])]
        if arch == "llama" and tensor.name.endswith(("attn_q.weight", "attn_k.weight")):
            count = heads["head_count" if tensor.name.endswith("attn_q.weight") else "head_count_kv"]
            orders.append(llama_rows(file.q.shape[0], count))
        ints = unpacked(chain.q)
        order = next((o for o in orders if np.array_equal(ints, file.q[o])), None)
        if order is None:
            raise ValueError(f"{gguf.name}: {tensor.name}: the reader's 4-bit integers are not the file's")
        matched[id(chain)] = Match(chain, tensor.name, file, order)
        del waiting[key]
    if waiting:
        raise ValueError(f"{gguf.name}: {len(waiting)} of the reader's 4-bit matrices match no Q4_K/Q4_1 tensor of the file")
    return [matched[id(c)] for c in found]


def mend(model, gguf: Path) -> int:
    """Give every reader group of a Q4_K/Q4_1 tensor of `gguf` the file's scale and offset, in
    place; the number of matrices mended."""
    import openvino as ov

    found = match(model, gguf)
    for m in found:
        q, scale, offset = m.groups.q[m.order], m.groups.scale[m.order], m.groups.offset[m.order]
        matmul = multiplied_by(m.chain)
        if matmul is None:
            _replace(m.chain, q, scale, offset, ov)
        else:
            _split(m.chain, matmul, scale, offset, ov)
    return len(found)


def multiplied_by(chain: Chain):
    """The MatMul (x W^T) that is the decompressed matrix's only reader, or None (a Gather)."""
    node = next(iter(chain.subtract.output(0).get_target_inputs())).get_node()  # the Multiply
    for _ in range(3):  # Multiply -> Reshape -> Convert -> MatMul, as the reader builds it
        readers = [target.get_node() for target in node.output(0).get_target_inputs()]
        if len(readers) != 1:
            return None
        node = readers[0]
        if node.get_type_name() == "MatMul":
            return node if node.get_attributes()["transpose_b"] and not node.get_attributes()["transpose_a"] else None
    return None


def _split(chain: Chain, matmul, scale: np.ndarray, offset: np.ndarray, ov) -> None:
    """w = s*(q - z) - r: whole zero points in the matrix, the rest, r, in a product of its own."""
    import openvino.opset13 as ops

    scale16 = scale.astype(np.float16)
    s = scale16.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        zero = np.where(s > 0, np.clip(np.rint(offset / s), 0, 15), 0).astype(np.uint8)
    rest = offset - s * zero  # a group of one number (s = 0): z = 0, r = o, so w = -o
    zeros = u4_constant(zero, ov)
    chain.subtract.input_value(1).get_node().input(0).replace_source_output(zeros.output(0))
    multiply = next(iter(chain.subtract.output(0).get_target_inputs())).get_node()
    multiply.input(1).replace_source_output(ov.op.Constant(scale16).output(0))
    rows, groups = rest.shape[0], rest.shape[1]
    x = matmul.input_value(0)
    sums = ops.reduce_sum(ops.reshape(x, ops.constant(np.array([0, 0, groups, GROUP], np.int64)), special_zero=True),
                          ops.constant(np.array([-1], np.int64)), keep_dims=False)
    offsets = ops.constant(rest.reshape(rows, groups).astype(np.float16))
    offsets.set_friendly_name(f"{matmul.get_friendly_name()}/{REST}")
    correction = ops.matmul(sums, ops.convert(offsets, ov.Type.f32), False, True)
    readers = list(matmul.output(0).get_target_inputs())
    product = ops.subtract(matmul.output(0), correction)
    for target in readers:
        target.replace_source_output(product.output(0))


def split_rest(multiply) -> np.ndarray | None:
    """The R [rows, groups] a split matrix's MatMul subtracts (f32), found from its Multiply; None
    for a matrix not split. For perf/gguf_offsets.py's weight errors: W = dense - R per group."""
    node = multiply
    for _ in range(4):
        readers = [target.get_node() for target in node.output(0).get_target_inputs()]
        if len(readers) != 1:
            return None
        node = readers[0]
        if node.get_type_name() == "Subtract":
            const = node.input_value(1).get_node().input_value(1).get_node().input_value(0).get_node()
            if const.get_friendly_name().endswith(REST):
                return np.asarray(const.get_data(), np.float32)
            return None
    return None


def unpacked_row(constant, n: int) -> np.ndarray:
    """The first `n` values of a u4 Constant (its first row), low nibble first."""
    packed = np.asarray(constant.get_data(), np.uint8)[: n // 2]
    out = np.empty(n, np.uint8)
    out[0::2], out[1::2] = packed & 0x0F, packed >> 4
    return out


def u4_constant(values: np.ndarray, ov):
    """A u4 Constant of `values` (0..15), two to a byte, low nibble first."""
    flat = values.astype(np.uint8).reshape(-1)
    packed = (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)
    return ov.op.Constant(ov.Tensor(packed, list(values.shape), ov.Type.u4), shared_memory=False)


def _replace(chain: Chain, q: np.ndarray, scale: np.ndarray, offset: np.ndarray, ov) -> None:
    scale16 = scale.astype(np.float16)
    with np.errstate(divide="ignore", invalid="ignore"):
        zero = offset / scale16.astype(np.float32)
    # A group of one number (scale 0), or one whose offset is out of f16's reach over its scale
    # (then the integers' part is under 15/65504 of it): integers 0, scale 1, zero point -w.
    flat = (scale16 == 0) | ~np.isfinite(zero) | (np.abs(zero) > 60000)
    if flat.any():
        q = np.where(flat, 0, q).astype(np.uint8)
        scale16 = np.where(flat, np.float16(1), scale16)
        zero = np.where(flat, offset, zero)
        integers = u4_constant(q, ov)
        chain.subtract.input(0).get_source_output().get_node().input(0).replace_source_output(integers.output(0))
    multiply = next(iter(chain.subtract.output(0).get_target_inputs())).get_node()
    chain.subtract.input(1).replace_source_output(ov.op.Constant(zero.astype(np.float16)).output(0))
    multiply.input(1).replace_source_output(ov.op.Constant(scale16).output(0))


def reader_ir(gguf: Path, folder: Path) -> None:
    """The IR OpenVINO GenAI's GGUF reader builds from `gguf`, with its tokenizer, saved in `folder`
    (the reader saves beside the file it reads, so it reads a link to it there)."""
    import openvino_genai as og

    folder.mkdir(parents=True, exist_ok=True)
    link = folder / gguf.name
    link.symlink_to(gguf.resolve())
    try:
        og.LLMPipeline(str(link), "CPU", enable_save_ov_model=True)
    finally:
        link.unlink()


def write_exact_ir(gguf: Path, target: Path) -> int:
    """The reader's IR of `gguf` with the file's own scales and offsets, written to `target`
    (made beside it and renamed into place); the number of matrices mended."""
    import openvino as ov

    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        reader_ir(gguf, work / "reader")
        model = ov.Core().read_model(str(work / "reader" / "openvino_model.xml"))
        mended = mend(model, gguf)
        (work / "exact").mkdir()
        ov.save_model(model, str(work / "exact" / "openvino_model.xml"), compress_to_fp16=False)
        del model
        for extra in (work / "reader").iterdir():
            if not extra.name.startswith("openvino_model."):
                shutil.copy(extra, work / "exact")
        try:
            (work / "exact").rename(target)
        except OSError:
            if not (target / "openvino_model.xml").is_file():  # not another process's copy: a real failure
                raise
        return mended
    finally:
        shutil.rmtree(work, ignore_errors=True)
