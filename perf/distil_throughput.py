"""Training throughput of distillation (TRL SFTTrainer), and on a GPU the model FLOPs utilisation.

    python perf/distil_throughput.py                         # the embedded SmolLM2-135M (needs reinagent)
    python perf/distil_throughput.py --model-dir DIR --seq-len 1024 --batch-size 16 --steps 20
    python perf/distil_throughput.py --model-dir DIR --lora --json out.json

Standalone: needs only torch, transformers, trl and datasets (peft for --lora); reinagent is used
only to find the embedded model when --model-dir is not given. The data are random token ids of a
fixed length with the first half masked out (as a prompt would be), so the figure is the trainer's
speed, not the data's; the first --warmup steps (allocation, compilation) are not timed.

MFU = model FLOPs per second / the GPU's dense bf16 peak. Model FLOPs per token: 6N for full
fine-tuning (forward 2N, backward 4N), 4N for LoRA (no weight gradients for frozen weights), N the
parameters that do matmuls (tied embeddings once: as the output layer); the attention term
(12 * layers * hidden * seq_len, PaLM's appendix B) is printed as a second figure.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

# Dense bf16 tensor-core peaks (FLOP/s), from the vendors' data sheets; matched on the device name.
PEAK_BF16 = [
    ("H200", 989.4e12), ("H100 NVL", 835e12), ("H100 PCIe", 756e12), ("H100", 989.4e12), ("GH200", 989.4e12),
    ("B200", 2250e12), ("A100", 312e12), ("A800", 312e12), ("L40S", 362e12), ("L40", 181e12), ("L4", 121e12),
    ("A10G", 70e12), ("A10", 125e12), ("RTX 4090", 165e12), ("RTX 3090", 71e12), ("V100", 125e12), ("T4", 65e12),
]


def peak_flops(name: str) -> float | None:
    for key, peak in PEAK_BF16:
        if key.lower() in name.lower():
            return peak
    return None


def default_model_dir() -> str:
    try:
        from reinagent.distil.train import resolve_base_model
    except ImportError:
        raise SystemExit("give --model-dir (a Hugging Face model directory); reinagent is not installed") from None
    return resolve_base_model("local")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", help="HF model directory (default: the embedded SmolLM2-135M-Instruct)")
    ap.add_argument("--seq-len", type=int, default=None, help="tokens per example (default 512 CPU, 1024 GPU)")
    ap.add_argument("--batch-size", type=int, default=None, help="examples per step (default 1 CPU, 16 GPU)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 4 CPU, 30 GPU)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    ap.add_argument("--lora", action="store_true", help="LoRA r=16 on all linear layers instead of full fine-tuning")
    ap.add_argument("--threads", type=int, help="CPU: torch threads")
    ap.add_argument("--peak-tflops", type=float, help="override the GPU's dense bf16 peak (TFLOP/s)")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    gpu = torch.cuda.is_available()
    if args.threads:
        torch.set_num_threads(args.threads)
    seq_len = args.seq_len or (1024 if gpu else 512)
    batch = args.batch_size or (16 if gpu else 1)
    steps = args.steps or (30 if gpu else 4)
    model_dir = args.model_dir or default_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    params = sum(p.numel() for p in model.parameters())  # tied weights are one tensor: counted once
    cfg = model.config

    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(100, cfg.vocab_size - 100, (batch * (steps + args.warmup), seq_len), generator=gen).tolist()
    half = seq_len // 2
    data = Dataset.from_dict({"input_ids": ids, "labels": [[-100] * half + row[half:] for row in ids]})

    class Timer(TrainerCallback):
        def __init__(self) -> None:
            self.start: float | None = None
            self.end: float | None = None

        def on_train_begin(self, train_args, state, control, **kw):
            if args.warmup == 0:
                self.start = time.perf_counter()

        def on_step_end(self, train_args, state, control, **kw):
            if gpu:
                torch.cuda.synchronize()
            if state.global_step == args.warmup:
                self.start = time.perf_counter()
            elif state.global_step == args.warmup + steps:
                self.end = time.perf_counter()

    peft_config = None
    if args.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM")
    bf16 = gpu and torch.cuda.is_bf16_supported()
    config = SFTConfig(
        output_dir=str(Path(os.environ.get("TMPDIR", "/tmp")) / "distil_throughput"), max_steps=steps + args.warmup,
        per_device_train_batch_size=batch, learning_rate=1e-5, bf16=bf16, use_cpu=not gpu, max_length=seq_len,
        logging_steps=10_000, save_strategy="no", report_to="none", disable_tqdm=True, dataloader_num_workers=0,
    )
    timer = Timer()
    trainer = SFTTrainer(model=model, args=config, train_dataset=data, processing_class=tokenizer,
                         peft_config=peft_config, callbacks=[timer])
    trainer.train()
    elapsed = (timer.end or time.perf_counter()) - (timer.start or 0.0)
    tokens_per_s = steps * batch * seq_len / elapsed

    device = torch.cuda.get_device_name() if gpu else f"CPU ({torch.get_num_threads()} threads)"
    per_token = (4 if args.lora else 6) * params
    attention = 12 * cfg.num_hidden_layers * cfg.hidden_size * seq_len
    result = {
        "device": device, "model_dir": model_dir, "params": params, "mode": "lora" if args.lora else "full",
        "dtype": "bf16 autocast" if bf16 else "float32", "seq_len": seq_len, "batch_size": batch,
        "timed_steps": steps, "seconds": elapsed, "tokens_per_s": tokens_per_s,
        "step_s": elapsed / steps, "model_tflops_per_s": per_token * tokens_per_s / 1e12,
    }
    peak = args.peak_tflops * 1e12 if args.peak_tflops else (peak_flops(device) if gpu else None)
    if peak:
        result["peak_tflops"] = peak / 1e12
        result["mfu"] = per_token * tokens_per_s / peak
        result["mfu_with_attention"] = (per_token + attention) * tokens_per_s / peak
    for key, value in result.items():
        print(f"{key:>20}: {value:.4g}" if isinstance(value, float) else f"{key:>20}: {value}")
    if gpu and not peak:
        print("MFU: unknown GPU peak; pass --peak-tflops")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
