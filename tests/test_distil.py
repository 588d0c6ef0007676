"""Distillation: export of real run directories, assistant-only loss masks, training, the loop.

Runs are made by reinagent itself with a scripted model, so every trajectory, reflection and
prompt is what a real run records, and no test depends on model luck. Training tests use a tiny
random model built from the embedded model's config and tokenizer (seconds), and one uses the
embedded SmolLM2-135M itself for a few steps.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
import yaml

from reinagent import run
from reinagent.distil.export import ExportOptions, collect, load_examples, write
from reinagent.errors import ReinagentError
from reinagent.records import TrialRecord
from reinagent.runner import load_run
from reinagent.store import RunStore, read_spec
from reinagent.strategy import REFLECTIONS_HEADER

from .conftest import run_cli

datasets = pytest.importorskip("datasets")
REFLECTION = "I answered without searching; next time I will search Shirley Temple first."
SCRIPT = {
    "rules": [
        {"when": "Your failed attempt", "reply": REFLECTION},
        # dev-0001 is solved only once the reflection is in the prompt (trial 2)
        {"when": "lessons you wrote down.*Corliss Archer", "reply": [
            "Thought: I must find the actress first.\nAction: Search[Shirley Temple]",
            "Thought: Shirley Temple was Chief of Protocol.\nAction: Finish[Chief of Protocol]"]},
        # dev-0002 is solved at trial 1
        {"when": "science fantasy young adult", "reply": [
            "Thought: I should search the series.\nAction: Search[Animorphs]",
            "Thought: It is Animorphs.\nAction: Finish[Animorphs]"]},
    ],
    "default": "Thought: guess.\nAction: Finish[wrong]",
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """ReAct + Reflexion on three dev-first100 tasks: one solved at trial 1, one at trial 2 with a
    reflection in its prompt, one never."""
    root = tmp_path_factory.mktemp("distil")
    (root / "script.yaml").write_text(yaml.safe_dump(SCRIPT))
    return Path(run(benchmark="hotpotqa", agent="react", strategy="reflexion", split="dev-first100", num_envs=3,
                    num_trials=2, model=f"scripted:{root / 'script.yaml'}", run_dir=str(root / "run"),
                    cache=False, progress=False))


@pytest.fixture(scope="module")
def records(run_dir) -> dict[tuple[str, int], TrialRecord]:
    return {(r.task_id, r.trial): r for r in load_run(run_dir)[1]}


@pytest.fixture(scope="module")
def tokenizer():
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from reinagent.distil.train import resolve_base_model

    return AutoTokenizer.from_pretrained(resolve_base_model("local"))


def _by_task(examples):
    return {e["task_id"]: e for e in examples}


def _text(messages) -> str:
    return "\n".join(m["content"] for m in messages)


# ----- export ------------------------------------------------------------------------------------


def test_export_successes_with_provenance(run_dir, records):
    examples, stats = collect([run_dir])
    assert stats.successes == 2 and stats.exported == 2 and stats.memory_removed == 1 and not stats.skipped
    ex = _by_task(examples)
    assert set(ex) == {"dev-0001", "dev-0002"}
    one = ex["dev-0001"]
    assert (one["trial"], one["run_dir"], one["agent"], one["strategy"]) == (2, str(run_dir), "react", "reflexion")
    assert one["model"].startswith("scripted:") and one["split"] == "dev-first100" and one["num_steps"] == 2
    assert [m["role"] for m in one["messages"]] == ["system", "user", "assistant", "user", "assistant"]
    assert one["messages"][3]["content"].startswith("Observation: ")
    assert one["messages"][-1]["content"].endswith("Finish[Chief of Protocol]")
    # dropped from the prompt, kept as metadata
    assert REFLECTION not in _text(one["messages"]) and REFLECTIONS_HEADER not in _text(one["messages"])
    assert one["reflections"] == [REFLECTION] and one["reflections_in_prompt"] is False
    # the prompt without memory is exactly what the agent shows a first trial
    recorded = [m.model_dump() for m in records[("dev-0001", 1)].trajectory.messages[:2]]
    assert one["messages"][:2] == recorded


def test_keep_reflections_keeps_the_recorded_conversation(run_dir, records):
    examples, stats = collect([run_dir], ExportOptions(drop_reflections=False))
    one = _by_task(examples)["dev-0001"]
    assert REFLECTIONS_HEADER in one["messages"][1]["content"] and REFLECTION in one["messages"][1]["content"]
    assert one["reflections_in_prompt"] is True and stats.memory_removed == 0
    assert one["messages"] == [m.model_dump() for m in records[("dev-0001", 2)].trajectory.messages]


def test_no_few_shot(run_dir):
    examples, _ = collect([run_dir], ExportOptions(few_shot=False))
    for ex in examples:
        prompt = ex["messages"][1]["content"]
        assert "END OF EXAMPLES" not in prompt and prompt.startswith("Question: ") and ex["few_shot"] is False
        assert REFLECTION not in prompt


def test_cut_fallback_when_the_prompt_changed_since_the_run(run_dir, records, tmp_path):
    """Prompts edited after the run: the agent no longer reproduces them, so the exact memory
    block is cut from the recorded text; an example whose block cannot be found is skipped."""
    store = RunStore.create(tmp_path / "edited", read_spec(run_dir))
    edited = records[("dev-0001", 2)].model_copy(deep=True)
    edited.trajectory.messages[0] = edited.trajectory.messages[0].model_copy(update={"content": "An older system prompt."})
    lost = records[("dev-0002", 1)].model_copy(deep=True)
    lost.memory = ["a reflection that is not in the prompt"]
    for rec in (edited, lost):
        store.append(rec)
    examples, stats = collect([tmp_path / "edited"])
    assert stats.skipped == {"memory block not found in the recorded prompt": 1}
    (one,) = examples
    assert one["messages"][0]["content"] == "An older system prompt."
    assert REFLECTION not in _text(one["messages"]) and "(END OF EXAMPLES)" in one["messages"][1]["content"]


def test_first_success_only_and_dedupe(run_dir):
    twice = [run_dir, run_dir]
    assert collect(twice)[1].later_successes == 2
    examples, stats = collect(twice, ExportOptions(first_success_only=False))
    assert (len(examples), stats.duplicates) == (2, 2)
    examples, stats = collect(twice, ExportOptions(first_success_only=False, dedupe=False))
    assert (len(examples), stats.duplicates) == (4, 0)


def test_cli_export_writes_dataset_and_jsonl(run_dir, tmp_path):
    out = tmp_path / "data"
    done = run_cli("distil", "export", str(run_dir), "--output", str(out), "--keep-reflections")
    assert done.returncode == 0, done.stderr
    assert "exported 2 examples" in done.stdout
    dataset = datasets.load_from_disk(str(out / "dataset"))
    lines = (out / "train.jsonl").read_text().splitlines()
    assert len(dataset) == len(lines) == 2 and json.loads(lines[0])["messages"] == dataset[0]["messages"]
    assert json.loads((out / "export.json").read_text())["options"]["drop_reflections"] is False
    assert len(load_examples(out)) == 2
    again = run_cli("distil", "export", str(run_dir), "--output", str(out))
    assert again.returncode == 2 and "--overwrite" in again.stderr


def test_export_without_successes_is_a_clear_error(run_dir, records, tmp_path):
    store = RunStore.create(tmp_path / "failed", read_spec(run_dir))
    store.append(records[("dev-0000", 1)])
    examples, stats = collect([tmp_path / "failed"])
    with pytest.raises(ReinagentError, match="no successful trajectories"):
        write(examples, stats, ExportOptions(), tmp_path / "out")


def test_cli_help_is_cheap():
    done = run_cli("distil", "--help")
    assert done.returncode == 0 and all(verb in done.stdout for verb in ("export", "train", "loop"))
    import subprocess
    import sys

    code = ("import sys, reinagent.distil.cli, reinagent.distil.export, reinagent.distil.loop; "
            "assert not {'torch', 'transformers', 'trl', 'datasets'} & set(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_extra_names_it(monkeypatch):
    import importlib.util

    from reinagent.distil import require

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "trl" else real(name, *a))
    with pytest.raises(ReinagentError, match=r"trl.*\[distil"):
        require("datasets", "trl")


# ----- masks -------------------------------------------------------------------------------------


def test_loss_only_on_assistant_turns_and_their_end_of_turn(run_dir, tokenizer):
    from reinagent.distil.masks import IGNORE, tokenize_chat

    examples, _ = collect([run_dir], ExportOptions(drop_reflections=False))
    for ex in examples:
        messages = ex["messages"]
        ids, labels = tokenize_chat(tokenizer, messages)
        assert len(ids) == len(labels)
        # the pieces join to exactly what the chat template renders
        assert tokenizer.decode(ids) == tokenizer.apply_chat_template(messages, tokenize=False)
        trained = tokenizer.decode([i for i, lab in zip(ids, labels) if lab != IGNORE])
        replies = [m["content"] for m in messages if m["role"] == "assistant"]
        assert trained == "".join(f"{r}<|im_end|>" for r in replies)
        assert trained.count("<|im_end|>") == len(replies) and "<|im_start|>" not in trained
        for m in messages:
            if m["role"] != "assistant":
                assert m["content"] not in trained
        assert "Observation" not in trained and "Question:" not in trained and REFLECTION not in trained
        # every end-of-turn token after an assistant turn carries loss; none after other turns
        im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        ends = [lab == im_end for i, lab in zip(ids, labels) if i == im_end]
        assert ends == [m["role"] == "assistant" for m in messages]


def test_long_examples_are_counted_and_never_silently_cut(run_dir, tokenizer, caplog):
    from reinagent.distil.masks import IGNORE, tokenize_dataset

    dataset = datasets.Dataset.from_list(collect([run_dir], ExportOptions(few_shot=False))[0])
    with caplog.at_level(logging.WARNING, logger="reinagent.distil"):
        kept, report = tokenize_dataset(dataset, tokenizer, 200)
    assert (report.too_long, report.kept, len(kept), report.action) == (2, 0, 0, "drop")
    assert "2 of 2 examples dropped" in caplog.text
    kept, report = tokenize_dataset(dataset, tokenizer, 200, truncate=True)
    assert report.action == "truncate" and len(kept) == 2 and all(len(r) == 200 for r in kept["input_ids"])
    assert all(any(lab != IGNORE for lab in row) for row in kept["labels"])
    kept, report = tokenize_dataset(dataset, tokenizer, 4096)
    assert report.too_long == 0 and report.kept == 2 and report.trained_tokens < report.tokens


# ----- training ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A 2-layer random model with the embedded model's tokenizer and chat template."""
    pytest.importorskip("trl")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from reinagent.distil.train import resolve_base_model

    base = resolve_base_model("local")
    config = AutoConfig.from_pretrained(base)
    config.update({"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16})
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny") / "model"
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(base).save_pretrained(folder)
    return folder


def _generate(model: str) -> str:
    from reinagent.llm import make_llm
    from reinagent.llm.base import GenerationParams
    from reinagent.records import Message

    async def go() -> str:
        llm = make_llm(model)
        try:
            completion = await llm.generate([Message(role="user", content="Question: who?")], GenerationParams(max_tokens=5))
        finally:
            await llm.aclose()
        assert completion.completion_tokens > 0
        return completion.text

    return asyncio.run(go())


@pytest.mark.slow
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_cli_train_tiny_model(run_dir, tiny_model, tmp_path, lora):
    data, out = tmp_path / "data", tmp_path / "tuned"
    assert run_cli("distil", "export", str(run_dir), "-o", str(data), "--no-few-shot").returncode == 0
    args = ["--lora", "--learning-rate", "1e-2"] if lora else ["--learning-rate", "3e-3"]
    done = run_cli("distil", "train", str(data), "--base-model", f"local:{tiny_model}", "--output", str(out),
                   "--max-steps", "8", "--threads", "1", *args)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "distil.json").read_text())
    assert summary["steps"] == 8 and len(summary["losses"]) == 8
    assert summary["losses"][-1] < summary["losses"][0]
    assert not list(out.glob("adapter_*"))  # LoRA is merged: a plain model directory
    assert isinstance(_generate(f"local:{out}"), str)


@pytest.mark.slow
def test_train_embedded_model_a_few_steps(run_dir, tmp_path):
    """The default base model (embedded SmolLM2-135M): loss falls, the result loads and generates."""
    pytest.importorskip("trl")
    from reinagent.distil.train import TrainOptions, train

    examples, stats = collect([run_dir], ExportOptions(few_shot=False))
    write(examples[:1], stats, ExportOptions(few_shot=False), tmp_path / "data")
    result = train(tmp_path / "data", tmp_path / "tuned", TrainOptions(max_steps=3, learning_rate=5e-5, cpu_threads=1))
    assert result.device == "cpu" and result.steps == 3 and result.tokens_per_s > 0
    assert result.losses[-1] < result.losses[0]
    assert _generate(f"local:{tmp_path / 'tuned'}") is not None
    from huggingface_hub.utils import _telemetry

    assert _telemetry._TELEMETRY_THREAD is None  # TRL's SFTTrainer pinged nobody (reinagent.llm.offline)


@pytest.mark.slow
def test_cli_loop_end_to_end(run_dir, tiny_model, tmp_path):
    """The whole loop at toy size: scripted Reflexion, tiny base model, evaluation of both."""
    script = Path(str(load_run(run_dir)[0].config["model"]).removeprefix("scripted:"))
    work = tmp_path / "loop"
    args = ["distil", "loop", "--work-dir", str(work), "--agent", "react", "--num-trials", "2", "--train-envs", "3",
            "--eval-envs", "2", "--model", f"scripted:{script}", "--base-model", f"local:{tiny_model}",
            "--max-steps", "2", "--learning-rate", "1e-3", "--max-tokens", "4", "--no-few-shot", "--threads", "1"]
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((work / "loop.json").read_text())
    assert summary["exported"] == 2 and summary["rates"]["train_reflexion"] == pytest.approx(2 / 3)
    assert summary["base"]["tasks"] == summary["tuned"]["tasks"] == 2
    assert "| base: local:" in done.stdout and "| tuned: local:" in done.stdout
    again = run_cli(*args)  # resumes: nothing is retrained or re-run
    assert again.returncode == 0 and "reused the model" in again.stdout


COT_SCRIPT = {
    "rules": [
        {"when": "Your failed attempt", "reply": REFLECTION},
        {"when": "lessons you wrote down.*Corliss Archer", "reply": "Thought: Shirley Temple.\nAction: Finish[Chief of Protocol]"},
        {"when": "science fantasy young adult", "reply": "Thought: The series is Animorphs.\nAction: Finish[Animorphs]"},
    ],
    "default": "Thought: guess.\nAction: Finish[wrong]",
}


@pytest.mark.slow
def test_notebook_runs(tiny_model, tmp_path):
    """notebooks/Distillation.ipynb top to bottom, with small parameters injected after its
    `parameters` cell (as papermill does): scripted Reflexion, the tiny base model."""
    import nbformat
    from nbclient import NotebookClient

    from .conftest import ROOT

    (tmp_path / "cot.yaml").write_text(yaml.safe_dump(COT_SCRIPT))
    nb = nbformat.read(ROOT / "notebooks" / "Distillation.ipynb", as_version=4)
    (tagged,) = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    overrides = {"model": f"scripted:{tmp_path / 'cot.yaml'}", "base_model": f"local:{tiny_model}", "num_envs": 3,
                 "eval_envs": 2, "num_trials": 2, "max_tokens": 4, "max_steps": 2, "work_dir": str(tmp_path / "work")}
    nb.cells.insert(tagged + 1, nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in overrides.items())))
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = "\n".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                        for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "| tuned: local:" in outputs and "tokens carry loss" in outputs and '"tuned": ' in outputs
    assert "Thought: The series is Animorphs.\\nAction: Finish[Animorphs]<|im_end|>" in outputs
    images = [k for c in nb.cells if c.cell_type == "code" for o in c.outputs for k in o.get("data", {})]
    assert "image/png" in images
