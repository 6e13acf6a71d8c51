"""Play episodes with OpenEnv's own `GenericEnvClient`, unchanged (run in the openenv side venv).

Reads a JSON job on stdin: ``{"url": <server url>, "token": <str or null>, "episodes":
[{"env_id", "seed", "actions": [...]}, ...]}``. For each episode it connects to
``<url>/openenv/<env id>``, resets with the seed, steps ``{"message": action}`` until
``done`` or the actions run out, reads the state and closes. Writes one JSON line to stdout:
``{"episodes": [{"results": [{observation, reward, done, metadata}, ...], "state": {...}}]}``,
or ``{"error": "<type>: <message>"}`` if the client raised (e.g. a refused handshake).

Imports only OpenEnv (this venv has no xpgym).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from openenv.core.generic_client import GenericEnvClient


def play(url: str, token: str | None, episode: dict[str, Any]) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    client = GenericEnvClient(base_url=f"{url}/openenv/{episode['env_id']}", headers=headers)
    with client.sync() as env:
        results = [env.reset(seed=episode["seed"])]
        for action in episode["actions"]:
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
    try:
        episodes = [play(job["url"], job.get("token"), e) for e in job["episodes"]]
    except Exception as exc:  # the test asserts on the client's error
        sys.stdout.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
        return
    sys.stdout.write(json.dumps({"episodes": episodes}) + "\n")


if __name__ == "__main__":
    main()
