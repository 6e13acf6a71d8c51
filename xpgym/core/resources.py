"""`ResourcePool`: expensive per-episode backends (a sandbox, a database, a browser) shared
by many episodes, AgentFly's resource manager in one class.

This module lives in `xpgym.core`, not in `xpgym.core.tools`: envs use pools for their own
backends (the retail customer-service env takes its database from one), tools use them
through ``@tool(resource=pool)``, and rewards that need a backend can too.

Semantics:

* **Lazy, bounded.** Resources are made by `factory()` when an `acquire` finds none idle,
  up to `size` of them.
* **Queued, first come first served.** When all `size` are leased, `acquire` blocks; a
  resource that comes back goes to the longest waiting caller (a hand-over: a caller that
  arrives later never overtakes one that waits).
* **Reset on release.** `release` (or leaving the lease's ``with`` block) resets the
  resource (`reset(resource)`, or ``resource.reset()`` when `reset` is `None`) and gives it
  to the next waiter or back to the idle set. A resource whose reset raises is closed and
  its place freed: the next `acquire` that needs one makes a new one (counted as
  ``"replaced"``).
* **Lease timeout.** A lease held longer than `lease_timeout_s` (on the pool's `clock`) is
  reclaimed: reset and returned to the pool, and the lease is stale: reading
  `Lease.resource` raises `LeaseExpiredError`. There is no reaper thread; expired leases are
  reclaimed when the pool looks: by a waiting `acquire` (it wakes at the earliest expiry),
  by `reclaim_expired()`, `metrics()`, or when the holder reads `Lease.resource`. Reclaiming
  does not interrupt a holder in the middle of using the resource (nothing can stop a
  thread); it only makes its next use fail.
* **Close.** `close()` closes every resource (`close(resource)`, or ``resource.close()`` if
  it has one), leased ones included, and wakes every waiter with `PoolClosedError`.

Releasing twice, or releasing a reclaimed lease, does nothing. Resets, closes and the
factory run outside the pool's lock, so a slow reset delays only the caller that
releases. Wait times (`Lease.wait_s`, `metrics()`) are measured on `clock` (default
`time.monotonic`; tests inject a fake one) from the call to `acquire` until a resource is
granted, before a new one is made.

Thread-safe (one `threading.Condition`). `aacquire` is `acquire` run in a worker thread, for
async code: the event loop is never blocked, and a cancelled `aacquire` releases the lease
it would have got.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar, cast

__all__ = [
    "AcquireTimeoutError",
    "Lease",
    "LeaseExpiredError",
    "PoolClosedError",
    "ResourcePool",
]

logger = logging.getLogger(__name__)

R = TypeVar("R")
_DEFAULT: Any = object()
_lease_ids = itertools.count(1)


class _Resettable(Protocol):
    """A resource with its own ``reset()`` (what a pool without ``reset=`` calls)."""

    def reset(self) -> object: ...


class PoolClosedError(RuntimeError):
    """The pool was closed: no more leases, and leases it had given are dead."""


class AcquireTimeoutError(TimeoutError):
    """`acquire` waited `acquire_timeout_s` without getting a resource."""


class LeaseExpiredError(RuntimeError):
    """The lease was held past `lease_timeout_s`; its resource went back to the pool."""


class Lease(Generic[R]):
    """One caller's hold on one resource of a `ResourcePool`; a context manager.

    ``with pool.acquire(owner="episode-3") as lease: use(lease.resource)`` releases it on
    exit.

    Attributes:
        pool: The pool. owner: What the caller passed to `acquire` (for logs and errors).
        id: Unique number of this lease. acquired_at: Pool clock when it was granted.
        wait_s: How long `acquire` waited for it (pool clock).
    """

    def __init__(
        self, pool: ResourcePool[R], resource: R, owner: Any, acquired_at: float, wait_s: float
    ) -> None:
        self.pool = pool
        self.owner = owner
        self.id = next(_lease_ids)
        self.acquired_at = acquired_at
        self.wait_s = wait_s
        self._resource = resource
        self._state = "active"  # -> "released" | "reclaimed" | "closed"

    @property
    def active(self) -> bool:
        """`True` until the lease is released, reclaimed or its pool closed."""
        return self._state == "active" and not self.pool._expired(self)

    @property
    def resource(self) -> R:
        """The leased resource.

        Raises:
            LeaseExpiredError: the lease outlived `lease_timeout_s` (it is reclaimed now if
                nobody did before).
            PoolClosedError: the pool was closed.
            RuntimeError: the lease was released.
        """
        if self._state == "active" and self.pool._expired(self):
            self.pool.reclaim_expired()
        if self._state == "reclaimed":
            raise LeaseExpiredError(
                f"lease {self.id} of {self.pool.name!r} (owner {self.owner!r}) was held longer "
                f"than lease_timeout_s={self.pool.lease_timeout_s} and was reclaimed"
            )
        if self._state == "closed":
            raise PoolClosedError(f"pool {self.pool.name!r} was closed")
        if self._state == "released":
            raise RuntimeError(f"lease {self.id} of {self.pool.name!r} was released")
        return self._resource

    def release(self) -> None:
        """Give the resource back (`ResourcePool.release`)."""
        self.pool.release(self)

    def __enter__(self) -> Lease[R]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"Lease(id={self.id}, pool={self.pool.name!r}, owner={self.owner!r}, {self._state})"


class _Ticket:
    """A waiting `acquire`: served with a resource, or with the right to make one."""

    __slots__ = ("create", "resource", "served")

    def __init__(self) -> None:
        self.served = False
        self.create = False
        self.resource: Any = None


class ResourcePool(Generic[R]):
    """A bounded, lazily filled pool of resources leased one caller at a time.

    Args:
        factory: Makes one resource (called with no argument, outside the lock).
        size: The most resources that exist at once (at least 1).
        reset: Called with a returned resource to make it fresh; `None` calls its
            ``reset()`` method (a resource without one is refused with `TypeError` when it
            is made).
        close: Called with each resource when it is discarded; `None` calls its
            ``close()`` method if it has one.
        lease_timeout_s: Longest a lease is held before it is reclaimed; `None` for no limit.
        acquire_timeout_s: Default limit of `acquire` (`AcquireTimeoutError`); `None` waits
            for as long as it takes.
        name: For logs, errors and `metrics`.
        clock: Seconds, monotonic; for wait times and lease ages.

    Raises:
        ValueError: `size` is below 1, or a timeout is not positive.
    """

    def __init__(
        self,
        factory: Callable[[], R],
        size: int,
        *,
        reset: Callable[[R], object] | None = None,
        close: Callable[[R], object] | None = None,
        lease_timeout_s: float | None = None,
        acquire_timeout_s: float | None = None,
        name: str = "pool",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"ResourcePool size must be an int >= 1, got {size!r}")
        for label, value in (
            ("lease_timeout_s", lease_timeout_s),
            ("acquire_timeout_s", acquire_timeout_s),
        ):
            if value is not None and not value > 0:
                raise ValueError(f"{label} must be > 0 or None, got {value!r}")
        self.factory = factory
        self.size = size
        self.reset_fn = reset
        self.close_fn = close
        self.lease_timeout_s = lease_timeout_s
        self.acquire_timeout_s = acquire_timeout_s
        self.name = name
        self._clock = clock
        self._cond = threading.Condition()
        self._idle: collections.deque[R] = collections.deque()
        self._waiters: collections.deque[_Ticket] = collections.deque()
        self._leases: dict[int, Lease[R]] = {}
        self._count = 0  # resources that exist or are being made
        self._closed = False
        self._acquired = 0
        self._reclaimed = 0
        self._replaced = 0
        self._wait_total = 0.0
        self._wait_max = 0.0

    # ------------------------------------------------------------------ acquire

    def acquire(self, owner: Any = None, *, timeout_s: float | None = _DEFAULT) -> Lease[R]:
        """Lease a resource, waiting in line when all `size` are in use.

        Args:
            owner: Recorded on the lease (e.g. an episode id).
            timeout_s: Longest wait; default: the pool's `acquire_timeout_s`.

        Raises:
            AcquireTimeoutError: no resource within `timeout_s`.
            PoolClosedError: the pool is closed, or closed while waiting.
            TypeError: `reset` is `None` and the new resource has no ``reset()``.
            Exception: what `factory` raised (the place it took is freed).
        """
        limit = self.acquire_timeout_s if timeout_s is _DEFAULT else timeout_s
        start = self._clock()
        deadline = None if limit is None else start + limit
        ticket = _Ticket()
        with self._cond:
            self._check_open()
            if self._idle:
                self._serve(ticket, self._idle.popleft())
            elif self._count < self.size:
                self._count += 1
                self._serve(ticket, None)
            else:
                self._waiters.append(ticket)
        while not self._wait_served(ticket, deadline, limit):
            self.reclaim_expired()
        waited = self._clock() - start
        resource = ticket.resource if not ticket.create else self._make()
        with self._cond:
            if self._closed:
                self._discard(resource)
                raise PoolClosedError(f"pool {self.name!r} was closed")
            lease = Lease(self, resource, owner, self._clock(), waited)
            self._leases[lease.id] = lease
            self._acquired += 1
            self._wait_total += waited
            self._wait_max = max(self._wait_max, waited)
        logger.debug("%s: lease %d to %r after %.3fs", self.name, lease.id, owner, waited)
        return lease

    async def aacquire(self, owner: Any = None, *, timeout_s: float | None = _DEFAULT) -> Lease[R]:
        """`acquire` for async code: waits in a worker thread; see the module docstring."""
        import asyncio  # here, not at module level: `import xpgym` stays cheap

        task = asyncio.ensure_future(asyncio.to_thread(self.acquire, owner, timeout_s=timeout_s))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(_release_when_granted)
            raise

    def _wait_served(self, ticket: _Ticket, deadline: float | None, limit: float | None) -> bool:
        """Wait until `ticket` is served (`True`) or a lease has expired (`False`)."""
        with self._cond:
            while not ticket.served:
                if self._closed:
                    self._waiters.remove(ticket)
                    raise PoolClosedError(f"pool {self.name!r} was closed while waiting")
                now = self._clock()
                if deadline is not None and now >= deadline:
                    self._waiters.remove(ticket)
                    raise AcquireTimeoutError(
                        f"no resource of {self.name!r} free within {limit}s "
                        f"(size {self.size}, all leased)"
                    )
                expiry = self._next_expiry()
                if expiry is not None and expiry <= now:
                    return False
                ends = [t - now for t in (deadline, expiry) if t is not None]
                self._cond.wait(min(ends) if ends else None)
            return True

    def _make(self) -> R:
        """Call `factory` for a served ticket's free place (outside the lock)."""
        try:
            resource = self.factory()
            if self.reset_fn is None and not callable(getattr(resource, "reset", None)):
                self._close_quietly(resource)
                raise TypeError(
                    f"pool {self.name!r}: {type(resource).__name__} has no reset() method; "
                    "pass reset=... to ResourcePool"
                )
        except BaseException:
            with self._cond:
                self._count -= 1
                self._free_place()
            raise
        return resource

    # ------------------------------------------------------------------ release

    def release(self, lease: Lease[R]) -> None:
        """Reset the lease's resource and give it to the next waiter, or back to idle.

        A lease already released, reclaimed or closed is left alone.

        Raises:
            ValueError: `lease` belongs to another pool.
        """
        if lease.pool is not self:
            raise ValueError(f"{lease!r} does not belong to pool {self.name!r}")
        with self._cond:
            if self._leases.pop(lease.id, None) is None:
                return
            lease._state = "released"
        logger.debug("%s: lease %d released", self.name, lease.id)
        self._recycle(lease._resource)

    def reclaim_expired(self) -> int:
        """Reclaim every lease held past `lease_timeout_s`; returns how many."""
        with self._cond:
            stale = [lease for lease in self._leases.values() if self._expired(lease)]
            for lease in stale:
                del self._leases[lease.id]
                lease._state = "reclaimed"
                self._reclaimed += 1
        for lease in stale:
            logger.warning(
                "%s: lease %d of %r held past %ss; reclaimed",
                self.name,
                lease.id,
                lease.owner,
                self.lease_timeout_s,
            )
            self._recycle(lease._resource)
        return len(stale)

    def _recycle(self, resource: R) -> None:
        """Reset `resource` (outside the lock) and hand it on; close it if the reset fails."""
        try:
            if self.reset_fn is not None:
                self.reset_fn(resource)
            else:
                cast(_Resettable, resource).reset()  # _make refuses one without reset()
        except Exception:
            logger.warning("%s: reset failed; closing the resource", self.name, exc_info=True)
            self._close_quietly(resource)
            with self._cond:
                self._count -= 1
                self._replaced += 1
                self._free_place()
            return
        with self._cond:
            if self._closed:
                self._discard(resource)
            elif self._waiters:
                self._serve(self._waiters.popleft(), resource)
            else:
                self._idle.append(resource)

    # ------------------------------------------------------------ under the lock

    def _serve(self, ticket: _Ticket, resource: R | None) -> None:
        """Give `ticket` a resource, or (`None`) the right to make one; wake the waiters."""
        ticket.served, ticket.create, ticket.resource = True, resource is None, resource
        self._cond.notify_all()

    def _free_place(self) -> None:
        """A place was freed (a failed reset or factory): the first waiter makes one."""
        if self._waiters and not self._closed:
            self._count += 1
            self._serve(self._waiters.popleft(), None)

    def _check_open(self) -> None:
        if self._closed:
            raise PoolClosedError(f"pool {self.name!r} is closed")

    def _expired(self, lease: Lease[R]) -> bool:
        if self.lease_timeout_s is None or lease._state != "active":
            return False
        return self._clock() - lease.acquired_at >= self.lease_timeout_s

    def _next_expiry(self) -> float | None:
        if self.lease_timeout_s is None or not self._leases:
            return None
        return min(lease.acquired_at for lease in self._leases.values()) + self.lease_timeout_s

    def _discard(self, resource: R) -> None:
        self._count -= 1
        self._close_quietly(resource)

    def _close_quietly(self, resource: R) -> None:
        try:
            if self.close_fn is not None:
                self.close_fn(resource)
            elif callable(close := getattr(resource, "close", None)):
                close()
        except Exception:
            logger.warning("%s: closing a resource failed", self.name, exc_info=True)

    # ------------------------------------------------------------------ reading

    def metrics(self) -> dict[str, Any]:
        """Counters, after reclaiming expired leases.

        Returns:
            ``{"name", "size", "created", "in_use", "idle", "waiting", "acquired",
            "reclaimed", "replaced", "wait_s_mean", "wait_s_max"}``: `created` resources
            exist or are being made; `acquired`, `reclaimed` (expired leases) and
            `replaced` (failed resets) count since the pool was made; wait times are over
            every granted lease (``0.0`` before the first).
        """
        self.reclaim_expired()
        with self._cond:
            return {
                "name": self.name,
                "size": self.size,
                "created": self._count,
                "in_use": len(self._leases),
                "idle": len(self._idle),
                "waiting": len(self._waiters),
                "acquired": self._acquired,
                "reclaimed": self._reclaimed,
                "replaced": self._replaced,
                "wait_s_mean": self._wait_total / self._acquired if self._acquired else 0.0,
                "wait_s_max": self._wait_max,
            }

    @property
    def closed(self) -> bool:
        """`True` once `close` was called."""
        return self._closed

    # ------------------------------------------------------------------ close

    def close(self) -> None:
        """Close every resource, leased ones too, and wake waiters with `PoolClosedError`.

        Safe to call more than once. Leases given before become dead (`PoolClosedError`).
        """
        with self._cond:
            if self._closed:
                return
            self._closed = True
            doomed = list(self._idle)
            self._idle.clear()
            for lease in self._leases.values():
                lease._state = "closed"
                doomed.append(lease._resource)
            self._leases.clear()
            self._count -= len(doomed)
            self._cond.notify_all()
        for resource in doomed:
            self._close_quietly(resource)
        logger.debug("%s: closed (%d resources)", self.name, len(doomed))

    def __enter__(self) -> ResourcePool[R]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResourcePool(name={self.name!r}, size={self.size})"


def _release_when_granted(task: Any) -> None:
    """Done-callback of a cancelled `aacquire`: release the lease nobody will use."""
    if not task.cancelled() and task.exception() is None:
        task.result().release()
