"""What a Hugging Face checkpoint directory holds, as a short key for the copies made of it.

The GGUF and IR copies of `local:HF_DIR` are cached. Keying them on the path and config.json's
mtime reused the old model's copy after training wrote new weights and left config.json alone
(issue 45: the old model's answers were reported under the new checkpoint's name). So the key is a
sha256 of the contents of every file a copy is made from (weights, config, tokenizer).

Hashing 0.5 GB on every run would cost seconds, so each file's digest is remembered in
`digests.json` in the models cache, under its resolved path, size, mtime_ns, ctime_ns and inode: a
rewritten file changes at least its ctime (which no `touch` can set back), so it is hashed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

# The files a copy is made from: weights (safetensors, torch .bin), config and generation config,
# tokenizer files (json, sentencepiece .model, merges/vocab .txt, tiktoken), the chat template
# (chat_template.jinja, which gguf_export and transformers read before tokenizer_config.json's;
# an edited one reused the stale copy: issue 54) and transformers' named templates in
# additional_chat_templates/; and an OpenVINO IR's graph (.xml), for spec.json's record of an IR
# folder. Optimizer states and the like (.pt) are not part of the model.
_SUFFIXES = (".safetensors", ".bin", ".json", ".model", ".txt", ".tiktoken", ".jinja", ".xml")
_TEMPLATES = "additional_chat_templates"  # transformers' folder of named chat templates (*.jinja)
_INDEX = "digests.json"
_MAX_ENTRIES = 2000  # the remembered digests: a few checkpoints' files each; oldest dropped first


def checkpoint_key(folder: Path, cache: Path) -> str:
    """10 hex digits naming the contents of `folder`'s model files (and their names); digests
    remembered under `cache` (the models cache) so an unchanged checkpoint is not read again."""
    return contents_sha256(folder, cache)[:10]


def contents_sha256(folder: Path, cache: Path) -> str:
    """The sha256 naming the contents of `folder`'s model files and their names (checkpoint_key's
    long form; spec.json records it for a model directory)."""
    index = _load(cache / _INDEX)
    whole = hashlib.sha256()
    changed = False
    for path in model_files(folder):
        st = path.stat()  # follows links: a linked file is keyed by what it holds
        stamp = f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"
        digest = index.get(stamp)
        if digest is None:
            digest = _file_digest(path)
            index[stamp] = digest
            changed = True
        whole.update(f"{path.relative_to(folder)}\0{digest}\n".encode())
    if changed:
        _save(cache / _INDEX, index)
    return whole.hexdigest()


def model_files(folder: Path) -> list[Path]:
    """The files of `folder` a copy of the model is made from, in a fixed order."""
    templates = folder / _TEMPLATES
    extra = sorted(templates.glob("*.jinja")) if templates.is_dir() else []
    return [p for p in sorted(folder.iterdir()) + extra if p.name.endswith(_SUFFIXES) and p.is_file()]


def _file_digest(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()  # streamed, in C, GIL released


def _load(path: Path) -> dict[str, str]:
    """The remembered digests; none for a missing, torn or garbled index, or one that is not a
    small regular file (a planted FIFO or a link to /dev/zero: read_json neither hangs nor fills
    memory): the digests are computed again."""
    from reinagent.llm.cache_files import read_json

    data = read_json(path)
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _save(path: Path, index: dict[str, str]) -> None:
    """Written to a temporary sibling and renamed: two runs preparing at once each leave a whole
    index (one's entries may be lost, which costs only a second hashing)."""
    items = list(index.items())[-_MAX_ENTRIES:]  # dicts keep insertion order: the newest last
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:6]}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(dict(items)))
        os.replace(tmp, path)
    except OSError:  # a read-only cache: the key is still right, only not remembered
        tmp.unlink(missing_ok=True)
