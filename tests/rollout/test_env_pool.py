"""`EnvPool`: envs made on demand, reused per key, one caller at a time, all closed at the end."""

from __future__ import annotations

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
