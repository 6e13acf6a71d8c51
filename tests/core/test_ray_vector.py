"""`RayVectorEnv` passes the backend tests of `test_vector`, on a local Ray instance.

The behaviour tests are `test_vector`'s own functions, called with the Ray backend (the
module's specification is not copied here); the tests written out below are Ray-specific:
actor layout, replacing an actor that hangs, close killing the actors, the lazy import.
Ray is started once for the module (2 CPUs); each vector env starts its actors afresh
(about 1-2 s each), so most tests use one actor hosting every sub-env.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason='Ray is an extra: pip install "xpgym[ray]"')

import test_vector as spec  # noqa: E402  (after the skip: it needs gymnasium)
from toy_envs import ToyEnv  # noqa: E402

from xpgym.core.vector import AutoresetMode, SubEnvError, SyncVectorEnv  # noqa: E402
from xpgym.core.vector.ray_backend import RayVectorEnv  # noqa: E402

TESTS_DIR = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    """A local Ray instance whose actors can import `toy_envs` and `test_vector`."""
    if ray.is_initialized():  # another module's instance: we cannot set PYTHONPATH on it
        pytest.skip("Ray is already initialized by another test module")
    paths = (str(TESTS_DIR), str(TESTS_DIR / "core"), os.environ.get("PYTHONPATH"))
    pythonpath = os.pathsep.join(p for p in paths if p)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": pythonpath}},
    )
    yield
    ray.shutdown()


@pytest.fixture
def backend():
    """`RayVectorEnv` with every sub-env in one actor (the cheapest to start)."""
    return functools.partial(RayVectorEnv, num_actors=1)


two_actors = functools.partial(RayVectorEnv, num_actors=2)


# --- test_vector's specification, on Ray --------------------------------------------------


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda m: m.value)
def test_matches_gymnasium_sync_vector_env(mode):
    spec.test_matches_gymnasium_sync_vector_env(two_actors, mode, run_seed=0)


def test_same_seed_gives_the_same_episodes_as_sync_vector_env():
    assert spec.transcript(two_actors, seed=5) == spec.transcript(SyncVectorEnv, seed=5)


def test_partial_step_returns_only_the_stepped_sub_envs_in_key_order(backend):
    spec.test_partial_step_returns_only_the_stepped_sub_envs_in_key_order(backend)


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_a_raising_sub_env_is_truncated_with_an_error_and_the_batch_goes_on(backend, mode):
    spec.test_a_raising_sub_env_is_truncated_with_an_error_and_the_batch_goes_on(backend, mode)


def test_a_sub_env_that_overruns_step_timeout_is_truncated_not_awaited():
    """``sleep:30`` with ``step_timeout=1``: the actor's alarm truncates only that sub-env;
    its batch-mate in the same actor steps normally."""
    with RayVectorEnv(spec.toy_fns(2), step_timeout=1, num_actors=1) as vec:
        vec.reset(seed=0)
        obs, _, _, trunc, infos = vec.step(["sleep:30", "a"])
        assert list(trunc) == [True, False]
        assert "TimeoutError" in infos[0]["error"]
        assert obs[1] == "turn=1 last=a"
        obs, rew, *_ = vec.step(["a", "b"])  # NEXT_STEP: the rebuilt sub-env is reset
        assert obs[0].startswith("start")
        assert rew[0] == 0.0
        assert obs[1] == "turn=2 last=b"


def test_an_actor_with_threads_times_out_only_the_overrunning_sub_env():
    """With two threads per actor the actor watches the clock instead of SIGALRM: the same
    truncation, and the batch-mate in the same actor steps normally."""
    with RayVectorEnv(spec.toy_fns(2), step_timeout=1, num_actors=1, threads_per_actor=2) as vec:
        vec.reset(seed=0)
        obs, _, _, trunc, infos = vec.step(["sleep:30", "a"])
        assert list(trunc) == [True, False]
        assert "TimeoutError" in infos[0]["error"]
        assert obs[1] == "turn=1 last=a"
        obs, *_ = vec.step(["a", "b"])  # NEXT_STEP: the rebuilt sub-env is reset
        assert obs[0].startswith("start")
        assert obs[1] == "turn=2 last=b"


def test_an_actor_steps_its_sub_envs_concurrently(backend):
    spec.meet_in_one_host(backend)


def test_threads_per_actor_defaults_to_every_sub_env_of_an_actor_and_must_be_positive():
    with RayVectorEnv(spec.toy_fns(3), num_actors=1) as vec:
        assert vec.threads_per_actor == 3
    with pytest.raises(ValueError, match="threads_per_actor"):
        RayVectorEnv(spec.toy_fns(2), num_actors=1, threads_per_actor=0)


def test_same_step_reports_a_failed_reset_and_resets_at_the_next_step(backend):
    spec.test_same_step_reports_a_failed_reset_and_resets_at_the_next_step(backend)


def test_reset_errors_are_raised_with_the_sub_env_index(backend):
    spec.test_reset_errors_are_raised_with_the_sub_env_index(backend)


def test_call_reaches_wrapper_and_inner_env_methods(backend):
    spec.test_call_reaches_wrapper_and_inner_env_methods(backend)


def test_get_attr_and_set_attr(backend):
    spec.test_get_attr_and_set_attr(backend)


def test_get_states_and_set_states_branch_sub_envs_from_one_snapshot(backend):
    spec.test_get_states_and_set_states_branch_sub_envs_from_one_snapshot(backend)


# --- Ray-specific ---------------------------------------------------------------------------


def test_num_actors_and_envs_per_actor_are_exclusive():
    with pytest.raises(ValueError, match="not both"):
        RayVectorEnv(spec.toy_fns(2), num_actors=1, envs_per_actor=1)


def test_an_actor_that_stops_answering_is_killed_and_replaced():
    fns = [spec.UninterruptibleEnv] * 3
    # the default 5 s kill grace leaves the healthy actors ample time to answer
    with RayVectorEnv(fns, step_timeout=0.2, num_actors=1) as vec:
        vec.reset(seed=0)
        (old_actor,) = vec._actors
        _, _, _, trunc, infos = vec.step({0: "hang", 1: "a"})
        assert list(trunc) == [True, True]  # both lived in the killed actor
        assert "died or hung" in infos[0]["error"]
        assert vec._actors[0] != old_actor
        # Sub-env 2 was not in that batch but lost its episode with the actor: reported once.
        _, _, _, trunc, infos = vec.step({2: "a"})
        assert trunc[0]
        assert "died or hung" in infos[0]["error"]
        obs, _, _, trunc, _ = vec.step(["a", "a", "a"])  # NEXT_STEP resets all three
        assert all(o.startswith("start") for o in obs)
        assert not trunc.any()
        obs, *_ = vec.step(["b", "b", "b"])
        assert obs == ["turn=1 last=b"] * 3


def _dies_within(actor, seconds: float) -> bool:
    """`True` once a call to ``actor`` fails with RayActorError; ``ray.kill`` is asynchronous."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ready.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return True
        except ray.exceptions.GetTimeoutError:
            continue
        time.sleep(0.2)
    return False


def test_envs_per_actor_groups_sub_envs_and_close_kills_every_actor():
    vec = RayVectorEnv(spec.toy_fns(5), envs_per_actor=3)
    assert vec.actor_indices == [[0, 1, 2], [3, 4]]
    actors = list(vec._actors)
    vec.reset(seed=0)
    obs, *_ = vec.step(["a"] * 5)
    assert obs == ["turn=1 last=a"] * 5
    vec.close()
    vec.close()  # twice is safe
    for actor in actors:
        assert _dies_within(actor, seconds=60)
    with pytest.raises(RuntimeError, match="closed"):
        vec.step(["a"] * 5)
    assert ray.is_initialized()  # the test's instance is not the vector env's to stop


def test_a_failing_factory_is_reported_at_construction(backend):
    def broken() -> ToyEnv:
        raise OSError("no such dataset")

    with pytest.raises(SubEnvError, match="no such dataset"):
        backend([ToyEnv, broken])


def test_missing_ray_raises_import_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r'pip install "xpgym\[ray\]"'):
        RayVectorEnv(spec.toy_fns(1))


def test_importing_the_vector_package_does_not_import_ray():
    code = (
        "import sys, xpgym.core.vector, xpgym.core.vector.ray_backend; "
        "assert 'ray' not in sys.modules, 'ray was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=TESTS_DIR)
