"""Play episodes with OpenEnv's own `GenericEnvClient`, unchanged (run in the openenv side venv).

Reads a JSON job on stdin: ``{"url": <server url>, "plays": [{"env_id", "seed", "actions",
"token"}, ...]}``. For each play it connects to ``<url>/openenv/<env id>`` (with
``Authorization: Bearer <token>`` when the token is not null), resets with the seed, steps
``{"message": action}`` until ``done`` or the actions run out, reads the state and closes.
Writes one JSON line to stdout, a list with one entry per play: ``{"results": [{observation,
reward, done, metadata}, ...], "state": {...}}``, or ``{"error": "<type>: <message>"}`` if
the client raised (a refused handshake, an error frame).

Imports only OpenEnv (this venv has no xpgym).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from openenv.core.generic_client import GenericEnvClient


def play(url: str, job: dict[str, Any]) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {job['token']}"} if job["token"] else None
    client = GenericEnvClient(base_url=f"{url}/openenv/{job['env_id']}", headers=headers)
    with client.sync() as env:
        results = [env.reset(seed=job["seed"])]
        for action in job["actions"]:
            if results[-1].done:
                break
            results.append(env.step({"message": action}))
        state = env.state()
    return {
        "results": [
            {
                "observation": r.observation,
                "reward": r.reward,
                "done": r.done,
                "metadata": r.metadata,
            }
            for r in results
        ],
        "state": state,
    }


def main() -> None:
    job = json.load(sys.stdin)
    answers = []
    for one in job["plays"]:
        try:
            answers.append(play(job["url"], one))
        except Exception as exc:  # the test asserts on the client's error
            answers.append({"error": f"{type(exc).__name__}: {exc}"})
    sys.stdout.write(json.dumps(answers) + "\n")


if __name__ == "__main__":
    main()
