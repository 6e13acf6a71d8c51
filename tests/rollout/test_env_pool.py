"""`EnvPool`: envs made on demand, reused per key, one caller at a time (leases), all closed
at the end."""

from __future__ import annotations

import asyncio
import threading

import pytest

from xpgym.rollout.env_pool import EnvPool


class Made:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_acquire_makes_then_reuses_what_was_released_for_the_same_key():
    pool = EnvPool(Made)
    first = pool.acquire("a")
    second = pool.acquire("a")  # first is in use
    assert first is not second
    pool.release("a", first)
    assert pool.acquire("a") is first
    assert pool.acquire("b").name == "b"  # another key never gets an env of "a"


def test_key_function_groups_requests():
    pool = EnvPool(lambda request: Made(request["id"]), key=lambda request: request["id"])
    env = pool.acquire({"id": "x", "seed": 1})
    pool.release({"id": "x", "seed": 1}, env)
    assert pool.acquire({"id": "x", "seed": 2}) is env


def test_close_closes_every_env_made_once_and_refuses_new_requests():
    pool = EnvPool(Made)
    busy, idle = pool.acquire("a"), pool.acquire("a")
    pool.release("a", idle)
    pool.close()
    pool.close()
    assert (busy.closed, idle.closed) == (1, 1)
    with pytest.raises(RuntimeError, match="closed"):
        pool.acquire("a")
    pool.release("a", busy)  # a late release after close is ignored


def test_concurrent_callers_never_share_an_env():
    pool = EnvPool(Made)
    holders: dict[int, list[int]] = {}
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(200):
            env = pool.acquire("a")
            with lock:
                holders.setdefault(id(env), []).append(1)
                assert len(holders[id(env)]) == 1, "two callers hold the same env"
            with lock:
                holders[id(env)].pop()
            pool.release("a", env)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(holders) <= 4


# --------------------------------------------------------------------------------------
# Leases: the one acquire/use/release skeleton of the trainers' hooks
# --------------------------------------------------------------------------------------


def test_a_lease_gives_its_env_back_when_the_block_ends():
    pool = EnvPool(Made)
    with pool.lease("a") as env:
        assert (pool.num_leased, pool.num_idle) == (1, 0)
    assert (pool.num_leased, pool.num_idle) == (0, 1)
    assert not env.closed
    with pool.lease("a") as again:
        assert again is env


def test_a_lease_whose_block_raises_closes_its_env_and_the_pool_forgets_it():
    pool = EnvPool(Made)
    with pytest.raises(ValueError, match="episode failed"), pool.lease("a") as env:
        raise ValueError("episode failed")
    assert env.closed == 1
    assert (pool.num_leased, pool.num_idle) == (0, 0)
    with pool.lease("a") as fresh:
        assert fresh is not env
    pool.close()
    assert env.closed == 1  # closed once: the pool no longer owns it


def test_a_cancelled_lease_holder_closes_its_env():
    pool = EnvPool(Made)
    leased: list[Made] = []

    async def hold() -> None:
        with pool.lease("a") as env:
            leased.append(env)
            await asyncio.Event().wait()  # never set: only cancellation ends it

    async def main() -> None:
        holder = asyncio.create_task(hold())
        while not leased:
            await asyncio.sleep(0)
        holder.cancel()
        with pytest.raises(asyncio.CancelledError):
            await holder

    asyncio.run(main())
    assert leased[0].closed == 1
    assert pool.num_idle == 0


def test_a_lease_ends_once():
    pool = EnvPool(Made)
    lease = pool.lease("a")
    assert lease.active
    lease.release()
    lease.discard()  # already ended: the released env stays in the pool, open
    lease.release()
    assert not lease.active
    assert (lease.env.closed, pool.num_idle) == (0, 1)


def test_a_closed_pool_refuses_leases_and_ignores_a_late_end():
    pool = EnvPool(Made)
    released, discarded = pool.lease("a"), pool.lease("a")
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.lease("a")
    released.release()
    discarded.discard()
    assert (released.env.closed, discarded.env.closed) == (1, 1)  # by close, once each
    assert (pool.num_leased, pool.num_idle) == (0, 0)


def test_concurrent_leases_hold_different_envs():
    pool = EnvPool(Made)
    holders = 4
    all_holding = threading.Barrier(holders)
    held: list[Made] = []
    lock = threading.Lock()

    def worker() -> None:
        with pool.lease("a") as env:
            with lock:
                held.append(env)
            all_holding.wait()  # every worker holds its lease at this point

    threads = [threading.Thread(target=worker) for _ in range(holders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(env) for env in held}) == holders
    assert (pool.num_leased, pool.num_idle) == (0, holders)
