"""`RayVectorEnv`: an actor killed (SIGKILL) during a step and between two steps
(`xpgym.core.vector.ray_backend`, `xpgym.core.vector.hosted`).

Four sub-envs on two actors: actor 0 hosts sub-envs 0 and 1 (`HIT`), actor 1 hosts 2 and 3
(`SPARED`). Sub-env 0 is a `FaultEnv`; the test kills its actor's process as soon as it
announces itself stalled in a step, or between two steps. The documented outcome:

==============  ==========================================================================
moment          outcome
==============  ==========================================================================
step            `HIT` truncated with the ``sub_env_crash`` infra marker, `SPARED` step on;
                the actor is replaced, and the next step resets `HIT`
between steps   as ``step``, at the next step
==============  ==========================================================================

Ray is started once for the module (``num_cpus=2``, no dashboard); each case checks that the
killed actor's process is gone (reaped by Ray), and the module's teardown that after
``ray.shutdown`` no process Ray started is left (the process tree counted before
``ray.init`` and after the shutdown). Ray keeps idle worker processes between cases, so the
per-case `no_orphans` count of the other files does not apply here.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_envs import FaultEnv, assert_hit_and_spared, assert_recovers, built_pid, signal_when
from hang_guard import wait_until

ray = pytest.importorskip("ray", reason='Ray is an extra: pip install "xpgym[ray]"')
psutil = pytest.importorskip("psutil", reason="counting the process tree needs psutil")

from xpgym.core.vector.ray_backend import RayVectorEnv  # noqa: E402  (after the skip)

HIT = (0, 1)
SPARED = (2, 3)
TESTS_DIR = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def descendants() -> set[int]:
    """Pids of this process's descendants that exist (zombies included)."""
    return {child.pid for child in psutil.Process().children(recursive=True)}


@pytest.fixture(scope="module", autouse=True)
def ray_cluster() -> Iterator[None]:
    """A local Ray instance whose actors can import `fault_envs`; after its shutdown, no
    process it started may be left."""
    if ray.is_initialized():  # another module's instance: we cannot set PYTHONPATH on it
        pytest.skip("Ray is already initialized by another test module")
    before = descendants()
    paths = (str(TESTS_DIR), os.environ.get("PYTHONPATH"))
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}},
    )
    yield
    ray.shutdown()
    wait_until(lambda: not descendants() - before)
    left = descendants() - before
    for pid in left:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()
    assert not left, f"processes left behind after ray.shutdown: {sorted(left)}"


def make_vec(marker_dir: Path, at: str) -> RayVectorEnv:
    fns = [
        functools.partial(
            FaultEnv, str(marker_dir), str(i), at if i == 0 else "", episode_length=10
        )
        for i in range(4)
    ]
    vec = RayVectorEnv(fns, num_actors=2)
    assert vec.actor_indices == [list(HIT), list(SPARED)]
    return vec


def assert_gone(pid: int) -> None:
    """The killed actor's process is reaped: not alive, not a zombie."""
    assert wait_until(lambda: pid not in descendants()), pid


def test_an_actor_killed_during_a_step_truncates_only_its_sub_envs(marker_dir: Path) -> None:
    with make_vec(marker_dir, "step") as vec:
        vec.reset(seed=0)
        killer = signal_when(marker_dir, "step", signal.SIGKILL)
        batch = vec.step(["x"] * 4)
        assert_hit_and_spared(batch, HIT, SPARED, turn=1, kind="sub_env_crash")
        assert_gone(killer.result())
        assert_recovers(vec, HIT, SPARED, spared_turn=2)


def test_an_actor_killed_between_steps_truncates_only_its_sub_envs(marker_dir: Path) -> None:
    with make_vec(marker_dir, "") as vec:
        vec.reset(seed=0)
        vec.step(["x"] * 4)
        pid = built_pid(marker_dir, "0")
        os.kill(pid, signal.SIGKILL)
        assert_gone(pid)
        batch = vec.step(["x"] * 4)
        assert_hit_and_spared(batch, HIT, SPARED, turn=2, kind="sub_env_crash")
        assert_recovers(vec, HIT, SPARED, spared_turn=3)
