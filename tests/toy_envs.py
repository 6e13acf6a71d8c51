"""Small deterministic envs shared by the tests (importable as `toy_envs`, picklable).

`ToyEnv` is a guess-the-digit game whose rules are simple enough to re-implement in a test:

* `reset(seed)` draws `secret` in 0..9 from `np_random`; observation ``"start parity=<p>"``
  where `p = secret % 2`.
* `step(a)`: turn += 1; correct if ``a.strip() == str(secret)``; reward 1.0 if correct else
  ``-0.1``; `terminated` if correct or ``turn >= episode_length``; observation
  ``"turn=<turn> last=<a>"``; info ``{"turn": turn, "correct": correct}``.
* Special actions for failure tests: ``"raise"`` raises `RuntimeError`, ``"sleep:<s>"``
  sleeps `s` seconds before stepping normally.

`MeetingEnv` adds ``"meet"``, which waits at a shared barrier first: for concurrency tests.
`HostMeetingEnv` is a `MeetingEnv` whose barrier is made where the env is built (a worker
process, a Ray actor), shared by the sub-envs built there.
`AnnouncingEnv` prints each step as it begins: for tests that host it in another process.
`rewarded_toy_env` is a `ToyEnv` in a `RewardWrapper` whose reward function `action_chars`
reports a metric: for the tests that follow metrics from a reward into trainers' logs.
`ListingToyEnv` lists its admissible actions (the digits not guessed yet).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from hang_guard import HANG_GUARD_S

from xpgym.core.env import Env
from xpgym.core.wrappers import RewardWrapper


class ToyEnv(Env[str]):
    def __init__(self, episode_length: int = 3) -> None:
        self.episode_length = episode_length
        self.secret = 0
        self.turn = 0
        self.closed = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.secret = int(self.np_random.integers(0, 10))
        self.turn = 0
        return f"start parity={self.secret % 2}", {"secret_parity": self.secret % 2}

    def step(self, action: str):
        if action == "raise":
            raise RuntimeError("toy failure")
        if action.startswith("sleep:"):
            time.sleep(float(action.split(":", 1)[1]))
        self.turn += 1
        correct = action.strip() == str(self.secret)
        terminated = correct or self.turn >= self.episode_length
        reward = 1.0 if correct else -0.1
        return (
            f"turn={self.turn} last={action}",
            reward,
            terminated,
            False,
            {
                "turn": self.turn,
                "correct": correct,
            },
        )

    def sample_random_action(self) -> str:
        return str(int(self.np_random.integers(0, 10)))

    def get_state(self) -> dict[str, Any]:
        return {
            "secret": self.secret,
            "turn": self.turn,
            "rng": self.np_random.bit_generator.state,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.secret = state["secret"]
        self.turn = state["turn"]
        self.np_random.bit_generator.state = state["rng"]

    def close(self) -> None:
        self.closed += 1


class MeetingEnv(ToyEnv):
    """`ToyEnv` whose action ``"meet"`` waits at `barrier` before stepping normally.

    Steps that meet can only finish once as many of them are in flight at the same time as
    the barrier has parties: a test shows concurrency by their finishing, not by a clock.
    Give the barrier a timeout (a broken barrier raises in ``step``). In-process only: a
    barrier does not cross to another process.
    """

    def __init__(self, barrier: threading.Barrier, episode_length: int = 3) -> None:
        super().__init__(episode_length)
        self.barrier = barrier

    def step(self, action: str):
        if action == "meet":
            self.barrier.wait()
        return super().step(action)


_host_barriers: dict[tuple[str, int], threading.Barrier] = {}
_host_barriers_lock = threading.Lock()


def host_barrier(name: str, parties: int) -> threading.Barrier:
    """This process's barrier `name` for `parties` threads, made at first use (with a
    `HANG_GUARD_S` timeout): every env built in one process with the same name shares it."""
    with _host_barriers_lock:
        key = (name, parties)
        if key not in _host_barriers:
            _host_barriers[key] = threading.Barrier(parties, timeout=HANG_GUARD_S)
        return _host_barriers[key]


class HostMeetingEnv(MeetingEnv):
    """`MeetingEnv` meeting at ``host_barrier(name, parties)`` of the process that built it:
    picklable (``functools.partial(HostMeetingEnv, name, parties)``), so sub-envs of one
    worker process or Ray actor can show that they step at the same time."""

    def __init__(self, name: str, parties: int, episode_length: int = 10) -> None:
        super().__init__(host_barrier(name, parties), episode_length)


class AnnouncingEnv(ToyEnv):
    """`ToyEnv` that prints ``step <action>`` to stdout (flushed) as each step begins, so a
    test hosting it in another process can read that a step is in flight."""

    def step(self, action: str):
        print(f"step {action}", flush=True)
        return super().step(action)


def action_chars(action: str) -> dict[str, float]:
    """A reward function with a metric: reward 0.0, metric ``chars``, the action's length."""
    return {"reward": 0.0, "chars": float(len(action))}


def rewarded_toy_env(episode_length: int = 3) -> Env:
    """``RewardWrapper(ToyEnv(episode_length), [action_chars])``: each step's
    ``info["metrics"]`` has ``action_chars`` (0.0) and ``action_chars/chars``."""
    return RewardWrapper(ToyEnv(episode_length), [action_chars])


class ListingToyEnv(ToyEnv):
    """`ToyEnv` that lists its admissible actions (`available_actions`): the digits not
    guessed yet this episode, in order."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.guessed: set[str] = set()
        return super().reset(seed=seed, options=options)

    def step(self, action: str):
        self.guessed.add(action.strip())
        return super().step(action)

    def available_actions(self) -> list[str]:
        return [digit for digit in "0123456789" if digit not in self.guessed]
