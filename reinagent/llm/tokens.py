"""Counting a prompt's tokens as an OpenAI model does (tiktoken), for the episode token budget.

The local engines count with their own tokenizer and chat template (openvino.py, hf.py). For an
OpenAI model name tiktoken knows, the count is OpenAI's documented chat formula: each message's
tokens plus a few per message for its role markers, plus the reply's priming. Any other model
(another provider, an unknown served name) gives None: the budget then reserves conservatively
(`reinagent.agents.base.estimate_prompt_tokens`).
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

from reinagent.records import Message

PER_MESSAGE = 4  # <|start|>role ... <|end|>, with a margin over OpenAI's 3
REPLY_PRIMING = 3  # <|start|>assistant<|message|>


def _offline_bpe_files() -> None:
    """tiktoken downloads its BPE files on first use; litellm ships the common ones (cl100k_base,
    o200k_base). Point tiktoken at them, as litellm itself does, unless the user chose a folder."""
    spec = importlib.util.find_spec("litellm")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        bundled = Path(folder) / "litellm_core_utils" / "tokenizers"
        if bundled.is_dir():
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
            return


@functools.lru_cache(maxsize=16)
def _encoding(model: str):
    try:
        import tiktoken
    except ImportError:
        return None
    _offline_bpe_files()
    try:
        return tiktoken.encoding_for_model(model)
    except Exception:  # noqa: BLE001 - an unknown name, or its BPE file cannot be had offline
        return None


def openai_prompt_tokens(model: str, messages: Sequence[Message]) -> int | None:
    """The chat prompt's tokens for an OpenAI model name tiktoken knows; None otherwise."""
    encoding = _encoding(model)
    if encoding is None:
        return None
    body = sum(len(encoding.encode(m.content, disallowed_special=())) + len(encoding.encode(m.role)) for m in messages)
    return body + PER_MESSAGE * len(messages) + REPLY_PRIMING
