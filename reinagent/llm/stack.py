"""The model a run uses: the raw backend wrapped in the run's cross-cutting layers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reinagent.llm import make_llm
from reinagent.llm.base import LLM

if TYPE_CHECKING:
    from reinagent.config import RunConfig


def build_llm(model: str, config: RunConfig, *, role: str = "actor") -> LLM:
    """Backend for `model` as configured for this run."""
    return make_llm(model, base_url=config.base_url, role=role)
