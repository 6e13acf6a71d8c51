"""A small env on OpenEnv's own base classes, served by OpenEnv's own `create_app` (the test of
`xpgym.remote.openenv_client` runs it as a subprocess with the openenv side venv's python).

Usage: ``python openenv_own_server.py``. It binds 127.0.0.1 on a free port, prints ``port <n>``
on stdout, then serves two envs until killed, each under its own path: OpenEnv clients use
``http://127.0.0.1:<n>/guess`` and ``http://127.0.0.1:<n>/grid`` as base URLs. Each step it
begins is announced on stdout (``step <action JSON>``), so a test can kill it in the middle of
one.

* ``guess``: a text env whose action model has one string field, ``message``. The number is
  1..8, drawn from the reset seed; each guess is answered "higher" or "lower"; a right guess
  ends the episode with reward 1.0, a fourth wrong one with 0.0. ``crash`` makes the step
  raise, ``sleep`` makes it sleep for a minute.
* ``grid``: an action model with two integer fields, ``dx`` and ``dy``: walk from (0, 0) to
  (2, 1); every step costs -0.1, the goal gives 1.0 and ends the episode.
"""

from __future__ import annotations

import random
import socket
import time
from typing import Any

import uvicorn
from fastapi import FastAPI
from openenv.core.env_server import Action, Environment, Observation, State, create_app


class GuessAction(Action):
    message: str


class GuessObservation(Observation):
    prompt: str


class GuessState(State):
    target: int = 0


class GuessEnv(Environment[GuessAction, GuessObservation, GuessState]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = GuessState()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GuessObservation:
        target = random.Random(seed).randint(1, 8)
        self._state = GuessState(episode_id=episode_id, step_count=0, target=target)
        return GuessObservation(prompt="Guess my number, from 1 to 8.", reward=0.0)

    def step(
        self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any
    ) -> GuessObservation:
        print(f"step {action.model_dump_json()}", flush=True)
        if action.message == "crash":
            raise RuntimeError("the guess env crashed on purpose")
        if action.message == "sleep":
            time.sleep(60)
        self._state.step_count += 1
        try:
            guess = int(action.message.strip())
        except ValueError:
            return GuessObservation(prompt="Say a number.", reward=0.0)
        if guess == self._state.target:
            return GuessObservation(prompt="Right!", reward=1.0, done=True)
        hint = "higher" if guess < self._state.target else "lower"
        done = self._state.step_count >= 4
        return GuessObservation(prompt=hint, reward=0.0, done=done)

    @property
    def state(self) -> GuessState:
        return self._state


class MoveAction(Action):
    dx: int
    dy: int


class GridObservation(Observation):
    x: int
    y: int


class GridEnv(Environment[MoveAction, GridObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()
        self._pos = (0, 0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GridObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        self._pos = (0, 0)
        return GridObservation(x=0, y=0)

    def step(
        self, action: MoveAction, timeout_s: float | None = None, **kwargs: Any
    ) -> GridObservation:
        print(f"step {action.model_dump_json()}", flush=True)
        self._state.step_count += 1
        self._pos = (self._pos[0] + action.dx, self._pos[1] + action.dy)
        done = self._pos == (2, 1)
        return GridObservation(
            x=self._pos[0], y=self._pos[1], reward=1.0 if done else -0.1, done=done
        )

    @property
    def state(self) -> State:
        return self._state


ENVS = {
    "guess": (GuessEnv, GuessAction, GuessObservation, GuessState),
    "grid": (GridEnv, MoveAction, GridObservation, State),
}


def main() -> None:
    app = FastAPI()
    for name, (env, action_cls, observation_cls, state_cls) in ENVS.items():
        served = create_app(
            env, action_cls, observation_cls, max_concurrent_envs=4, state_cls=state_cls
        )
        app.mount(f"/{name}", served)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # clients queue from now on, before uvicorn accepts
    print(f"port {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", ws_ping_interval=None)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
