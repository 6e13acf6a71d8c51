"""`EnvPool`: envs made on demand and reused, so a caller that plays one episode at a time
does not rebuild (and reload the data of) an env per episode.

An env is leased to one caller at a time (`EnvPool.lease`, an `EnvLease`) until the lease
ends; concurrent callers get different envs. Reuse never changes an episode as long as every
episode starts with ``reset(seed=...)``, which is the rule of every xpgym user of the pool.

How a lease ends decides what happens to its env:

* released (`EnvLease.release`, or the end of a ``with pool.lease(request) as env:`` block
  left normally): the env goes back to the pool for the next caller with the same key;
* discarded (`EnvLease.discard`, or a ``with`` block left by an exception, cancellation
  included): the env is closed and the pool forgets it. Its state is unknown: a step may
  still be running in a worker thread (``asyncio.to_thread`` goes on after the awaiting
  task is cancelled), or the env broke. The next caller gets a new env. An episode that
  *recorded* a failure (an env step that raised, caught by
  `xpgym.rollout.runner.isolated_step`) does not raise, so its env goes back: the next
  episode resets it, and a reset that raises discards it then.

`make_trainer_env` is how an env is built inside a trainer's workers: `xpgym.make` plus the
episode log when ``XPGYM_EPISODE_LOG`` asks for it (`xpgym.core.wrappers.episode_log`).
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Hashable
from types import TracebackType
from typing import Any, Generic, TypeVar

from xpgym.core.env import Env
from xpgym.core.registry import make
from xpgym.core.wrappers.episode_log import log_episodes_if_requested

__all__ = ["EnvLease", "EnvPool", "make_trainer_env"]

logger = logging.getLogger(__name__)

RequestT = TypeVar("RequestT")
EnvT = TypeVar("EnvT")


class EnvPool(Generic[RequestT, EnvT]):
    """Idle envs kept for reuse, grouped by key (thread-safe).

    Args:
        make_env: Builds a new env for a request (e.g. an env id, or an `EpisodeTask`).
        key: The request's reuse key: requests with equal keys share envs (default: the
            request itself, which must then be hashable).
    """

    def __init__(
        self,
        make_env: Callable[[RequestT], EnvT],
        *,
        key: Callable[[RequestT], Hashable] | None = None,
    ) -> None:
        self._make_env = make_env
        self._key: Callable[[RequestT], Hashable] = key or (lambda request: request)
        self._idle: dict[Hashable, list[EnvT]] = defaultdict(list)
        self._made: dict[int, EnvT] = {}  # id -> env, every env made and not discarded
        self._lock = threading.Lock()
        self._closed = False

    def lease(self, request: RequestT) -> EnvLease[RequestT, EnvT]:
        """Lease an env for `request` (`acquire`); ``with pool.lease(request) as env:``
        releases it at the end of the block, or discards it if the block raises (module
        docstring).

        Raises:
            RuntimeError: the pool is closed.
        """
        return EnvLease(self, request, self.acquire(request))

    def acquire(self, request: RequestT) -> EnvT:
        """An idle env of `request`'s key, or a new one from `make_env`; give it back with
        `release`. Prefer `lease`, which cannot forget to.

        Raises:
            RuntimeError: the pool is closed.
        """
        key = self._key(request)
        with self._lock:
            if self._closed:
                raise RuntimeError("EnvPool is closed")
            if self._idle[key]:
                return self._idle[key].pop()
        env = self._make_env(request)
        with self._lock:
            self._made[id(env)] = env
        return env

    def release(self, request: RequestT, env: EnvT) -> None:
        """Give back `env`, acquired for `request` (or a request with the same key)."""
        with self._lock:
            if not self._closed:
                self._idle[self._key(request)].append(env)

    def discard(self, env: EnvT) -> None:
        """Close `env`, acquired from this pool, and forget it: it is never handed out again.
        After `close` (which closed it already) this does nothing."""
        with self._lock:
            known = self._made.pop(id(env), None) is env
        if known:
            _close(env)

    @property
    def num_idle(self) -> int:
        """Envs waiting in the pool for a caller."""
        with self._lock:
            return sum(len(envs) for envs in self._idle.values())

    @property
    def num_leased(self) -> int:
        """Envs handed out and not given back (0 once the pool is closed)."""
        with self._lock:
            return len(self._made) - sum(len(envs) for envs in self._idle.values())

    def close(self) -> None:
        """Close every env the pool made, idle or not. Safe to call twice."""
        with self._lock:
            made, self._made, self._closed = list(self._made.values()), {}, True
            self._idle.clear()
        for env in made:
            _close(env)


class EnvLease(Generic[RequestT, EnvT]):
    """One caller's hold on one env of an `EnvPool` (from `EnvPool.lease`), until it ends.

    It ends once, by `release` (the env goes back to the pool) or `discard` (the env is
    closed and forgotten); later calls do nothing. As a context manager it hands out the
    env and ends at the end of the block: released when the block ends normally, discarded
    when it raises (any exception, `asyncio.CancelledError` and `KeyboardInterrupt`
    included), since the env's state is then unknown (module docstring).

    Attributes:
        env: The leased env.
        request: The request it was leased for.
    """

    def __init__(self, pool: EnvPool[RequestT, EnvT], request: RequestT, env: EnvT) -> None:
        self.pool = pool
        self.request = request
        self.env = env
        self._ended = False
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """`True` until the lease is released or discarded."""
        return not self._ended

    def release(self) -> None:
        """Give the env back to the pool for reuse (once; then nothing)."""
        if self._end():
            self.pool.release(self.request, self.env)

    def discard(self) -> None:
        """Close the env; the pool forgets it (once; then nothing)."""
        if self._end():
            self.pool.discard(self.env)

    def _end(self) -> bool:
        with self._lock:
            ended, self._ended = self._ended, True
        return not ended

    def __enter__(self) -> EnvT:
        return self.env

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.release()
            return
        logger.warning("closing a leased env whose user raised %r: %r", exc, self.env)
        self.discard()


def _close(env: Any) -> None:
    close: Any = getattr(env, "close", None)
    if close is not None:
        close()


def make_trainer_env(env_id: str, **kwargs: Any) -> Env:
    """``xpgym.make(env_id, **kwargs)`` for a trainer's worker: a single-agent `Env`, in
    `EpisodeLog` when ``XPGYM_EPISODE_LOG`` is set (`log_episodes_if_requested`).

    Raises:
        TypeError: `env_id` is a multi-agent env (the trainers' hooks play `Env` only).
    """
    env = make(env_id, **kwargs)
    if not isinstance(env, Env):
        raise TypeError(f"{env_id!r} is not a single-agent Env; adapters play Env only")
    return log_episodes_if_requested(env)
