"""`EnvPool`: envs made on demand and reused, so a caller that plays one episode at a time
does not rebuild (and reload the data of) an env per episode.

An env is handed to one caller at a time (`acquire`) until it is given back (`release`);
concurrent callers get different envs. Reuse never changes an episode as long as every
episode starts with ``reset(seed=...)``, which is the rule of every xpgym user of the pool.

`make_trainer_env` is how an env is built inside a trainer's workers: `xpgym.make` plus the
episode log when ``XPGYM_EPISODE_LOG`` asks for it (`xpgym.core.wrappers.episode_log`).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from xpgym.core.env import Env
from xpgym.core.registry import make
from xpgym.core.wrappers.episode_log import log_episodes_if_requested

__all__ = ["EnvPool", "make_trainer_env"]

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
        self._made: list[EnvT] = []
        self._lock = threading.Lock()
        self._closed = False

    def acquire(self, request: RequestT) -> EnvT:
        """An idle env of `request`'s key, or a new one from `make_env`.

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
            self._made.append(env)
        return env

    def release(self, request: RequestT, env: EnvT) -> None:
        """Give back `env`, acquired for `request` (or a request with the same key)."""
        with self._lock:
            if not self._closed:
                self._idle[self._key(request)].append(env)

    def close(self) -> None:
        """Close every env the pool made, idle or not. Safe to call twice."""
        with self._lock:
            made, self._made, self._closed = self._made, [], True
            self._idle.clear()
        for env in made:
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
