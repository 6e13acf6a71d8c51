"""A toy env that tells a test where it is, for the fault-injection suite (tests/faults/).

`FaultEnv` is a `ToyEnv` (importable as `fault_envs`, picklable through
``functools.partial``) that, built with ``at=<moment>``, injects one fault the first time it
reaches that moment: ``"construction"``, ``"reset"``, ``"step"``, ``"call"`` (its
`get_state`), ``"get_attr"`` (its property `faulty_attr`) or ``"close"``. ``how="stall"``
announces the moment and then waits; ``how="raise"`` raises `InjectedFaultError`.

The announcement is a file in `marker_dir`: ``stall-<moment>``, holding the pid of the
process the env runs in, created atomically (complete when it appears) and only once per
`marker_dir`: the env a vector env rebuilds after the fault finds the file and goes on
normally, so the suite can check that the next steps work. A test waits for the file
(`announced`), then kills or stops that pid: the kill point is the env's own code, never a
guess about timing. A stall ends when ``release`` appears in `marker_dir` (`release`: what a
test does for a stuck thread, which cannot be killed) or after `HANG_GUARD_S`, raising: a
test that forgot to end it fails instead of hanging. While it stalls, SIGALRM is blocked in
its thread, so a worker process's own step timer cannot end it: only the test's signal or the
parent's deadline can.

Every `FaultEnv` also writes ``pid-<name>`` (its process's pid) when it is built, so a test
can kill the process between two steps, and ``closed-<name>`` once it is closed.
`register_fault_env` registers it as ``faults:Fault-v0`` for an env server.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from hang_guard import HANG_GUARD_S, wait_until
from toy_envs import ToyEnv

from xpgym.core import registry
from xpgym.core.errors import find_infra_cause

FAULT_ENV_ID = "faults:Fault-v0"
"""The id `register_fault_env` registers."""

MOMENTS = ("construction", "reset", "step", "call", "get_attr", "close")
"""Where a `FaultEnv` can inject its fault."""


class InjectedFaultError(RuntimeError):
    """What a `FaultEnv` built with ``how="raise"`` raises."""


def _write_once(path: Path, text: str) -> bool:
    """Create `path` holding `text`, atomically; `False` if it already exists."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
    return True


def announced(marker_dir: Path, moment: str) -> int:
    """The pid a `FaultEnv` stalled at `moment` runs in, once it has announced it (waits up
    to `HANG_GUARD_S`; raises `AssertionError` if it never does)."""
    path = Path(marker_dir) / f"stall-{moment}"
    assert wait_until(path.exists), f"no sub-env reached {moment!r}"
    return int(path.read_text())


def built_pid(marker_dir: Path, name: str) -> int:
    """The pid of the process that built the `FaultEnv` named `name`."""
    return int((Path(marker_dir) / f"pid-{name}").read_text())


def signal_when(marker_dir: Path, moment: str, sig: int) -> Future[int]:
    """Send `sig`, from a thread, to the process of the env stalled at `moment` as soon as it
    announces itself. The future's result is that pid once the signal is sent; it raises
    what went wrong (the env never got there)."""
    sent: Future[int] = Future()

    def send() -> None:
        try:
            pid = announced(marker_dir, moment)
            os.kill(pid, sig)
            sent.set_result(pid)
        except BaseException as exc:  # handed to the test through the future
            sent.set_exception(exc)

    threading.Thread(target=send, name=f"signal-at-{moment}", daemon=True).start()
    return sent


def release(marker_dir: Path) -> None:
    """End every stall in `marker_dir` (the envs stuck in a thread go on)."""
    (Path(marker_dir) / "release").touch()


class FaultEnv(ToyEnv):
    """`ToyEnv` that injects one fault at `at` (see the module docstring).

    Args:
        marker_dir: Where the env announces itself (a directory the test made).
        name: Its name in ``pid-<name>``.
        at: One of `MOMENTS`, or ``""`` for an env that never faults.
        how: ``"stall"`` or ``"raise"``.
        episode_length: As for `ToyEnv`.
    """

    def __init__(
        self, marker_dir: str, name: str, at: str = "", how: str = "stall", episode_length: int = 3
    ) -> None:
        if at and at not in MOMENTS:
            raise ValueError(f"at must be one of {MOMENTS} or '', got {at!r}")
        if how not in ("stall", "raise"):
            raise ValueError(f"how must be 'stall' or 'raise', got {how!r}")
        super().__init__(episode_length)
        self.marker_dir = Path(marker_dir)
        self.name = name
        self.at = at
        self.how = how
        pid_file = self.marker_dir / f"pid-{name}"
        pid_file.unlink(missing_ok=True)  # a rebuilt env's process may be a new one
        _write_once(pid_file, str(os.getpid()))
        self._fault("construction")

    def _fault(self, moment: str) -> None:
        if moment != self.at or not _write_once(
            self.marker_dir / f"stall-{moment}", str(os.getpid())
        ):
            return
        if self.how == "raise":
            raise InjectedFaultError(f"injected fault in {moment}")
        released = self.marker_dir / "release"
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        try:
            deadline = time.monotonic() + HANG_GUARD_S
            while not released.exists():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the test never ended the stall in {moment}")
                time.sleep(0.02)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._fault("reset")
        return super().reset(seed=seed, options=options)

    def step(self, action: str):
        self._fault("step")
        return super().step(action)

    def get_state(self) -> dict[str, Any]:
        """`ToyEnv.get_state` (after the fault, if ``at="call"``): what ``vec.call`` and a
        remote client's `get_state` reach."""
        self._fault("call")
        return super().get_state()

    @property
    def faulty_attr(self) -> str:
        """Its name (after the fault, if ``at="get_attr"``)."""
        self._fault("get_attr")
        return self.name

    def close(self) -> None:
        self._fault("close")
        super().close()
        (self.marker_dir / f"closed-{self.name}").touch()


def infra_kind(info: Mapping[str, Any]) -> str | None:
    """The infra-error kind a step's `info` reports (`find_infra_cause`), or `None`."""
    cause = find_infra_cause(info)
    return None if cause is None else cause.kind


def assert_hit_and_spared(
    batch: tuple, hit: Sequence[int], spared: Sequence[int], *, turn: int, kind: str
) -> None:
    """A vector env's step `batch`: the `hit` sub-envs truncated with the infra marker
    `kind`, the `spared` ones stepped normally to `turn`."""
    _, _, terminated, truncated, infos = batch
    for i in hit:
        assert truncated[i], infos[i]
        assert not terminated[i]
        assert infra_kind(infos[i]) == kind, infos[i]
    for i in spared:
        assert not truncated[i], infos[i]
        assert infra_kind(infos[i]) is None
        assert infos[i]["turn"] == turn


def assert_recovers(
    vec: Any, hit: Sequence[int], spared: Sequence[int], *, spared_turn: int
) -> None:
    """The step after a fault resets the `hit` sub-envs (autoreset) and steps the `spared`
    ones on to `spared_turn`; the one after that steps everyone normally."""
    n = len(hit) + len(spared)
    observations, rewards, _, truncated, infos = vec.step(["x"] * n)
    for i in hit:
        assert observations[i].startswith("start")
        assert rewards[i] == 0.0
        assert not truncated[i]
    for i in spared:
        assert infos[i]["turn"] == spared_turn
    _, _, _, truncated, infos = vec.step(["x"] * n)
    assert not truncated.any()
    assert all(infra_kind(info) is None for info in infos)
    assert [infos[i]["turn"] for i in hit] == [1] * len(hit)
    assert [infos[i]["turn"] for i in spared] == [spared_turn + 1] * len(spared)


def register_fault_env() -> None:
    """Register `FaultEnv` as `FAULT_ENV_ID` (kwargs: those of `FaultEnv`)."""
    registry.register(FAULT_ENV_ID, FaultEnv, override=True)
