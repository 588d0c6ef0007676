"""reinagent.slots.Slots, driven step by step: the lowest key goes first, equal keys first come
first served, a cancelled waiter takes no slot, and a plain `async with` is a slot like any other."""

from __future__ import annotations

import asyncio

import pytest

from reinagent.slots import Slots


async def _settle():
    for _ in range(5):  # let every ready task run up to its next await
        await asyncio.sleep(0)


def test_the_lowest_key_goes_first_and_equal_keys_keep_their_order():
    async def main():
        slots, got = Slots(1), []
        await slots.acquire((-1, 0))  # the slot is taken: everyone below waits

        async def wait(name, key):
            await slots.acquire(key)
            got.append(name)

        waiters = [asyncio.create_task(wait(n, k)) for n, k in
                   [("b1", (-1, 1)), ("c1", (-1, 2)), ("a2", (-2, 0)), ("d1", (-1, 1))]]
        await _settle()
        assert got == []
        for _ in waiters:
            slots.release()
            await _settle()
        await asyncio.gather(*waiters)
        return got, slots.free

    got, free = asyncio.run(main())
    assert got == ["a2", "b1", "d1", "c1"]
    assert free == 0  # the last waiter still holds the slot


def test_a_cancelled_waiter_takes_no_slot():
    async def main():
        slots, got = Slots(1), []
        await slots.acquire()

        async def wait(name, key):
            await slots.acquire(key)
            got.append(name)

        gone = asyncio.create_task(wait("gone", (-2, 0)))
        kept = asyncio.create_task(wait("kept", (-1, 0)))
        await _settle()
        gone.cancel()
        await _settle()
        slots.release()
        await kept
        slots.release()
        return got, slots.free, gone.cancelled()

    got, free, cancelled = asyncio.run(main())
    assert got == ["kept"] and cancelled
    assert free == 1


def test_free_slots_are_counted_and_async_with_holds_one():
    async def main():
        slots = Slots(2)
        async with slots:
            inside = slots.free
            await slots.acquire((-5, 0))
            full = slots.free
            slots.release()
        return inside, full, slots.free

    assert asyncio.run(main()) == (1, 0, 2)
    with pytest.raises(ValueError, match="at least 1"):
        Slots(0)
