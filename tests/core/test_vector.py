"""Vector envs: Gymnasium-exact autoreset, partial steps, isolation, timeouts, seeds, cleanup."""

from __future__ import annotations

import functools
import multiprocessing
import os
import signal
import threading
import time
from typing import Any

import numpy as np
import pytest
from hang_guard import HANG_GUARD_S
from toy_envs import HostMeetingEnv, MeetingEnv, ToyEnv

import xpgym
from xpgym.core.env import Wrapper
from xpgym.core.vector import (
    AutoresetMode,
    ProcessVectorEnv,
    SubEnvError,
    SyncVectorEnv,
    ThreadVectorEnv,
    derive_seeds,
)

BACKENDS = [SyncVectorEnv, ThreadVectorEnv, ProcessVectorEnv]
# A worker with several threads times steps out by watching them, not by SIGALRM.
threaded_worker = functools.partial(ProcessVectorEnv, num_workers=1, threads_per_worker=2)
TIMEOUT_BACKENDS = [ThreadVectorEnv, ProcessVectorEnv, threaded_worker]


def backend_id(cls: Any) -> str:
    return "ProcessVectorEnv-2-threads" if cls is threaded_worker else cls.__name__


def toy_fns(n: int, episode_length: int = 3) -> list:
    return [functools.partial(ToyEnv, episode_length)] * n


def random_actions(rng: np.random.Generator, n: int) -> list[str]:
    return [str(int(a)) for a in rng.integers(0, 10, size=n)]


@pytest.fixture(params=BACKENDS, ids=lambda cls: cls.__name__)
def backend(request):
    return request.param


# --- equivalence with gymnasium's own SyncVectorEnv ---------------------------------------


gym = pytest.importorskip("gymnasium", reason="gymnasium is needed for the equivalence test")


class GymToy(gym.Env):
    """The same ToyEnv logic behind gymnasium's API (Text spaces)."""

    observation_space = gym.spaces.Text(64)
    action_space = gym.spaces.Text(64)

    def __init__(self) -> None:
        self.toy = ToyEnv(3)

    def reset(self, *, seed=None, options=None):
        return self.toy.reset(seed=seed)

    def step(self, action):
        return self.toy.step(action)


def unbatch_infos(infos: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Gymnasium's dict-of-arrays infos -> our list of per-sub-env dicts."""
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos[f"_{key}"]
        per_env = unbatch_infos(value, n) if isinstance(value, dict) else value
        for i in range(n):
            if mask[i]:
                item = per_env[i]
                out[i][key] = item.item() if isinstance(item, np.generic) else item
    return out


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda m: m.value)
@pytest.mark.parametrize("run_seed", [0, 1, 2])
def test_matches_gymnasium_sync_vector_env(backend, mode, run_seed):
    n = 4
    ours = backend(toy_fns(n), autoreset_mode=mode)
    theirs = gym.vector.SyncVectorEnv(
        [GymToy] * n, autoreset_mode=gym.vector.AutoresetMode(mode.value)
    )
    seeds = derive_seeds(run_seed, n)
    obs, infos = ours.reset(seed=run_seed)
    g_obs, g_infos = theirs.reset(seed=seeds)
    assert obs == list(g_obs)
    assert infos == unbatch_infos(g_infos, n)
    rng = np.random.default_rng(run_seed)
    done = np.zeros(n, dtype=bool)
    for _ in range(25):
        if mode is AutoresetMode.DISABLED and done.any():
            obs, infos = ours.reset(options={"reset_mask": done.copy()})
            g_obs, g_infos = theirs.reset(options={"reset_mask": done.copy()})
            assert obs == list(g_obs)
            assert infos == unbatch_infos(g_infos, n)
        actions = random_actions(rng, n)
        obs, rew, term, trunc, infos = ours.step(actions)
        g_obs, g_rew, g_term, g_trunc, g_infos = theirs.step(tuple(actions))
        assert obs == list(g_obs)
        np.testing.assert_array_equal(rew, g_rew)
        np.testing.assert_array_equal(term, g_term)
        np.testing.assert_array_equal(trunc, g_trunc)
        assert infos == unbatch_infos(g_infos, n)
        done = term | trunc
    ours.close()
    theirs.close()


# --- semantics ------------------------------------------------------------------------------


def test_autoreset_mode_is_published_and_accepts_strings(backend):
    with backend(toy_fns(2), autoreset_mode="SameStep") as vec:
        assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    with backend(toy_fns(1), autoreset_mode="next_step") as vec:
        assert vec.autoreset_mode is AutoresetMode.NEXT_STEP


def test_unknown_autoreset_mode_is_rejected():
    with pytest.raises(ValueError, match="autoreset_mode must be one of"):
        SyncVectorEnv(toy_fns(1), autoreset_mode="sometimes")


def test_same_step_keeps_final_observation_and_info(backend):
    with backend(toy_fns(1, episode_length=1), autoreset_mode="SameStep") as vec:
        vec.reset(seed=0)
        obs, _, term, _, infos = vec.step(["x"])
        assert term[0]
        assert obs[0].startswith("start")
        assert infos[0]["final_obs"] == "turn=1 last=x"
        assert infos[0]["final_info"] == {"turn": 1, "correct": False}


def test_disabled_mode_refuses_to_step_a_finished_sub_env(backend):
    with backend(toy_fns(2, episode_length=1), autoreset_mode="Disabled") as vec:
        vec.reset(seed=0)
        vec.step(["x", "x"])
        with pytest.raises(ValueError, match="autoreset is disabled"):
            vec.step({0: "x"})
        obs, infos = vec.reset(options={"reset_mask": np.array([True, False])})
        assert obs[0].startswith("start")
        assert obs[1] == "turn=1 last=x"
        assert infos[1] == {}
        vec.step({0: "x"})


def test_partial_step_returns_only_the_stepped_sub_envs_in_key_order(backend):
    with backend(toy_fns(3)) as vec:
        vec.reset(seed=0)
        obs, rew, term, trunc, infos = vec.step({2: "a", 0: "b"})
        assert obs == ["turn=1 last=a", "turn=1 last=b"]
        assert rew.shape == term.shape == trunc.shape == (2,)
        assert len(infos) == 2
        obs, *_ = vec.step(["c", "c", "c"])
        assert obs == ["turn=2 last=c", "turn=1 last=c", "turn=2 last=c"]


def test_partial_step_validates_indices(backend):
    with backend(toy_fns(2)) as vec:
        vec.reset(seed=0)
        with pytest.raises(IndexError, match=r"\[5\]"):
            vec.step({5: "a"})


def test_step_with_wrong_number_of_actions_raises(backend):
    with backend(toy_fns(2)) as vec:
        vec.reset(seed=0)
        with pytest.raises(ValueError, match="takes 2 actions"):
            vec.step(["a"])


def test_non_string_action_raises_type_error(backend):
    with backend(toy_fns(2)) as vec:
        vec.reset(seed=0)
        with pytest.raises(TypeError, match=r"sub-envs \[1\]"):
            vec.step(["a", 3])


def test_step_before_reset_raises(backend):
    with backend(toy_fns(1)) as vec, pytest.raises(RuntimeError, match="never reset"):
        vec.step(["a"])


def test_reset_mask_must_be_a_bool_array_of_the_right_shape(backend):
    with backend(toy_fns(2)) as vec:
        with pytest.raises(TypeError):
            vec.reset(options={"reset_mask": [True, False]})
        with pytest.raises(ValueError, match="shape"):
            vec.reset(options={"reset_mask": np.array([True])})
        with pytest.raises(ValueError, match="selects no sub-env"):
            vec.reset(options={"reset_mask": np.zeros(2, dtype=bool)})


def test_reset_does_not_modify_the_callers_options(backend):
    options = {"reset_mask": np.array([True, True])}
    with backend(toy_fns(2)) as vec:
        vec.reset(seed=0, options=options)
    assert "reset_mask" in options


# --- failures and timeouts ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_a_raising_sub_env_is_truncated_with_an_error_and_the_batch_goes_on(backend, mode):
    with backend(toy_fns(3), autoreset_mode=mode) as vec:
        first_obs, _ = vec.reset(seed=0)
        obs, rew, term, trunc, infos = vec.step(["a", "raise", "b"])
        assert list(trunc) == [False, True, False]
        assert list(term) == [False, False, False]
        assert rew[1] == 0.0
        assert "RuntimeError: toy failure" in infos[1]["error"]
        assert obs[0] == "turn=1 last=a"
        assert obs[2] == "turn=1 last=b"
        if mode == "SameStep":  # reset in the same step; the failed step's view is kept
            assert obs[1].startswith("start")
            assert infos[1]["final_obs"] == first_obs[1]
            assert "RuntimeError" in infos[1]["final_info"]["error"]
        else:  # the failing step shows the last observation; the next step resets
            assert obs[1] == first_obs[1]
            obs, rew, term, trunc, _ = vec.step(["a", "a", "a"])
            assert obs[1].startswith("start")
            assert rew[1] == 0.0
            assert not trunc[1]
        obs, *_ = vec.step(["z", "z", "z"])
        assert obs[1] == "turn=1 last=z"  # the rebuilt sub-env plays on


@pytest.mark.parametrize("cls", TIMEOUT_BACKENDS, ids=backend_id)
def test_a_sub_env_that_overruns_step_timeout_is_truncated_not_awaited(cls):
    with cls(toy_fns(2), step_timeout=0.5) as vec:
        vec.reset(seed=0)
        obs, _, _term, trunc, infos = vec.step(["sleep:30", "a"])
        assert list(trunc) == [True, False]
        assert "TimeoutError" in infos[0]["error"]
        assert obs[1] == "turn=1 last=a"
        obs, rew, *_ = vec.step(["a", "b"])  # NEXT_STEP: the rebuilt sub-env is reset
        assert obs[0].startswith("start")
        assert rew[0] == 0.0


@pytest.mark.parametrize("cls", TIMEOUT_BACKENDS, ids=backend_id)
def test_same_step_resets_a_sub_env_that_overran_step_timeout_in_that_step(cls):
    with cls(toy_fns(2), step_timeout=0.5, autoreset_mode="SameStep") as vec:
        first_obs, _ = vec.reset(seed=0)
        obs, _, _, trunc, infos = vec.step(["sleep:30", "a"])
        assert list(trunc) == [True, False]
        assert obs[0].startswith("start")
        assert infos[0]["final_obs"] == first_obs[0]
        assert "TimeoutError" in infos[0]["error"]


class FailsSecondReset(ToyEnv):
    """Its second reset raises: the autoreset after its first episode fails."""

    resets = 0

    def reset(self, *, seed=None, options=None):
        self.resets += 1
        if self.resets == 2:
            raise OSError("dataset gone")
        return super().reset(seed=seed)


def test_same_step_reports_a_failed_reset_and_resets_at_the_next_step(backend):
    with backend([functools.partial(FailsSecondReset, 1)], autoreset_mode="SameStep") as vec:
        vec.reset(seed=0)
        obs, rew, term, trunc, infos = vec.step(["x"])
        assert obs == ["turn=1 last=x"]  # the ending step's observation: no reset happened
        assert (rew[0], term[0], trunc[0]) == (0.0, False, True)
        assert "OSError: dataset gone" in infos[0]["error"]
        obs, rew, term, trunc, _ = vec.step(["y"])  # the rebuilt sub-env is reset instead
        assert obs[0].startswith("start")
        assert (rew[0], term[0], trunc[0]) == (0.0, False, False)


def test_sync_backend_rejects_step_timeout():
    with pytest.raises(ValueError, match="cannot time them out"):
        SyncVectorEnv(toy_fns(1), step_timeout=1.0)


@pytest.mark.parametrize("name", ["step_timeout", "start_timeout"])
@pytest.mark.parametrize("value", [0, -1.5])
def test_a_timeout_that_is_not_positive_is_refused(name, value):
    with pytest.raises(ValueError, match=f"{name} must be positive seconds"):
        ThreadVectorEnv(toy_fns(1), **{name: value})


class UninterruptibleEnv(ToyEnv):
    """Blocks SIGALRM before sleeping: only killing its process can stop it."""

    def step(self, action):
        if action == "hang":
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(60)
        return super().step(action)


def test_process_backend_replaces_a_worker_that_stops_answering():
    fns = [UninterruptibleEnv] * 2
    with ProcessVectorEnv(fns, step_timeout=0.2, num_workers=1) as vec:
        vec.reset(seed=0)
        _, _, _, trunc, infos = vec.step(["hang", "a"])
        assert list(trunc) == [True, True]  # both sub-envs lived in the killed worker
        assert "died or hung" in infos[0]["error"]
        obs, *_ = vec.step(["a", "a"])  # NEXT_STEP resets both on the fresh worker
        assert all(o.startswith("start") for o in obs)


def test_same_step_resets_the_sub_envs_of_a_replaced_worker_in_that_step():
    fns = [UninterruptibleEnv] * 2
    with ProcessVectorEnv(fns, step_timeout=0.2, num_workers=1, autoreset_mode="SameStep") as vec:
        vec.reset(seed=0)
        obs, _, _, trunc, infos = vec.step(["hang", "a"])
        assert list(trunc) == [True, True]  # both sub-envs lived in the killed worker
        assert all(o.startswith("start") for o in obs)  # and are reset on the fresh one
        assert all("died or hung" in info["final_info"]["error"] for info in infos)
        obs, _, _, trunc, _ = vec.step(["a", "a"])
        assert obs == ["turn=1 last=a"] * 2  # fresh episodes: the loss is not reported again
        assert not trunc.any()


def test_set_attr_after_a_failed_step_reaches_the_rebuilt_sub_env(backend):
    with backend(toy_fns(2), autoreset_mode="NextStep") as vec:
        vec.reset(seed=0)
        vec.step(["x", "raise"])  # sub-env 1 is discarded, to be rebuilt
        vec.set_attr("episode_length", 1)
        vec.step(["x", "x"])  # NEXT_STEP: sub-env 1 is reset
        _, _, term, _, _ = vec.step(["x", "x"])
        assert term[1]


@pytest.mark.parametrize("operation", ["get_attr", "call", "get_states"])
def test_reading_a_sub_env_discarded_after_a_failed_step_reads_its_rebuilt_env(backend, operation):
    with backend(toy_fns(2), autoreset_mode="NextStep") as vec:
        vec.reset(seed=0)
        vec.step(["x", "raise"])
        if operation == "get_states":
            assert vec.get_states([1])[0]["turn"] == 0
        else:
            assert getattr(vec, operation)("episode_length") == (3, 3)


def dies_while_built() -> ToyEnv:
    os._exit(3)


def test_process_backend_reports_a_worker_that_dies_while_building_its_sub_envs():
    with pytest.raises(SubEnvError, match="construction: worker 0: died"):
        ProcessVectorEnv([dies_while_built])


class BadReset(ToyEnv):
    def reset(self, *, seed=None, options=None):
        raise ValueError("cannot reset")


def test_reset_errors_are_raised_with_the_sub_env_index(backend):
    with backend([ToyEnv, BadReset]) as vec, pytest.raises(SubEnvError, match="sub-env 1"):
        vec.reset()


# --- seeds ----------------------------------------------------------------------------------


def test_derived_seeds_do_not_depend_on_the_number_of_sub_envs():
    assert derive_seeds(7, 8)[:3] == derive_seeds(7, 3)
    assert len(set(derive_seeds(7, 64))) == 64
    assert derive_seeds(0, 2)[1] != derive_seeds(1, 1)[0]


def transcript(cls, seed: int, steps: int = 20, n: int = 4) -> list:
    rng = np.random.default_rng(123)
    out = []
    with cls(toy_fns(n)) as vec:
        out.append(vec.reset(seed=seed))
        for _ in range(steps):
            obs, rew, term, trunc, infos = vec.step(random_actions(rng, n))
            out.append((obs, rew.tolist(), term.tolist(), trunc.tolist(), infos))
    return out


def test_same_seed_gives_the_same_episodes_on_every_backend():
    reference = transcript(SyncVectorEnv, seed=5)
    for cls in (ThreadVectorEnv, ProcessVectorEnv):
        assert transcript(cls, seed=5) == reference
    assert transcript(SyncVectorEnv, seed=6) != reference


def test_seed_list_is_used_as_given(backend):
    with backend(toy_fns(2)) as vec:
        obs, _ = vec.reset(seed=[3, 3])
        assert obs[0] == obs[1]
        with pytest.raises(ValueError, match="2 sub-envs"):
            vec.reset(seed=[1, 2, 3])


# --- call / get_attr / set_attr -------------------------------------------------------------


class Tagging(Wrapper):
    """A wrapper with a method and an attribute of its own, for delegation tests."""

    def __init__(self, env):
        super().__init__(env)
        self.tag = "wrapper"

    def shout(self, text: str) -> str:
        return text.upper()


def tagged_toy() -> Tagging:
    return Tagging(ToyEnv())


def test_call_reaches_wrapper_and_inner_env_methods(backend):
    with backend([tagged_toy] * 2) as vec:
        vec.reset(seed=0)
        assert vec.call("shout", "hi") == ("HI", "HI")
        assert vec.call("episode_length") == (3, 3)  # not callable: its value


def test_get_attr_and_set_attr(backend):
    with backend([tagged_toy] * 2) as vec:
        assert vec.get_attr("tag") == ("wrapper", "wrapper")
        vec.set_attr("episode_length", [1, 5])  # lives on the inner env, not the wrapper
        assert vec.get_attr("episode_length") == (1, 5)
        vec.reset(seed=0)
        _, _, term, _, _ = vec.step(["x", "x"])
        assert list(term) == [True, False]
        with pytest.raises(SubEnvError, match="no_such_attr"):
            vec.get_attr("no_such_attr")


# --- cleanup --------------------------------------------------------------------------------


def test_close_leaves_no_thread_or_process_behind(backend):
    threads_before = set(threading.enumerate())
    vec = backend(toy_fns(4))
    vec.reset(seed=0)
    vec.step(["a"] * 4)
    vec.close()
    vec.close()  # twice is safe
    assert set(threading.enumerate()) - threads_before == set()
    assert multiprocessing.active_children() == []
    with pytest.raises(RuntimeError, match="closed"):
        vec.step(["a"] * 4)


def test_close_closes_every_sub_env():
    vec = SyncVectorEnv(toy_fns(3))
    envs = vec.envs
    vec.close()
    assert [e.closed for e in envs] == [1, 1, 1]


def test_unpicklable_factories_are_rejected_with_a_hint():
    with pytest.raises(TypeError, match="cannot be pickled"):
        ProcessVectorEnv([lambda: ToyEnv()])


# --- make_vec -------------------------------------------------------------------------------


@pytest.fixture
def toy_id():
    snapshot = dict(xpgym.core.registry.registry)
    xpgym.register("test:Toy-v0", "toy_envs:ToyEnv", episode_length=2)
    yield "test:Toy-v0"
    xpgym.core.registry.registry.clear()
    xpgym.core.registry.registry.update(snapshot)


@pytest.mark.parametrize("mode", ["sync", "thread", "process"])
def test_make_vec_builds_each_backend_from_a_runtime_registered_id(toy_id, mode):
    env_kwargs = {"episode_length": 1}
    with xpgym.make_vec(toy_id, 3, vectorization_mode=mode, env_kwargs=env_kwargs) as vec:
        vec.reset(seed=0)
        _, _, term, _, _ = vec.step(["x"] * 3)
        assert term.all()
        assert vec.get_attr("spec")[0].id == toy_id
    assert env_kwargs == {"episode_length": 1}


@pytest.mark.parametrize(
    ("mode", "backend_cls"),
    [
        ("sync", SyncVectorEnv),
        ("thread", ThreadVectorEnv),
        ("process", ProcessVectorEnv),
    ],
)
def test_each_vectorization_mode_selects_its_backend(toy_id, mode, backend_cls):
    with xpgym.make_vec(toy_id, 1, vectorization_mode=mode) as vec:
        assert type(vec) is backend_cls


def test_make_vec_rejects_unknown_modes_and_ids(toy_id):
    with pytest.raises(ValueError, match="vectorization_mode"):
        xpgym.make_vec(toy_id, 2, vectorization_mode="gpu")
    with pytest.raises(xpgym.UnknownEnvError):
        xpgym.make_vec("test:Toyy-v0", 2)


def test_async_is_refused_with_the_thread_and_process_modes_named(toy_id):
    with pytest.raises(ValueError, match=r'"async" is ambiguous.*"thread".*"process"'):
        xpgym.make_vec(toy_id, 2, vectorization_mode="async")


def test_make_vec_applies_wrappers_in_order(toy_id):
    with xpgym.make_vec(toy_id, 2, wrappers=[Tagging]) as vec:
        assert vec.get_attr("tag") == ("wrapper", "wrapper")


def meeting_fns(n: int, barrier: threading.Barrier) -> list:
    return [functools.partial(MeetingEnv, barrier, episode_length=10)] * n


def test_thread_backend_overlaps_blocking_steps():
    """Eight blocking steps run at once: each waits at a barrier that only eight pass."""
    barrier = threading.Barrier(8, timeout=HANG_GUARD_S)
    with ThreadVectorEnv(meeting_fns(8, barrier)) as vec:
        vec.reset(seed=0)
        vec.step(["sleep:0.01"] * 8)  # teaches the pool that steps block
        obs, _, _, trunc, _ = vec.step(["meet"] * 8)
    assert not trunc.any()
    assert obs == ["turn=2 last=meet"] * 8


def horizon_toy() -> Wrapper:
    from xpgym.core.wrappers import EpisodeStatistics, HorizonSchedule, PiecewiseTurnSchedule

    schedule = PiecewiseTurnSchedule(caps=(1, 3), boundaries=(100,))
    return EpisodeStatistics(HorizonSchedule(ToyEnv(episode_length=10), schedule))


def test_trainer_grows_the_horizon_through_the_vector_env(backend):
    with backend([horizon_toy] * 2) as vec:
        vec.reset(seed=0)
        _, _, _, trunc, infos = vec.step(["x", "x"])
        assert list(trunc) == [True, True]  # cap 1 at training step 0
        vec.call("set_training_step", 100)  # reaches the inner wrapper through delegation
        assert vec.get_attr("current_max_turns") == (1, 1)  # takes effect at the next reset
        vec.reset()
        for _ in range(2):
            _, _, _, trunc, _ = vec.step(["x", "x"])
            assert not trunc.any()
        _, _, _, trunc, infos = vec.step(["x", "x"])
        assert list(trunc) == [True, True]
        assert infos[0]["episode"]["length"] == 3


def test_thread_backend_hands_the_rest_of_a_batch_to_helpers_once_a_step_blocks():
    """After a batch of steps that do not block, the pool runs steps inline; the first
    blocking one moves the rest to helpers, where the other seven run at once: they wait at
    a barrier that only seven pass."""
    barrier = threading.Barrier(7, timeout=HANG_GUARD_S)
    with ThreadVectorEnv(meeting_fns(8, barrier)) as vec:
        vec.reset(seed=0)
        vec.step(["a"] * 8)  # teaches the pool that steps do not block
        obs, _, _, trunc, _ = vec.step(["sleep:0.01"] + ["meet"] * 7)
    assert not trunc.any()
    assert obs == ["turn=2 last=sleep:0.01"] + ["turn=2 last=meet"] * 7


def test_the_first_batch_of_steps_waits_on_every_blocking_step_at_once():
    """A fresh pool does not know whether steps block: their first batch is shared, so eight
    steps meet at a barrier that only eight pass, without a batch to teach the pool."""
    barrier = threading.Barrier(8, timeout=HANG_GUARD_S)
    with ThreadVectorEnv(meeting_fns(8, barrier)) as vec:
        vec.reset(seed=0)
        obs, _, _, trunc, _ = vec.step(["meet"] * 8)
    assert not trunc.any()
    assert obs == ["turn=1 last=meet"] * 8


def meet_in_one_host(one_host: Any) -> None:
    """Both sub-envs of ``one_host(fns)`` live in one worker process (or Ray actor); their
    steps meet at that process's barrier, which only two threads in flight at once pass."""
    fns = [functools.partial(HostMeetingEnv, "host", 2)] * 2
    with one_host(fns) as vec:
        vec.reset(seed=0)
        vec.step(["sleep:0.01"] * 2)
        obs, _, _, trunc, infos = vec.step(["meet", "meet"])
    assert not trunc.any(), infos
    assert obs == ["turn=2 last=meet"] * 2


def test_a_worker_steps_its_sub_envs_concurrently():
    meet_in_one_host(functools.partial(ProcessVectorEnv, num_workers=1))


def test_a_worker_with_threads_isolates_a_raising_sub_env():
    fns = [functools.partial(HostMeetingEnv, "isolation", 2)] * 3
    with ProcessVectorEnv(fns, num_workers=1) as vec:
        vec.reset(seed=0)
        vec.step(["sleep:0.01"] * 3)
        obs, _, _, trunc, infos = vec.step(["meet", "raise", "meet"])
    assert list(trunc) == [False, True, False]
    assert "RuntimeError" in infos[1]["error"]
    assert obs[0] == obs[2] == "turn=2 last=meet"  # results stay in sub-env order


@pytest.mark.parametrize("threads", [0, -1, 1.5, True])
def test_threads_per_worker_must_be_a_positive_int(threads):
    with pytest.raises(ValueError, match="threads_per_worker"):
        ProcessVectorEnv(toy_fns(2), num_workers=1, threads_per_worker=threads)


def test_a_worker_gets_a_thread_per_sub_env_or_one_with_a_step_timeout():
    with ProcessVectorEnv(toy_fns(5), num_workers=2) as vec:
        assert vec.threads_per_worker == 3  # every sub-env of the fullest worker
    with ProcessVectorEnv(toy_fns(4), num_workers=2, step_timeout=5) as vec:
        assert vec.threads_per_worker == 1  # SIGALRM can interrupt an overrunning step
    with ProcessVectorEnv(toy_fns(4), num_workers=2, step_timeout=5, threads_per_worker=3) as vec:
        assert vec.threads_per_worker == 3


def test_get_states_and_set_states_branch_sub_envs_from_one_snapshot(backend):
    with backend(toy_fns(3, episode_length=5)) as vec:
        vec.reset(seed=0)
        vec.step({0: "x"})
        (snapshot,) = vec.get_states([0])
        vec.set_states({1: snapshot, 2: snapshot}, {1: "restored", 2: "restored"})
        obs, *_ = vec.step(["y", "y", "y"])
        assert obs == ["turn=2 last=y"] * 3  # all three continue the same episode
        with pytest.raises(IndexError, match=r"\[7\]"):
            vec.get_states([7])


def test_set_states_makes_a_finished_sub_env_steppable_without_autoreset(backend):
    with backend(toy_fns(2, episode_length=1)) as vec:
        vec.reset(seed=0)
        (snapshot,) = vec.get_states([0])
        vec.step(["x", "x"])  # both episodes end; NEXT_STEP would reset next
        vec.set_states({0: snapshot})
        obs, *_ = vec.step(["z", "z"])
        assert obs[0] == "turn=1 last=z"  # stepped from the snapshot, not reset
        assert obs[1].startswith("start")  # the other one autoresets as usual


def test_a_masked_reset_clears_the_loss_of_a_replaced_worker():
    with ProcessVectorEnv([UninterruptibleEnv] * 2, step_timeout=0.2, num_workers=1) as vec:
        vec.reset(seed=0)
        vec.step({0: "hang"})  # kills the worker; sub-env 1 lost its episode while idle
        vec.reset(options={"reset_mask": np.array([False, True])})
        _, _, _, trunc, infos = vec.step({1: "a"})
        assert not trunc[0]  # a fresh episode: the old loss is not reported again
        assert "error" not in infos[0]
