"""Play xpgym episodes with verifiers' own rollout machinery; print what happened as JSON.

Run by tests/compat/test_verifiers.py with the Python of the verifiers side venv
(`interop_venvs.side_python("verifiers")`) and ``PYTHONPATH=<repository>:<repository>/tests``:

    python tests/compat/verifiers_rollouts.py '{"<run name>": <spec>, ...}'

It plays the runs one after the other and prints ``{"<run name>": <result>, ...}``. A spec:
``env_id`` and ``make_kwargs`` of the env inside the counting wrapper below (a ``turn_limit``
among them wraps it in `MaxTurns`), ``seeds``, ``model``, ``max_tokens``, optional
``max_turns`` and ``system_prompt``, and either ``base_url`` (an OpenAI-compatible endpoint,
e.g. ``vllm serve``) or ``"scripted": true``: then the endpoint is `scripted_endpoint`, an
OpenAI-compatible server on loopback whose reply depends on the model name (``"count"``: the
number of assistant messages so far, as text, so the k-th reply is ``str(k)``; anything else:
the model name itself).

A run's episodes run concurrently (``asyncio.gather`` over `Env.run_slot`, inside
`Env.serving`), as verifiers' eval runner plays them. Every env a run makes is wrapped in
`Counted`, so its result says how many were made and whether each was closed, and which
``max_tokens`` the scripted endpoint was sent.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
import verifiers.v1 as vf
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from toy_envs import ToyEnv

import xpgym
from xpgym.compat.verifiers import load_environment
from xpgym.core.env import Env, Wrapper
from xpgym.core.errors import INFRA_ERROR_KEY, InfraCause
from xpgym.core.wrappers import MaxTurns

COUNTED_ID = "counted:Env-v0"
MADE: list[Counted] = []
REQUESTS: list[dict[str, Any]] = []


class Counted(Wrapper[str]):
    """Records itself when made and counts its `close` calls."""

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self.closes = 0
        MADE.append(self)

    def close(self) -> None:
        self.closes += 1
        super().close()


class DriftingToyEnv(ToyEnv):
    """A `ToyEnv` whose first observation counts the resets of the process: not the same
    for the same seed twice."""

    resets = itertools.count()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(seed=seed, options=options)
        return f"{observation} reset={next(self.resets)}", info


class MarkingToyEnv(ToyEnv):
    """A `ToyEnv` whose step on the action ``"marker"`` reports a grader timeout in its info
    (`xpgym.core.errors`' marker) instead of raising."""

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = super().step(action)
        if action == "marker":
            info[INFRA_ERROR_KEY] = InfraCause("grader_timeout", "no verdict in 1 s").to_dict()
        return observation, reward, terminated, truncated, info


def counted(inner: str, turn_limit: int | None = None, **kwargs: Any) -> Counted:
    """`inner` made with `kwargs`, in `MaxTurns` when `turn_limit` is given, counted."""
    env = xpgym.make(inner, **kwargs)
    return Counted(env if turn_limit is None else MaxTurns(env, turn_limit))


async def _chat(request: Request) -> JSONResponse:
    body = await request.json()
    REQUESTS.append(body)
    model = body["model"]
    turn = sum(message["role"] == "assistant" for message in body["messages"])
    text = str(turn) if model == "count" else model
    return JSONResponse(
        {
            "id": f"scripted-{len(REQUESTS)}",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": text},
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    )


@contextmanager
def scripted_endpoint() -> Iterator[str]:
    """The base URL of the scripted OpenAI-compatible server, on a free loopback port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = Starlette(routes=[Route("/v1/chat/completions", _chat, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the scripted endpoint did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _episode(episode: vf.Episode) -> dict[str, Any]:
    """The episode as JSON; with no trace (the env failed before the model's interaction
    opened) only its seed, verdict and errors."""
    record: dict[str, Any] = {
        "seed": episode.task.data.seed,
        "ok": episode.ok,
        "errors": [f"{e.type}: {e.message}" for e in episode.errors],
    }
    if not episode.traces:
        return record
    (trace,) = episode.traces
    record["errors"] += [f"{e.type}: {e.message}" for e in trace.errors]
    return record | {
        "trace_ok": trace.ok,
        "stop_condition": trace.stop_condition,
        "reward": trace.reward,
        "rewards": {name: r.score for name, r in trace.rewards.items() if r is not None},
        "xpgym": trace.info.get("xpgym"),
        "messages": [
            {"role": m.role, "content": m.content}
            for m in (trace.branches[-1].messages if trace.branches else [])
        ],
    }


async def _play(spec: dict[str, Any], base_url: str) -> list[dict[str, Any]]:
    env = load_environment(
        COUNTED_ID,
        seeds=spec["seeds"],
        system_prompt=spec.get("system_prompt"),
        max_turns=spec.get("max_turns"),
        make_kwargs={"inner": spec["env_id"], **spec.get("make_kwargs", {})},
    )
    os.environ["XPGYM_TEST_KEY"] = "unused"
    ctx = vf.ModelContext(
        model=spec["model"],
        client=vf.EvalClientConfig(base_url=base_url, api_key_var="XPGYM_TEST_KEY"),
        sampling=vf.SamplingConfig(max_tokens=spec["max_tokens"], temperature=0.0),
    )
    async with env.serving():
        slots = [slot for task in env.taskset for slot in env.slots(task, 1)]
        episodes = await asyncio.gather(*(env.run_slot(slot, ctx) for slot in slots))
    return [_episode(episode) for episode in episodes]


def _run(spec: dict[str, Any], scripted_url: str) -> dict[str, Any]:
    MADE.clear()
    REQUESTS.clear()
    base_url = scripted_url if spec.get("scripted") else spec["base_url"]
    episodes = asyncio.run(_play(spec, base_url))
    return {
        "episodes": episodes,
        "closes": [env.closes for env in MADE],
        "max_tokens_sent": sorted({body.get("max_tokens") for body in REQUESTS}, key=str),
    }


def main() -> None:
    specs = json.loads(sys.argv[1])
    xpgym.register(COUNTED_ID, counted)
    xpgym.register("toy:Guess-v0", "toy_envs:ToyEnv", episode_length=10)
    xpgym.register("toy:Drifting-v0", DriftingToyEnv, episode_length=10)
    xpgym.register("toy:Marking-v0", MarkingToyEnv, episode_length=10)
    with scripted_endpoint() as scripted_url:
        results = {name: _run(spec, scripted_url) for name, spec in specs.items()}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
