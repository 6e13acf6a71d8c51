"""OpenEnv's own server (``openenv``'s `create_app`) hosting a sleep-only env, for
``scripts/bench_sessions.py``: run it with the openenv side venv's Python
(``.venv/interop/openenv/bin/python``, scripts/setup.sh step 4).

The env is the same as xpgym's ``bench:Sleep-v0`` (scripts/bench_remote.py): every step
sleeps ``--sleep`` seconds, the episode ends after ``--turns`` steps; the action is OpenEnv's
text-game shape ``{"message": "<text>"}``. Served with OpenEnv's documented concurrency
setting: ``max_concurrent_envs=--max-sessions`` on an env marked
``SUPPORTS_CONCURRENT_SESSIONS``, under uvicorn on 127.0.0.1.

Usage::

    .venv/interop/openenv/bin/python scripts/openenv_sleep_server.py --port 8123 \\
        --max-sessions 2048 --sleep 0.1 --turns 5
"""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

import uvicorn
from openenv.core.env_server import Action, Environment, Observation, State, create_app


class MessageAction(Action):
    """The model's text."""

    message: str


class TextObservation(Observation):
    """What the env says back."""

    text: str = ""


def sleep_env_class(sleep: float, turns: int) -> type[Environment]:
    """An OpenEnv `Environment` whose steps sleep `sleep` s; done after `turns` steps."""

    class SleepEnvironment(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

        def reset(
            self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
        ) -> TextObservation:
            self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
            return TextObservation(text="start")

        def step(self, action: MessageAction, **kwargs: Any) -> TextObservation:  # type: ignore[override]
            time.sleep(sleep)
            self._state.step_count += 1
            count = self._state.step_count
            return TextObservation(text=f"turn {count}", reward=0.0, done=count >= turns)

        @property
        def state(self) -> State:
            return self._state

    return SleepEnvironment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-sessions", type=int, required=True)
    parser.add_argument("--sleep", type=float, default=0.1)
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()
    app = create_app(
        sleep_env_class(args.sleep, args.turns),
        MessageAction,
        TextObservation,
        env_name="sleep",
        max_concurrent_envs=args.max_sessions,
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", backlog=4096)


if __name__ == "__main__":
    main()
