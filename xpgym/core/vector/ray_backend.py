"""`RayVectorEnv`: sub-envs live in Ray actors, for envs spread over a Ray cluster.

The Ray counterpart of `ProcessVectorEnv`, with the same API and semantics (autoreset modes,
partial stepping, failure isolation, seeds; see `xpgym.core.vector.base`). Each actor hosts
several sub-envs (by default the sub-envs are split evenly over one actor per CPU of the
cluster), so a batch costs one actor call per actor, not per sub-env; actors step their
sub-envs in parallel with each other, and each actor steps its own sub-envs concurrently
on ``threads_per_actor`` threads: cheap steps run one after another in the actor's main
thread, steps that block (I/O, a sandbox, a sleep) wait all at once (see
`xpgym.core.vector.hosted`). Every sub-env runs in a `SubEnv`, exactly as in the other
backends.

Timeouts (``step_timeout``), as in `ProcessVectorEnv`: inside the actor, a step or reset
that overruns is reported as truncated with ``info["error"]``, and only that sub-env is
rebuilt; with one thread per actor (the default with a timeout) the step is interrupted by
a ``SIGALRM`` timer, with several it is left to a thread the actor abandons. If an actor
does not answer within ``step_timeout * <its tasks> + kill_grace`` seconds (a hang in C
code, a blocked signal) or dies, the parent kills it with ``ray.kill``, starts a fresh
actor for its sub-envs (built but not reset), and reports every sub-env it hosted and had
not finished as truncated with ``info["error"]``. Its sub-envs that were not in that batch
report the same truncation at their next step (their episodes were lost with the actor);
the step after that resets them.

Ray: ``ray`` is an extra (``pip install "xpgym[ray]"``) and is imported only when a
`RayVectorEnv` is built. If Ray is already initialized, its instance is used and left
running. If not, ``ray.init()`` starts a local instance, which is shut down when the last
`RayVectorEnv` using it closes; call ``ray.init(...)`` yourself first to choose its options
or to keep it running. Env factories travel to the actors with cloudpickle (lambdas work),
but the modules they refer to must be importable in the actors (installed, or on
``PYTHONPATH`` via ``runtime_env={"env_vars": ...}``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from xpgym.core.env import Env
from xpgym.core.optional import import_optional
from xpgym.core.vector.base import AutoresetMode, SubEnvError
from xpgym.core.vector.hosted import HostedVectorEnv, SubEnvHost

__all__ = ["RayVectorEnv"]

logger = logging.getLogger(__name__)

_CLOSE_TIMEOUT = 10.0  # seconds actors get to close their sub-envs before they are killed

# Ray instance started by this module (not by the user): shut down with its last user.
_owned_ray_users = 0
_owns_ray = False


class _ActorHost(SubEnvHost):
    """Body of one Ray actor: a `SubEnvHost` whose construction errors come back as data
    (`ready`), never as Ray errors. Ray runs a plain actor's calls on its main thread, so
    the host's SIGALRM timeouts work there."""

    def __init__(
        self,
        env_fns: dict[int, Callable[[], Env]],
        step_timeout: float | None,
        build: bool,
        threads: int,
    ) -> None:
        self.construction_error: str | None = None
        try:
            super().__init__(env_fns, step_timeout, build, threads)
        except Exception as exc:
            self.construction_error = f"construction: {exc!r}"

    def ready(self) -> str | None:
        """`None` once every sub-env is built, else why construction failed."""
        return self.construction_error


class RayVectorEnv(HostedVectorEnv):
    """Runs sub-envs in Ray actors, several per actor: same semantics as the other backends.

    Args:
        env_fns: One factory per sub-env (sent to the actors with cloudpickle).
        autoreset_mode: See `xpgym.core.vector.base`.
        step_timeout: Seconds a step or reset may take (see module docstring).
        num_actors: Actors to start (default: `min(num_envs, CPUs in the Ray cluster)`).
            Sub-envs are split over them in contiguous, near-equal groups.
        envs_per_actor: Alternatively, sub-envs per actor (the last actor may get fewer);
            ``num_actors = ceil(num_envs / envs_per_actor)``. Give at most one of the two.
        threads_per_actor: Sub-envs an actor may step at once (see the module docstring).
            Default: all the sub-envs it hosts, or 1 with a `step_timeout` (so that an
            overrunning step is interrupted, not abandoned to its thread).
        actor_options: Passed to ``.options(...)`` of every actor (``num_cpus``,
            ``resources``, ``runtime_env``, ``scheduling_strategy``...). Default: Ray's
            actor defaults.
        kill_grace: Seconds beyond ``step_timeout * <its tasks>`` an actor gets to answer
            before it is killed and replaced (only with ``step_timeout``).
        start_timeout: Seconds an actor may take to be scheduled, start and build its
            sub-envs, at construction and when it replaces a dead one; past it the actor is
            killed and `SubEnvError(index, "construction")` raised. `None` waits (an actor
            asking for resources the cluster never has then waits forever).

    Attributes:
        actor_indices: The sub-env indices each actor hosts (one list per actor).

    Raises:
        ImportError: Ray is not installed.
        SubEnvError: A sub-env factory raised while an actor built it.
    """

    host_kind = "Ray actor"

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        step_timeout: float | None = None,
        num_actors: int | None = None,
        envs_per_actor: int | None = None,
        threads_per_actor: int | None = None,
        actor_options: Mapping[str, Any] | None = None,
        kill_grace: float = 5.0,
        start_timeout: float | None = 300.0,
    ) -> None:
        super().__init__(
            env_fns,
            autoreset_mode=autoreset_mode,
            step_timeout=step_timeout,
            start_timeout=start_timeout,
        )
        self.closed = True  # until the actors exist: nothing for close() to do
        if num_actors is not None and envs_per_actor is not None:
            raise ValueError(
                f"give num_actors ({num_actors}) or envs_per_actor ({envs_per_actor}), not both"
            )
        for name, value in (("num_actors", num_actors), ("envs_per_actor", envs_per_actor)):
            if value is not None and (isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if kill_grace < 0:
            raise ValueError(f"kill_grace must be >= 0 seconds, got {kill_grace!r}")
        # Checked before Ray starts; the default needs the actor groups (below).
        self._host_threads("threads_per_actor", threads_per_actor, 1)
        ray = import_optional("ray", needed_by="RayVectorEnv", install='pip install "xpgym[ray]"')
        self._ray = ray
        self._uses_owned_ray = _acquire_ray(ray)
        if envs_per_actor is not None:
            num_actors = math.ceil(self.num_envs / envs_per_actor)
        elif num_actors is None:
            num_actors = max(1, int(ray.cluster_resources().get("CPU", 1)))
        num_actors = min(self.num_envs, num_actors)
        size, extra = divmod(self.num_envs, num_actors)
        if envs_per_actor is not None:
            size, extra = envs_per_actor, 0
        self.actor_indices: list[list[int]] = []
        start = 0
        for a in range(num_actors):
            stop = min(self.num_envs, start + size + (1 if a < extra else 0))
            self.actor_indices.append(list(range(start, stop)))
            start = stop
        self.kill_grace = kill_grace
        self.threads_per_actor = self._host_threads(
            "threads_per_actor", threads_per_actor, max(map(len, self.actor_indices))
        )
        self._actor_cls = _actor_class(ray)
        if actor_options:
            self._actor_cls = self._actor_cls.options(**dict(actor_options))
        self._actor_of = [a for a, group in enumerate(self.actor_indices) for _ in group]
        self._actors: list[Any] = []
        try:
            self._actors = [self._start_actor(group) for group in self.actor_indices]
            for a in range(num_actors):
                self._await_ready(a)
        except BaseException:
            for actor in self._actors:
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)
            _release_ray(ray, self._uses_owned_ray)
            raise
        self.closed = False

    @property
    def num_actors(self) -> int:
        return len(self.actor_indices)

    def _start_actor(self, indices: list[int], *, build: bool = True) -> Any:
        fns = {i: self.env_fns[i] for i in indices}
        threads = min(self.threads_per_actor, len(indices))
        return self._actor_cls.remote(fns, self.step_timeout, build, threads)

    def _await_ready(self, a: int) -> None:
        """Wait (up to `start_timeout`) until actor `a` has built its sub-envs; unless it
        has, kill it and raise `SubEnvError`."""
        ray, indices = self._ray, self.actor_indices[a]
        try:
            detail = ray.get(self._actors[a].ready.remote(), timeout=self.start_timeout)
        except ray.exceptions.GetTimeoutError:
            detail = (
                f"actor {a} was not started and built within {self.start_timeout}s; does the "
                f"cluster have the resources actor_options asks for? "
                f"({ray.available_resources()})"
            )
        except ray.exceptions.RayError as exc:
            detail = f"actor {a} failed to start: {exc}"
        if detail is not None:
            with contextlib.suppress(Exception):
                ray.kill(self._actors[a], no_restart=True)
            raise SubEnvError(indices[0], "construction", detail)

    def _dispatch(self, command: str, tasks: list[tuple]) -> list[tuple[str, Any] | None]:
        """Send each task (whose first item is a sub-env index) to its actor; gather replies
        in task order. `None` marks a task whose actor died, `overdue` one whose actor
        overran its deadline; that actor is replaced by a fresh one (sub-envs built, not
        reset)."""
        ray = self._ray
        by_actor: dict[int, list[int]] = {}
        for position, task in enumerate(tasks):
            by_actor.setdefault(self._actor_of[task[0]], []).append(position)
        pending: dict[Any, int] = {}
        deadlines: dict[int, float] = {}
        budgets: dict[int, float] = {}  # seconds each actor gets for its tasks
        now = time.monotonic()
        for a, positions in by_actor.items():
            payload = [self._host_payload(command, tasks[p]) for p in positions]
            pending[self._actors[a].run.remote(command, payload)] = a
            if self.step_timeout is not None:
                budgets[a] = self.step_timeout * len(positions) + self.kill_grace
                deadlines[a] = now + budgets[a]
        replies: list[tuple[str, Any] | None] = [None] * len(tasks)
        while pending:
            timeout = None
            if deadlines:
                timeout = max(min(deadlines[a] for a in pending.values()) - time.monotonic(), 0)
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=timeout)
            for ref in ready:
                a = pending.pop(ref)
                try:
                    reply = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    logger.warning(
                        "actor %d (sub-envs %s) failed: %s", a, self.actor_indices[a], exc
                    )
                    self._replace_actor(a)
                    continue
                for p, item in zip(by_actor[a], reply, strict=True):
                    replies[p] = item
            now = time.monotonic()
            for ref, a in list(pending.items()):
                if a in deadlines and now >= deadlines[a]:
                    del pending[ref]
                    logger.warning(
                        "actor %d (sub-envs %s) missed its deadline (step_timeout=%ss x %d "
                        "tasks + kill_grace=%ss)",
                        a,
                        self.actor_indices[a],
                        self.step_timeout,
                        len(by_actor[a]),
                        self.kill_grace,
                    )
                    self._replace_actor(a)
                    for p in by_actor[a]:
                        replies[p] = self._overdue(budgets[a])
        return replies

    def _replace_actor(self, a: int) -> None:
        indices = self.actor_indices[a]
        logger.warning("killing actor %d (sub-envs %s) and starting a fresh one", a, indices)
        with contextlib.suppress(Exception):
            self._ray.kill(self._actors[a], no_restart=True)
        # Its sub-envs lost their episodes: each one's next step reports that (_run_steps).
        self._lost.update(indices)
        self._actors[a] = self._start_actor(indices, build=False)
        self._await_ready(a)

    def _close_backend(self) -> None:
        ray = self._ray
        try:
            if ray.is_initialized():
                refs = []
                for actor in self._actors:
                    with contextlib.suppress(Exception):
                        refs.append(actor.close.remote())
                if refs:
                    with contextlib.suppress(Exception):
                        ray.wait(refs, num_returns=len(refs), timeout=_CLOSE_TIMEOUT)
                for actor in self._actors:
                    with contextlib.suppress(Exception):
                        ray.kill(actor, no_restart=True)
        finally:
            self._actors = []
            _release_ray(ray, self._uses_owned_ray)


@functools.cache
def _actor_class(ray: Any) -> Any:
    """``ray.remote(_ActorHost)``, made once: each `ray.remote` call is a new actor class
    that the driver registers and keeps (about 14 KB per vector env in the soak run)."""
    return ray.remote(_ActorHost)


def _acquire_ray(ray: Any) -> bool:
    """Make sure Ray is initialized; `True` if the instance is one this module started."""
    global _owned_ray_users, _owns_ray
    if not ray.is_initialized():
        logger.info("Ray is not initialized; starting a local instance for RayVectorEnv")
        ray.init()
        _owns_ray, _owned_ray_users = True, 0
    if not _owns_ray:
        return False
    _owned_ray_users += 1
    return True


def _release_ray(ray: Any, owned: bool) -> None:
    """Shut down the Ray instance this module started once its last user is gone."""
    global _owned_ray_users, _owns_ray
    if not owned or not _owns_ray:
        return
    _owned_ray_users -= 1
    if _owned_ray_users <= 0:
        _owns_ray = False
        if ray.is_initialized():
            logger.info("shutting down the local Ray instance RayVectorEnv started")
            ray.shutdown()
