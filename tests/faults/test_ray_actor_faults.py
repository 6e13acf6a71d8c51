"""`RayVectorEnv`: an actor killed (SIGKILL) at each moment of its life
(`xpgym.core.vector.ray_backend`, `xpgym.core.vector.hosted`).

Four sub-envs on two actors: actor 0 hosts sub-envs 0 and 1 (hit), actor 1 hosts 2 and 3
(spared). The cases and their documented outcomes are `vector_fault_cases`, the same as for
`ProcessVectorEnv`'s worker processes: construction, reset, step, between two steps, `call`,
`get_attr` and close. A hung actor (one that misses its deadline) is covered by
`tests/core/test_ray_vector.py`.

Ray is started once for the module (``num_cpus=2``, no dashboard); each case checks that the
killed actor's process is gone (reaped by Ray), and the module's teardown that after
``ray.shutdown`` no process Ray started is left (the process tree counted before
``ray.init`` and after the shutdown). Ray keeps idle worker processes between cases, so the
per-case `no_orphans` count of the other files does not apply here.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from hang_guard import wait_until
from vector_fault_cases import MOMENTS, VectorFaultSetup, fault_env_fns, run_case

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


def make_vec(marker_dir: Path, at: str, sig: int) -> RayVectorEnv:
    vec = RayVectorEnv(fault_env_fns(marker_dir, at), num_actors=2)
    assert vec.actor_indices == [list(HIT), list(SPARED)]
    return vec


SETUP = VectorFaultSetup(make_vec, hit=HIT, spared=SPARED)


@pytest.mark.parametrize("moment", MOMENTS)
def test_an_actor_killed_ends_in_the_documented_outcome(marker_dir: Path, moment: str) -> None:
    pid = run_case(SETUP, moment, marker_dir, signal.SIGKILL)
    # The killed actor's process is reaped by Ray: not alive, not a zombie.
    assert wait_until(lambda: pid not in descendants()), pid
