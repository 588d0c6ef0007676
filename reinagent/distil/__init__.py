"""Distillation: successful trajectories -> a chat dataset -> fine-tuned weights (TRL SFT).

    export.py   run directories -> `datasets` chat dataset (+ JSONL), with provenance per example
    masks.py    chat -> token ids and labels that carry loss on assistant turns only
    train.py    TRL SFTTrainer, full fine-tuning or LoRA (merged), a model dir `local:DIR` loads
    loop.py     Reflexion on a training split -> export -> train -> evaluate base vs tuned
    cli.py      `reinagent distil export | train | loop`

Exporting needs only `datasets`; training needs the `distil` extra (trl, peft, datasets,
accelerate) and the `local` extra (torch, transformers). Nothing heavy is imported at module load.
"""

from __future__ import annotations

import importlib.util

from reinagent.errors import ReinagentError

EXTRA_HINT = "pip install -e '.[distil,local]'"


def require(*modules: str) -> None:
    """Fail early with the extra to install, instead of an ImportError deep inside training."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ReinagentError(
            f"distillation needs {', '.join(missing)}, which is not installed: {EXTRA_HINT} "
            "(the `distil` extra brings trl, peft, datasets and accelerate; `local` brings torch and transformers)"
        )


__all__ = ["EXTRA_HINT", "require"]
