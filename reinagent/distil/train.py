"""Supervised fine-tuning on an exported dataset with TRL's SFTTrainer.

The dataset is tokenised here (see masks.py) and handed to TRL with ready `labels`, which TRL
uses as they are; so the loss is on assistant turns (end-of-turn token included) whatever the chat
template. Full fine-tuning by default; `lora` trains adapters and merges them at the end, so the
output directory is always a plain transformers model that `--model local:DIR` loads.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reinagent.errors import ReinagentError

SUMMARY = "distil.json"  # written last: its presence means the model directory is complete


@dataclass
class TrainOptions:
    base_model: str = "local"  # local, local:PATH, a HF model dir, or a hub id already in the HF cache
    epochs: float = 3.0
    max_steps: int | None = None  # overrides epochs
    learning_rate: float | None = None  # None: 2e-5 full fine-tuning, 2e-4 LoRA
    max_length: int = 4096
    truncate_long: bool = False  # default: drop examples longer than max_length (and say so)
    batch_size: int | None = None  # None: 1 on CPU, 8 on a GPU
    grad_accum: int = 1
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    warmup_ratio: float = 0.0
    seed: int = 0
    cpu_threads: int | None = None  # None: torch's default (every core); 1 is faster on a busy machine
    overwrite: bool = False


@dataclass
class TrainResult:
    output: str
    base_model: str
    device: str
    steps: int
    losses: list[float] = field(default_factory=list)  # training loss at every step
    length: dict[str, Any] = field(default_factory=dict)  # masks.LengthReport
    train_s: float = 0.0
    tokens_per_s: float = 0.0  # all tokens read per second of training (forward + backward)


def resolve_base_model(name: str) -> str:
    """A directory (or hub id) transformers can load: `local` is the embedded SmolLM2, whose GGUF
    is dequantised once into the cache shared with the local backend; `local:PATH` / PATH is a HF
    directory or a .gguf file."""
    from reinagent.llm import local

    if name == "local":
        source = local.embedded_gguf()
    elif name.startswith("local:") or Path(name).expanduser().exists():
        source = local.existing(name.removeprefix("local:"))
    else:
        return name  # a hub id: from_pretrained finds it in the HF cache or says it cannot
    if source.suffix.lower() != ".gguf":
        return str(source)
    folder = local.converted_dir(source)
    if not (folder / "config.json").is_file():
        local.convert_gguf(source, folder)
    return str(folder)


def train(data_dir: str | Path, output: str | Path, options: TrainOptions = TrainOptions()) -> TrainResult:
    """Fine-tune `options.base_model` on DATA_DIR and save model + tokenizer to `output`."""
    from reinagent.distil import require

    require("torch", "transformers", "trl", "datasets", "accelerate", *(["peft"] if options.lora else []))
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig

    from reinagent.distil.export import load_examples
    from reinagent.distil.masks import tokenize_dataset

    out = Path(output)
    if out.exists() and any(out.iterdir()) and not options.overwrite:
        raise ReinagentError(f"{out} exists and is not empty; choose another --output or pass --overwrite")
    base = resolve_base_model(options.base_model)
    tokenizer = AutoTokenizer.from_pretrained(base)
    dataset, length = tokenize_dataset(load_examples(data_dir), tokenizer, options.max_length, truncate=options.truncate_long)
    if length.kept == 0:
        raise ReinagentError(f"no example fits in --max-length {options.max_length} (longest: {length.longest} tokens)")
    gpu = torch.cuda.is_available()
    bf16 = gpu and torch.cuda.is_bf16_supported()
    # fp32 master weights everywhere; on a GPU bf16 autocast does the matmuls (fast and stable).
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    lr = options.learning_rate or (2e-4 if options.lora else 2e-5)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.parent / f".{out.name}.tmp-{os.getpid()}"
    config = SFTConfig(
        output_dir=str(work / "trainer"),
        num_train_epochs=options.epochs,
        max_steps=options.max_steps or -1,
        learning_rate=lr,
        lr_scheduler_type="cosine",
        **_warmup(SFTConfig, options.warmup_ratio),
        per_device_train_batch_size=options.batch_size or (8 if gpu else 1),
        gradient_accumulation_steps=options.grad_accum,
        max_length=options.max_length,  # examples already fit; TRL's own truncation never fires
        bf16=bf16,
        fp16=False,
        use_cpu=not gpu,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=options.seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
        include_num_input_tokens_seen="non_padding",  # for the tokens/s figure
    )
    try:
        result, tuned = _fit(config, model, dataset, tokenizer, options, torch)
        result.output, result.length = str(out), asdict(length)
        _save(tuned, tokenizer, work, out, {"options": asdict(options), "data_dir": str(data_dir), "learning_rate": lr, **asdict(result)})
    finally:
        shutil.rmtree(work, ignore_errors=True)  # a failed run leaves no half-written sibling behind
    return result


def _fit(config: Any, model: Any, dataset: Any, tokenizer: Any, options: TrainOptions, torch: Any) -> tuple[TrainResult, Any]:
    """Run the SFT trainer; the trained model (LoRA merged) and what the run measured."""
    from trl import SFTTrainer

    from reinagent.llm.offline import no_telemetry

    no_telemetry()  # before the trainer is built

    gpu = torch.cuda.is_available()
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer, peft_config=_lora(options))
    _check_labels_kept(dataset, trainer.train_dataset)
    threads = torch.get_num_threads()
    if options.cpu_threads and not gpu:
        # Oversubscribed cores make every torch thread wait on the slowest; fewer threads win then.
        torch.set_num_threads(options.cpu_threads)
    started = time.perf_counter()
    try:
        trainer.train()
    finally:
        torch.set_num_threads(threads)
    train_s = time.perf_counter() - started
    result = TrainResult(
        output="", base_model=options.base_model, device="cuda" if gpu else "cpu",
        steps=trainer.state.global_step, losses=[float(h["loss"]) for h in trainer.state.log_history if "loss" in h],
        train_s=train_s, tokens_per_s=trainer.state.num_input_tokens_seen / train_s if train_s else 0.0,
    )
    return result, (trainer.model.merge_and_unload() if options.lora else trainer.model)


def _check_labels_kept(ours: Any, prepared: Any) -> None:
    """TRL uses ready `labels` as they are in the versions we know; a future version that rebuilt
    them would silently train on prompts and observations, so compare what it will train on."""
    def shape(ds: Any) -> list[tuple[int, int]]:
        return sorted((len(row), sum(label != -100 for label in row)) for row in ds["labels"])

    if shape(ours) != shape(prepared):
        raise ReinagentError("this TRL version changed the prepared labels; the assistant-only loss would not hold")


def _warmup(config_class: Any, ratio: float) -> dict[str, float]:
    # transformers 5 folded `warmup_ratio` into `warmup_steps` (a float below 1 is a ratio).
    import dataclasses

    names = {f.name for f in dataclasses.fields(config_class)}
    return {"warmup_ratio": ratio} if "warmup_ratio" in names else {"warmup_steps": ratio}


def _lora(options: TrainOptions) -> Any:
    if not options.lora:
        return None
    from peft import LoraConfig

    return LoraConfig(r=options.lora_r, lora_alpha=options.lora_alpha, lora_dropout=0.05,
                      target_modules="all-linear", task_type="CAUSAL_LM")


def _save(model: Any, tokenizer: Any, work: Path, out: Path, summary: dict[str, Any]) -> None:
    """Model + tokenizer + distil.json into `out`, via a temporary sibling renamed at the end so a
    killed save never leaves a directory that looks complete."""
    staging = work / "model"
    model.config.use_cache = True  # training turned the KV cache off; generation wants it back
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    (staging / SUMMARY).write_text(json.dumps(summary, indent=2), encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    os.replace(staging, out)
