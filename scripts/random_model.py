"""Build a randomly initialised causal LM from a folder holding only a config and tokenizer files
(SmolLM2-135M-Instruct's), and save it where `--model local:DIR` loads it.

    python scripts/random_model.py CONFIG_DIR OUT_DIR

For machines that cannot reach a model hub and cannot receive the real weights (scripts/gpu_check.sh):
the weights are random, so what runs on it measures speed and plumbing only, never learning.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: python scripts/random_model.py CONFIG_DIR OUT_DIR")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    source, out = Path(sys.argv[1]), Path(sys.argv[2])
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(source)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    for name in ("generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                 "special_tokens_map.json"):
        if (source / name).is_file():
            shutil.copy2(source / name, out / name)
    params = sum(p.numel() for p in model.parameters())
    print(f"random {config.model_type} model ({params / 1e6:.1f}M parameters, seed 0) saved to {out}")


if __name__ == "__main__":
    main()
