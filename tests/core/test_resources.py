"""`xpgym.core.resources.ResourcePool`: lazy creation, FIFO queueing, reset on release,
lease timeouts, failures, close, async acquire. Ordering is shown with threads, events and
polled counters; time with a fake clock; no test asserts on a duration."""

from __future__ import annotations

import asyncio
import threading

import pytest
from hang_guard import HANG_GUARD_S, wait_until

from xpgym.core.resources import (
    AcquireTimeoutError,
    Lease,
    LeaseExpiredError,
    PoolClosedError,
    ResourcePool,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Backend:
    """A resource with a state a reset clears, and counters of resets and closes."""

    made = 0

    def __init__(self) -> None:
        Backend.made += 1
        self.number = Backend.made
        self.state: list[str] = []
        self.resets = 0
        self.closed = 0

    def reset(self) -> None:
        self.resets += 1
        self.state.clear()

    def close(self) -> None:
        self.closed += 1


def make_pool(size: int = 1, **kwargs) -> tuple[ResourcePool[Backend], list[Backend]]:
    made: list[Backend] = []

    def factory() -> Backend:
        made.append(Backend())
        return made[-1]

    return ResourcePool(factory, size, **kwargs), made


def in_thread(pool: ResourcePool[Backend], owner: str, results: list, **kwargs) -> threading.Thread:
    """Start a thread that acquires (appending ``(owner, lease or exception)``) and stops."""

    def run() -> None:
        try:
            results.append((owner, pool.acquire(owner, **kwargs)))
        except Exception as exc:  # recorded for the test to assert on
            results.append((owner, exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_resources_are_made_lazily_up_to_size_and_reset_on_release():
    pool, made = make_pool(size=2)
    assert made == []
    assert pool.metrics()["created"] == 0
    first = pool.acquire("a")
    second = pool.acquire("b")
    assert len(made) == 2
    assert first.resource is not second.resource
    first.resource.state.append("dirty")
    assert pool.metrics() | {"wait_s_mean": 0, "wait_s_max": 0} == {
        "name": "pool",
        "size": 2,
        "created": 2,
        "in_use": 2,
        "idle": 0,
        "waiting": 0,
        "acquired": 2,
        "reclaimed": 0,
        "replaced": 0,
        "wait_s_mean": 0,
        "wait_s_max": 0,
    }
    backend = first.resource
    first.release()
    assert backend.resets == 1
    assert backend.state == []
    with pool.acquire("c") as third:
        assert third.resource is backend  # reused, not made again
        assert len(made) == 2
    assert not third.active
    assert pool.metrics()["idle"] == 1
    assert pool.metrics()["in_use"] == 1
    second.release()
    pool.close()


def test_reset_callable_is_used_instead_of_the_method():
    seen: list[object] = []
    pool = ResourcePool(dict, 1, reset=lambda d: (seen.append(d), d.clear()))
    with pool.acquire() as lease:
        lease.resource["x"] = 1
    assert seen
    assert seen[0] == {}
    with pool.acquire() as lease:
        assert lease.resource is seen[0]


def test_a_resource_without_reset_is_refused_and_its_place_freed():
    pool = ResourcePool(object, 1)
    with pytest.raises(TypeError, match="no reset"):
        pool.acquire()
    assert pool.metrics()["created"] == 0
    with pytest.raises(TypeError, match="no reset"):
        pool.acquire()  # the place was freed: it did not block


def test_waiters_are_served_first_come_first_served():
    pool, _ = make_pool(size=1)
    holder = pool.acquire("holder")
    results: list = []
    threads = []
    for name in ("first", "second", "third"):
        threads.append(in_thread(pool, name, results))
        expected = len(threads)
        assert wait_until(lambda n=expected: pool.metrics()["waiting"] == n)
    holder.release()
    for position in range(3):
        assert wait_until(lambda p=position: len(results) == p + 1)
        _owner, lease = results[position]
        assert isinstance(lease, Lease)
        assert pool.metrics()["waiting"] == 2 - position
        lease.release()
    assert [owner for owner, _ in results] == ["first", "second", "third"]
    for thread in threads:
        thread.join(HANG_GUARD_S)
    assert pool.metrics()["acquired"] == 4


def test_wait_time_is_measured_on_the_pool_clock():
    clock = FakeClock()
    pool, _ = make_pool(size=1, clock=clock)
    holder = pool.acquire()
    assert holder.wait_s == 0.0
    results: list = []
    thread = in_thread(pool, "w", results)
    assert wait_until(lambda: pool.metrics()["waiting"] == 1)
    clock.now = 5.0
    holder.release()
    thread.join(HANG_GUARD_S)
    (_, lease) = results[0]
    assert lease.wait_s == 5.0
    metrics = pool.metrics()
    assert metrics["wait_s_max"] == 5.0
    assert metrics["wait_s_mean"] == 2.5


def test_acquire_times_out_and_leaves_the_queue():
    pool, _ = make_pool(size=1, acquire_timeout_s=0.01)
    pool.acquire()
    with pytest.raises(AcquireTimeoutError, match="pool"):
        pool.acquire()
    assert pool.metrics()["waiting"] == 0
    with pytest.raises(AcquireTimeoutError):
        pool.acquire(timeout_s=0.01)  # the argument overrides the default too


def test_a_lease_past_its_timeout_is_reclaimed_and_stale():
    clock = FakeClock()
    pool, made = make_pool(size=1, lease_timeout_s=10.0, clock=clock)
    lease = pool.acquire("slow")
    lease.resource.state.append("dirty")
    clock.now = 9.0
    assert lease.active
    assert pool.metrics()["reclaimed"] == 0
    clock.now = 10.0
    assert not lease.active
    with pytest.raises(LeaseExpiredError, match="slow"):
        _ = lease.resource
    assert made[0].state == []
    assert made[0].resets == 1
    assert pool.metrics()["reclaimed"] == 1
    assert pool.metrics()["idle"] == 1
    lease.release()  # a reclaimed lease: nothing happens
    with pytest.raises(LeaseExpiredError):
        _ = lease.resource
    with pool.acquire() as again:
        assert again.resource is made[0]


def test_reclaiming_serves_a_waiter():
    clock = FakeClock()
    pool, made = make_pool(size=1, lease_timeout_s=10.0, clock=clock)
    stale = pool.acquire("stuck")
    results: list = []
    thread = in_thread(pool, "waiter", results)
    assert wait_until(lambda: pool.metrics()["waiting"] == 1)
    clock.now = 11.0
    pool.reclaim_expired()
    thread.join(HANG_GUARD_S)
    (owner, lease) = results[0]
    assert owner == "waiter"
    assert lease.resource is made[0]
    with pytest.raises(LeaseExpiredError):
        _ = stale.resource


def test_a_resource_whose_reset_fails_is_closed_and_replaced():
    pool, made = make_pool(size=1)
    lease = pool.acquire()

    def broken_reset() -> None:
        raise OSError("backend crashed")

    lease.resource.reset = broken_reset
    lease.release()
    assert made[0].closed == 1
    assert pool.metrics()["replaced"] == 1
    assert pool.metrics()["created"] == 0
    with pool.acquire() as fresh:
        assert fresh.resource is made[1]
        assert len(made) == 2


def test_a_failed_reset_lets_a_waiter_make_a_new_resource():
    pool, made = make_pool(size=1)
    lease = pool.acquire()
    results: list = []
    thread = in_thread(pool, "waiter", results)
    assert wait_until(lambda: pool.metrics()["waiting"] == 1)
    lease.resource.reset = lambda: 1 / 0
    lease.release()
    thread.join(HANG_GUARD_S)
    assert results[0][1].resource is made[1]


def test_a_failing_factory_raises_and_frees_its_place():
    calls = []

    def factory() -> Backend:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("no backend")
        return Backend()

    pool = ResourcePool(factory, 1)
    with pytest.raises(ConnectionError):
        pool.acquire()
    with pool.acquire() as lease:
        assert isinstance(lease.resource, Backend)


def test_close_closes_everything_and_wakes_waiters():
    pool, made = make_pool(size=2)
    held = pool.acquire()
    pool.acquire().release()
    pool.acquire()  # both in use now
    results: list = []
    thread = in_thread(pool, "waiter", results)
    assert wait_until(lambda: pool.metrics()["waiting"] == 1)
    pool.close()
    thread.join(HANG_GUARD_S)
    assert isinstance(results[0][1], PoolClosedError)
    assert [backend.closed for backend in made] == [1, 1]
    with pytest.raises(PoolClosedError):
        _ = held.resource
    held.release()  # a closed lease: nothing happens
    with pytest.raises(PoolClosedError):
        pool.acquire()
    pool.close()
    assert pool.closed
    assert [backend.closed for backend in made] == [1, 1]


def test_a_released_lease_cannot_be_used_and_double_release_is_harmless():
    pool, _ = make_pool()
    lease = pool.acquire()
    lease.release()
    lease.release()
    with pytest.raises(RuntimeError, match="released"):
        _ = lease.resource
    assert pool.metrics()["idle"] == 1


def test_argument_and_ownership_errors():
    with pytest.raises(ValueError, match="size"):
        ResourcePool(Backend, 0)
    with pytest.raises(ValueError, match="lease_timeout_s"):
        ResourcePool(Backend, 1, lease_timeout_s=0)
    one, _ = make_pool()
    other, _ = make_pool()
    with pytest.raises(ValueError, match="does not belong"):
        other.release(one.acquire())


def test_concurrent_users_never_exceed_size():
    pool, made = make_pool(size=2)
    lock = threading.Lock()
    active = [0]
    peak = [0]
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(50):
                with pool.acquire() as lease:
                    with lock:
                        active[0] += 1
                        peak[0] = max(peak[0], active[0])
                    lease.resource.state.append("x")
                    assert lease.resource.state == ["x"]  # reset since the last user
                    with lock:
                        active[0] -= 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_GUARD_S)
    assert errors == []
    assert peak[0] <= 2
    assert len(made) <= 2
    assert pool.metrics()["acquired"] == 300


def test_aacquire_leases_without_blocking_the_loop():
    pool, made = make_pool(size=1)

    async def main() -> None:
        lease = await pool.aacquire("async")
        assert lease.resource is made[0]
        waiting = asyncio.ensure_future(pool.aacquire("second"))
        await asyncio.sleep(0)
        while pool.metrics()["waiting"] == 0:  # the loop runs while the waiter blocks
            await asyncio.sleep(0.01)
        lease.release()
        second = await asyncio.wait_for(waiting, HANG_GUARD_S)
        assert second.owner == "second"
        second.release()

    asyncio.run(main())


def test_a_cancelled_aacquire_releases_what_it_gets():
    pool, _ = make_pool(size=1)

    async def main() -> None:
        holder = pool.acquire()
        cancelled = asyncio.ensure_future(pool.aacquire("cancelled"))
        while pool.metrics()["waiting"] == 0:
            await asyncio.sleep(0.01)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        holder.release()  # goes to the cancelled waiter's thread, which gives it back
        lease = await asyncio.wait_for(pool.aacquire("next"), HANG_GUARD_S)
        assert lease.owner == "next"

    asyncio.run(main())


def test_a_waiting_acquire_reclaims_an_expired_lease_itself():
    pool, made = make_pool(size=1, lease_timeout_s=0.05)  # the real clock
    stale = pool.acquire("forgotten")
    lease = pool.acquire("waiter", timeout_s=HANG_GUARD_S)  # wakes at the expiry, reclaims
    assert lease.resource is made[0]
    assert pool.metrics()["reclaimed"] == 1
    with pytest.raises(LeaseExpiredError):
        _ = stale.resource
