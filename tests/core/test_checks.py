"""`check_env`: every registered env passes it, and each broken env below fails it.

Each `Broken*` env breaks exactly one rule of the `Env` contract.
"""

from __future__ import annotations

import random
import re
import threading
import warnings
from typing import Any, ClassVar

import numpy as np
import pytest
from hostile_actions import HOSTILE_ACTIONS
from toy_envs import ToyEnv
from toy_multiagent import CountGame

import xpgym
from xpgym.core.checks import CheckError, MultiAgentCheckError, check_env, check_multiagent_env
from xpgym.core.env import Env, Wrapper
from xpgym.core.multiagent import MultiAgentEnv

OFFLINE_IDS = [i for i in xpgym.list_envs() if not xpgym.spec(i).requires_download]


@pytest.mark.parametrize("env_id", OFFLINE_IDS)
def test_every_offline_env_passes_its_checker(env_id):
    env = xpgym.make(env_id)
    if isinstance(env, MultiAgentEnv):
        check_multiagent_env(env)
    else:
        check_env(env)


@pytest.mark.parametrize("env_id", OFFLINE_IDS)
def test_every_offline_env_takes_hostile_text_without_raising(env_id):
    env = xpgym.make(env_id)
    multiagent = isinstance(env, MultiAgentEnv)
    for index, action in enumerate(HOSTILE_ACTIONS):
        if index % 4 == 0:  # a fresh episode now and then, so later texts meet turn 1 too
            env.reset(seed=index)
        if multiagent:
            active = env.agent_selector.active_agents()
            _, rewards, *_ = env.step({agent: action for agent in active})
            assert all(np.isfinite(r) for r in rewards.values())
            done = not env.agents
        else:
            _, reward, terminated, truncated, _ = env.step(action)
            assert np.isfinite(reward)
            done = terminated or truncated
        if done:
            env.reset(seed=index)
    env.close()


def test_toy_env_passes():
    check_env(ToyEnv())


def test_wrapped_env_passes():
    check_env(Wrapper(xpgym.make("game:GuessTheNumber-v0")))


def test_checker_leaves_the_env_open():
    env = ToyEnv()
    check_env(env)
    assert env.closed == 0


def test_checker_closes_its_second_instance_twice():
    closed: list[int] = []

    class CountsCloses(ToyEnv):
        def close(self) -> None:
            closed.append(id(self))

    env = CountsCloses()
    check_env(env)
    assert len(closed) == 2
    assert id(env) not in closed


def test_multiagent_env_is_sent_to_check_multiagent_env():
    with pytest.raises(TypeError, match="check_multiagent_env"):
        check_env(CountGame())


def test_non_env_is_rejected_with_type_error():
    with pytest.raises(TypeError, match="needs an xpgym Env"):
        check_env(object())  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"num_episodes": 0}, {"max_steps": 0}])
def test_non_positive_budgets_are_rejected(kwargs):
    with pytest.raises(ValueError, match="must be >= 1"):
        check_env(ToyEnv(), **kwargs)


def test_check_error_is_an_assertion_error():
    assert issubclass(CheckError, AssertionError)


def test_a_multiagent_check_error_is_a_check_error():
    assert issubclass(MultiAgentCheckError, CheckError)


def test_xpgym_exports_the_checkers_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert xpgym.check_env is check_env
        assert xpgym.check_multiagent_env is check_multiagent_env


def test_env_that_cannot_be_copied_warns_and_is_still_checked():
    class Locked(ToyEnv):
        def __init__(self) -> None:
            super().__init__()
            self.lock = threading.Lock()

    with pytest.warns(UserWarning, match="cannot build a second instance"):
        check_env(Locked())


# ---------------------------------------------------------------- broken envs


class BrokenGlobalRandom(ToyEnv):
    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed)
        self.secret = random.randint(0, 9)
        return obs, info


class BrokenGlobalNumpyRandom(ToyEnv):
    def step(self, action):
        np.random.random()
        return super().step(action)


class BrokenReseedsGlobalRandom(ToyEnv):
    """GEM's pattern: `reset(seed)` seeds the global generators."""

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            random.seed(seed)
            np.random.seed(seed)
        return super().reset(seed=seed)


class BrokenUnseeded(ToyEnv):
    def reset(self, *, seed=None, options=None):
        _, info = super().reset(seed=seed)
        entropy = int(np.random.default_rng().integers(2**62))  # OS entropy, never repeats
        return f"start entropy={entropy}", info


class BrokenSharedRng(ToyEnv):
    """All instances draw from one class-level generator."""

    shared: ClassVar[np.random.Generator] = np.random.default_rng(0)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            type(self).shared = np.random.default_rng(seed)
        self.secret = int(type(self).shared.integers(0, 10))
        self.turn = 0
        return "start", {}

    def sample_random_action(self):
        return str(int(type(self).shared.integers(0, 10)))


class BrokenAliasingGetState(ToyEnv):
    """get_state returns the live history list instead of a copy."""

    def reset(self, *, seed=None, options=None):
        self.history: list[str] = []
        return super().reset(seed=seed)

    def step(self, action):
        self.history.append(action)
        return super().step(action)

    def get_state(self):
        return {**super().get_state(), "history": self.history}

    def set_state(self, state):
        super().set_state(state)
        self.history = list(state["history"])


class BrokenAliasingSetState(BrokenAliasingGetState):
    """set_state keeps the snapshot's list and mutates it on later steps."""

    def get_state(self):
        return {**ToyEnv.get_state(self), "history": list(self.history)}

    def set_state(self, state):
        ToyEnv.set_state(self, state)
        self.history = state["history"]


class BrokenStateWithoutRng(ToyEnv):
    def get_state(self):
        return {"secret": self.secret, "turn": self.turn}

    def set_state(self, state):
        self.secret = state["secret"]
        self.turn = state["turn"]


class BrokenUnpicklableState(ToyEnv):
    def get_state(self):
        return {**super().get_state(), "callback": lambda: None}


class BrokenNonBoolTerminated(ToyEnv):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, int(terminated), truncated, info


class BrokenNumpyBoolTruncated(ToyEnv):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, np.bool_(truncated), info


class BrokenNonBoolCorrect(ToyEnv):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {**info, "correct": int(info["correct"])}


class BrokenNonBoolInvalidAction(ToyEnv):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {**info, "invalid_action": "no"}


class BrokenMetrics(ToyEnv):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {**info, "metrics": {"steps": "one"}}


class BrokenBothFlagsAtLimit(ToyEnv):
    """GEM's turn limit: terminated and truncated both True."""

    def step(self, action):
        obs, reward, terminated, _, info = super().step(action)
        return obs, reward, terminated, terminated, info


class BrokenNanReward(ToyEnv):
    def step(self, action):
        obs, _, terminated, truncated, info = super().step(action)
        return obs, float("nan"), terminated, truncated, info


class BrokenBoolReward(ToyEnv):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward > 0, terminated, truncated, info


class BrokenDictObservation(ToyEnv):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return {"text": obs}, reward, terminated, truncated, info


class BrokenResetObservation(ToyEnv):
    def reset(self, *, seed=None, options=None):
        _, info = super().reset(seed=seed)
        return None, info


class BrokenFourTupleStep(ToyEnv):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated or truncated, info


class BrokenResetReturnsObsOnly(ToyEnv):
    def reset(self, *, seed=None, options=None):
        return super().reset(seed=seed)[0]


class BrokenResetInfoNotDict(ToyEnv):
    def reset(self, *, seed=None, options=None):
        return super().reset(seed=seed)[0], None


class BrokenResetSignature(ToyEnv):
    def reset(self, seed=None):  # no options
        return super().reset(seed=seed)


class BrokenSampleRandomAction(ToyEnv):
    def sample_random_action(self):
        return int(self.np_random.integers(0, 10))


class BrokenClose(ToyEnv):
    def close(self) -> None:
        if self.closed:
            raise RuntimeError("already closed")
        self.closed += 1


class BrokenAllowsStepAfterDone(ToyEnv):
    """Allows steps after the end but returns garbage for them."""

    allows_step_after_done = True

    def step(self, action):
        if self.turn >= self.episode_length:
            return "over", 0.0, "yes", False, {}
        return super().step(action)


def _unenforced_step(self: Env, action: Any):
    return ToyEnv.step.__wrapped__(self, action)  # type: ignore[attr-defined]


class BrokenUnenforcedStep(ToyEnv):
    """`step` assigned after class creation, so the lifecycle checks are bypassed."""


BrokenUnenforcedStep.step = _unenforced_step  # type: ignore[method-assign]


@pytest.mark.parametrize(
    ("env_class", "message"),
    [
        (BrokenGlobalRandom, "changed the global `random` state"),
        (BrokenGlobalNumpyRandom, "changed the global `numpy.random` state"),
        (BrokenReseedsGlobalRandom, "changed the global `random` state"),
        (BrokenUnseeded, "two episodes with seed 0 differ"),
        (BrokenSharedRng, "playing another instance in the middle"),
        (BrokenAliasingGetState, "after get_state() changed the get_state() snapshot"),
        (BrokenAliasingSetState, "after set_state() changed the get_state() snapshot"),
        (BrokenStateWithoutRng, "the episode after set_state() at step"),
        (BrokenUnpicklableState, "picklable"),
        (BrokenNonBoolTerminated, "terminated must be a Python bool, got int"),
        (BrokenNumpyBoolTruncated, "truncated must be a Python bool, got numpy.bool"),
        (BrokenNonBoolCorrect, "info['correct'] must be a Python bool"),
        (BrokenNonBoolInvalidAction, "info['invalid_action'] must be a Python bool"),
        (BrokenMetrics, "info['metrics'] must map str to numbers"),
        (BrokenBothFlagsAtLimit, "terminated and truncated are both True"),
        (BrokenNanReward, "reward must be a finite real number"),
        (BrokenBoolReward, "reward must be a finite real number, got bool"),
        (BrokenDictObservation, "the observation must be a str, got dict"),
        (BrokenResetObservation, "reset(): the observation must be a str, got NoneType"),
        (BrokenResetReturnsObsOnly, "reset() must return a tuple (obs, info)"),
        (BrokenResetInfoNotDict, "reset(): info must be a dict"),
        (BrokenResetSignature, "reset() must accept the keyword argument 'options'"),
        (BrokenSampleRandomAction, "sample_random_action() must return a str"),
        (BrokenClose, "a second close() raised"),
        (BrokenAllowsStepAfterDone, "step after the end of the episode: terminated must"),
    ],
    ids=lambda value: value.__name__ if isinstance(value, type) else "",
)
def test_checker_rejects_env_that_breaks_one_rule(env_class, message):
    with pytest.raises(CheckError, match=re.escape(message)):
        check_env(env_class())


def test_a_step_that_returns_four_values_is_rejected_by_the_env_contract_itself():
    with pytest.raises(TypeError, match=re.escape("must return (obs, reward, terminated, trunc")):
        check_env(BrokenFourTupleStep())


def test_checker_rejects_step_before_reset_that_does_not_raise():
    env = BrokenUnenforcedStep()
    env.spec = xpgym.EnvSpec("test:Unenforced-v0", BrokenUnenforcedStep)  # fresh copies
    with pytest.raises(CheckError, match=re.escape("before reset() must raise ResetNeeded")):
        check_env(env)


def test_checker_rejects_step_after_the_end_that_does_not_raise():
    with pytest.raises(CheckError, match="after the episode ended must raise EpisodeFinished"):
        check_env(BrokenUnenforcedStep())


def test_checker_rejects_non_str_action_that_does_not_raise():
    class AcceptsAnything(ToyEnv):
        allows_step_after_done = True  # get past the end-of-episode check

    def step_anything(self: Env, action: Any):
        return ToyEnv.step.__wrapped__(self, str(action))  # type: ignore[attr-defined]

    AcceptsAnything.step = step_anything  # type: ignore[method-assign]
    with pytest.raises(CheckError, match=re.escape("step(None) must raise TypeError")):
        check_env(AcceptsAnything())


def test_failure_message_names_the_env_and_the_difference():
    with pytest.raises(CheckError) as excinfo:
        check_env(BrokenUnseeded())
    message = str(excinfo.value)
    assert message.startswith("check_env(<BrokenUnseeded>)")
    assert "at entry 0 (reset), observation: expected 'start entropy=" in message
