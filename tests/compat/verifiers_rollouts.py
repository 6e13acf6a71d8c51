"""Play xpgym episodes with verifiers' own rollout machinery; print what happened as JSON.

Run by tests/compat/test_verifiers.py with the Python of the verifiers side venv
(`interop_venvs.side_python("verifiers")`) and ``PYTHONPATH=<repository>:<repository>/tests``:

    python tests/compat/verifiers_rollouts.py '<json spec>'

The spec: ``env_id`` and ``make_kwargs`` of the env inside the counting wrapper below (a
``turn_limit`` among them wraps it in `MaxTurns`), ``seeds``, ``model``, ``max_tokens``,
optional ``max_turns`` and ``system_prompt``, and either ``base_url`` (an OpenAI-compatible
endpoint, e.g. ``vllm serve``) or ``"scripted": true``: then the endpoint is
`scripted_endpoint`, an OpenAI-compatible server on loopback whose reply depends on the model
name (``"count"``: the number of assistant messages so far, as text, so the k-th reply is
``str(k)``; anything else: the model name itself).

The episodes run concurrently (``asyncio.gather`` over `Env.run_slot`, inside
`Env.serving`), as verifiers' eval runner plays them. Every env the run makes is wrapped in
`Counted`, so the output says how many were made and whether each was closed.
"""

from __future__ import annotations

import asyncio
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

import xpgym
from xpgym.compat.verifiers import load_environment
from xpgym.core.env import Env, Wrapper
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
    (trace,) = episode.traces
    return {
        "seed": episode.task.data.seed,
        "ok": episode.ok,
        "trace_ok": trace.ok,
        "errors": [f"{e.type}: {e.message}" for e in [*episode.errors, *trace.errors]],
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


def main() -> None:
    spec = json.loads(sys.argv[1])
    xpgym.register(COUNTED_ID, counted)
    xpgym.register("toy:Guess-v0", "toy_envs:ToyEnv", episode_length=10)
    if spec.get("scripted"):
        with scripted_endpoint() as base_url:
            episodes = asyncio.run(_play(spec, base_url))
    else:
        episodes = asyncio.run(_play(spec, spec["base_url"]))
    result = {
        "episodes": episodes,
        "closes": [env.closes for env in MADE],
        "max_tokens_sent": sorted({body.get("max_tokens") for body in REQUESTS}, key=str),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
