"""Training rollouts on OpenVINO GenAI (`[rl] rollout_engine = "openvino"`).

Token rollouts through transformers' `generate` run at a fifth of the embedded OpenVINO engine's
tokens per second on this project's CPUs (docs/rl.md, "Rollout speed"). This engine samples the
same token rollouts with OpenVINO GenAI's continuous batching instead: before the first rollout of
each training step the policy's current weights are written as an F16 GGUF file of the embedded
model's family (`reinagent.llm.gguf_export`, the path `local:CHECKPOINT` takes) and loaded into a
fresh pipeline; then every reply of the step is generated there, from the exact token ids the
rollout holds (prompt, earlier replies, environment feedback), so what the trainer scores is the
text that was sampled, token for token.

What differs from the transformers path, and is why it is a setting, not the default:
- the weights are sampled in F16 with the CPU plugin's bf16 arithmetic, the trainer's in fp32 (or
  bf16 autocast): the rollouts are very slightly off-policy (as vLLM's are in TRL), and TRL's
  trainer without vLLM ignores the sampling log-probs, so nothing corrects for it;
- the per-token log-probs returned are OpenVINO's, so only TRL's trainer (which recomputes them)
  may use this engine;
- the policy must be the embedded model's family and tokenizer (SmolLM2-135M-Instruct's shape), as
  for `local:CHECKPOINT` on OpenVINO; another policy is a one-line error at the first step.
The weight refresh (save, GGUF write, pipeline load) costs seconds per step; `refresh_s` keeps
each, and perf/ov_rollouts.py reports tokens per second with and without it.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from reinagent.errors import ConfigError

ENGINES = ("torch", "openvino")
_SEED_MOD = 2**31 - 1


class OpenVINORollouts:
    """Generates token replies from a policy's weights, reloaded when the policy's version moves."""

    def __init__(self, tokenizer: Any, max_batch: int = 32, workdir: str | Path | None = None):
        self.tok = tokenizer
        self.max_batch = max_batch
        self._tmp = tempfile.TemporaryDirectory(prefix="reinagent-ov-rollout-") if workdir is None else None
        self.dir = Path(workdir or self._tmp.name)
        self.pipe: Any = None
        self.template: Path | None = None  # the first export: metadata and layout every refresh reuses
        self.layout: dict[str, tuple[int, int]] = {}
        self.loaded: int | None = None  # the policy version the pipeline holds
        self.version: int | None = None  # the version the next generation must use (set by the trainer)
        self.refresh_s: list[float] = []
        self.generate_s = 0.0
        self.generated = 0
        self._calls = 0

    def close(self) -> None:
        self.pipe = None
        if self._tmp is not None:
            self._tmp.cleanup()

    # --- weights ----------------------------------------------------------------------------------

    def sync(self, model: Any) -> None:
        """Load the policy's current weights unless the pipeline already holds this version. With no
        version set (a caller outside a training step) the weights are loaded every time."""
        if self.pipe is not None and self.version is not None and self.loaded == self.version:
            return
        import openvino_genai as og

        from reinagent.llm.gguf_export import write_gguf
        from reinagent.llm.local import embedded_gguf

        started = time.perf_counter()
        target = self.dir / f"policy-{self.version if self.version is not None else 'now'}-{len(self.refresh_s)}.gguf"
        if self.template is None:  # the first time: the checked export of local:CHECKPOINT
            hf = self.dir / "policy"
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # "Writing model shards" is noise here
            model.save_pretrained(hf, safe_serialization=True)
            self.tok.save_pretrained(hf)
            try:
                write_gguf(hf, target, embedded_gguf())
            except ConfigError as err:
                raise ConfigError(f"rollout_engine = \"openvino\" needs the embedded model's family: {err}; "
                                  "set rollout_engine = \"torch\"") from None
            shutil.rmtree(hf, ignore_errors=True)
            self.template = self.dir / "template.gguf"
            shutil.copyfile(target, self.template)
            self.layout = tensor_layout(self.template)
        else:  # later: the same file with the new weights written over the old, tensor by tensor
            shutil.copyfile(self.template, target)
            patch_weights(target, self.layout, model)
        self.pipe = None  # free the old pipeline before the new one compiles
        scheduler = og.SchedulerConfig()
        scheduler.cache_size = 1
        scheduler.max_num_seqs = self.max_batch
        scheduler.enable_prefix_caching = True  # a group's G samples share their prompt
        scheduler.dynamic_split_fuse = True
        scheduler.max_num_batched_tokens = 1024
        self.pipe = og.ContinuousBatchingPipeline(str(target), scheduler, "CPU", {})
        for old in self.dir.glob("policy-*.gguf"):
            if old != target:
                old.unlink(missing_ok=True)
        self.loaded = self.version
        self.refresh_s.append(time.perf_counter() - started)

    # --- generation -------------------------------------------------------------------------------

    @staticmethod
    def _seeds(n: int) -> list[int]:
        """A fresh sampling seed per reply, drawn from torch's generator, which the rollout seeds
        with the step's seed before it generates: a rerun of a step samples the same replies."""
        import torch

        return [int(s) for s in torch.randint(1, _SEED_MOD, (n,))]

    def generate(self, model: Any, contexts: list[list[int]], *, temperature: float, max_new_tokens: int,
                 ends: list[int]) -> list[tuple[list[int], list[float]]]:
        """One reply per context: (token ids up to and including the end token, their log-probs)."""
        import numpy as np
        import openvino as ov
        import openvino_genai as og

        self.sync(model)
        started = time.perf_counter()
        handles, seeds = [], self._seeds(len(contexts)) if temperature > 0 else []
        for row, context in enumerate(contexts):
            config = og.GenerationConfig()
            config.max_new_tokens = max(1, max_new_tokens)
            config.stop_token_ids = set(ends)
            config.logprobs = 1
            if temperature > 0:
                config.do_sample, config.temperature = True, temperature
                config.top_k, config.top_p = 0, 1.0
                config.rng_seed = seeds[row]
            else:
                config.do_sample = False
            ids = ov.Tensor(np.array([context], dtype=np.int64))
            handles.append(self.pipe.add_request(self._calls * 100_000 + row, ids, config))
        self._calls += 1
        while self.pipe.has_non_finished_requests():
            self.pipe.step()
        replies = []
        for handle in handles:
            outputs = handle.read_all()
            ids = list(outputs[0].generated_ids) if outputs else []
            logps = list(outputs[0].generated_log_probs) if outputs else []
            cut = next((i + 1 for i, t in enumerate(ids) if t in ends), len(ids))
            ids, logps = ids[:cut], (logps + [0.0] * len(ids))[:cut]
            finished = outputs and outputs[0].finish_reason == og.GenerationFinishReason.STOP
            if finished and (not ids or ids[-1] not in ends):  # the stop token, if the engine left it out
                ids, logps = ids + [ends[0]], logps + [0.0]
            replies.append((ids, logps))
        self.generate_s += time.perf_counter() - started
        self.generated += sum(len(ids) for ids, _ in replies)
        return replies


def tensor_layout(path: Path) -> dict[str, tuple[int, int]]:
    """GGUF tensor name -> (byte offset of its data in the file, its size in bytes)."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    return {t.name: (int(t.data_offset), int(t.n_bytes)) for t in reader.tensors}


def patch_weights(path: Path, layout: dict[str, tuple[int, int]], model: Any) -> None:
    """Write `model`'s weights into the GGUF file at `path` (a copy of the first export), each as
    write_gguf lays it out: the q/k rows permuted, 2-D tensors F16, 1-D F32. The layout is the same
    at every step (same names, shapes and types), so only the data bytes change."""
    import numpy as np

    from reinagent.llm.gguf_export import gguf_name, permute

    config = model.config
    n_head, n_kv = config.num_attention_heads, config.num_key_value_heads
    tied = getattr(config, "tie_word_embeddings", False)
    data = np.memmap(path, dtype=np.uint8, mode="r+")
    try:
        written = set()
        for name, tensor in model.state_dict().items():
            if name == "lm_head.weight" and tied:
                continue
            target = gguf_name(name)
            if target is None or target not in layout:
                raise ConfigError(f"rollout_engine = \"openvino\": the policy's tensor {name} has no place in its GGUF")
            array = tensor.detach().float().cpu().numpy()
            if name.endswith("q_proj.weight"):
                array = permute(array, n_head, n_head)
            elif name.endswith("k_proj.weight"):
                array = permute(array, n_head, n_kv)
            array = np.ascontiguousarray(array, dtype=np.float32 if array.ndim == 1 else np.float16)
            offset, size = layout[target]
            if array.nbytes != size:
                raise ConfigError(f"rollout_engine = \"openvino\": tensor {name} is {array.nbytes} bytes, its GGUF "
                                  f"slot {size}")
            data[offset:offset + size] = array.reshape(-1).view(np.uint8)
            written.add(target)
        if written != set(layout):
            raise ConfigError(f"rollout_engine = \"openvino\": tensors not refreshed: {sorted(set(layout) - written)[:3]}")
        data.flush()
    finally:
        del data


def check_engine(engine: str, trainer: str, method: str) -> None:
    """One line when the setting cannot work: OpenVINO's log-probs are not the trainer's."""
    if engine not in ENGINES:
        raise ConfigError(f"unknown rollout_engine {engine!r}; valid: {', '.join(ENGINES)}")
    if engine == "openvino" and (trainer != "trl" or method not in ("grpo", "reflect")):
        raise ConfigError("rollout_engine = \"openvino\" samples for TRL's trainer only (it recomputes the "
                          "log-probs): set trainer = \"trl\" with method grpo or reflect, or rollout_engine = \"torch\"")
