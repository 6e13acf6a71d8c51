"""`WorkSharingPool`: cheap batches run in the caller, a stalled caller hands the rest over."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from hang_guard import HANG_GUARD_S

from xpgym.core.vector.pool import Failed, WorkSharingPool


@pytest.fixture
def pool() -> Iterator[WorkSharingPool]:
    pool = WorkSharingPool(4, name="test-pool")
    yield pool
    pool.close()


def threads_of(pool: WorkSharingPool, n: int, kind: str = "task") -> list[threading.Thread]:
    return pool.run(lambda i: threading.current_thread(), n, None, kind)


def test_the_first_batch_of_a_kind_is_shared_and_later_ones_run_in_the_caller(pool):
    pool.blocking_threshold = HANG_GUARD_S  # no sample of the watcher can see a stall
    caller = threading.current_thread()
    threads_of(pool, 8)  # shared: the pool does not know yet whether these tasks block
    assert threads_of(pool, 64) == [caller] * 64
    assert pool.run(lambda i: i * i, 5, None) == [0, 1, 4, 9, 16]


def test_a_stalled_caller_hands_the_tasks_it_has_not_reached_to_the_helpers(pool):
    """Task 0 waits for task 5, which can only run while task 0 waits if the watcher hands
    tasks 1-7 to the helpers."""
    threads_of(pool, 8)  # teaches the pool that these tasks do not block
    task_5_ran = threading.Event()
    caller = threading.current_thread()

    def task(i: int) -> tuple[int, threading.Thread]:
        if i == 0:
            assert task_5_ran.wait(HANG_GUARD_S), "task 5 never ran while task 0 waited"
        if i == 5:
            task_5_ran.set()
        return i, threading.current_thread()

    results = pool.run(task, 8, None)
    assert [i for i, _ in results] == list(range(8))  # in order, whoever ran them
    assert results[0][1] is caller
    assert results[5][1] is not caller
    # The next batch of that kind is shared: its tasks were seen to block.
    assert pool._blocks["task"] is True


def stall_until_a_helper_runs(pool: WorkSharingPool) -> list[threading.Thread]:
    """Run a batch whose task 0 waits until task 3 ran (on a helper); return who ran each."""
    task_3_ran = threading.Event()

    def task(i: int) -> threading.Thread:
        if i == 0:
            assert task_3_ran.wait(HANG_GUARD_S), "task 3 never ran while task 0 waited"
        if i == 3:
            task_3_ran.set()
        return threading.current_thread()

    return pool.run(task, 4, None)


def test_an_idle_watcher_is_woken_by_the_next_loop(pool):
    pool.IDLE_SAMPLES = 1  # idle after one sample without a loop
    threads_of(pool, 4)
    threads_of(pool, 4)  # a loop the watcher followed
    deadline = time.monotonic() + HANG_GUARD_S
    while not pool._watcher_idle:
        assert time.monotonic() < deadline, "the watcher never went idle"
        time.sleep(0.001)
    ran_by = stall_until_a_helper_runs(pool)  # hangs unless the loop woke the watcher
    assert ran_by[0] is threading.current_thread()
    assert ran_by[3] is not threading.current_thread()


def test_a_caller_loop_reports_what_raised_in_the_caller_and_in_the_helpers(pool):
    threads_of(pool, 4)
    gate = threading.Event()

    def task(i: int) -> int:
        if i == 0:
            assert gate.wait(HANG_GUARD_S)
        if i == 2:
            gate.set()
        if i in (1, 3):
            raise ValueError(f"task {i}")
        return i

    results = pool.run(task, 4, None)
    assert results[0] == 0
    assert results[2] == 2
    assert [str(results[i].exc) for i in (1, 3)] == ["task 1", "task 3"]
    assert all(isinstance(results[i], Failed) for i in (1, 3))
    # In a loop that does not stall, a raising task is a `Failed` too.
    pool.blocking_threshold = HANG_GUARD_S
    threads_of(pool, 4)
    results = pool.run(lambda i: 1 // i, 3, None)
    assert isinstance(results[0], Failed)
    assert results[1:] == [1, 0]


def test_start_loop_refuses_a_kind_whose_last_batch_blocked(pool):
    assert pool.start_loop([1, 2], lambda i: i, "step") is None  # not learned yet
    threads_of(pool, 2, kind="step")
    loop = pool.start_loop(["a", "b"], lambda i: i, "step")
    assert loop is not None
    results: list[str] = []
    try:
        results = [item.upper() for item in loop.claims]
        assert loop.taken() == 2
    finally:
        assert pool.finish_loop(loop, results) is False  # nothing was handed over
    assert results == ["A", "B"]


def test_close_stops_the_watcher_and_the_helpers():
    pool = WorkSharingPool(3, name="closing-pool")
    threads_of(pool, 4)
    threads_of(pool, 4)  # the watcher has watched a loop
    pool.close()
    alive = [t.name for t in threading.enumerate() if t.name.startswith("closing-pool")]
    assert alive == []
