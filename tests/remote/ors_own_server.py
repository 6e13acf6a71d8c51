"""A small env on ors-sdk's own classes (`ors.Environment`, `@ors.tool`), served by ors-sdk's
own `ors.Server` app under uvicorn (the test of `xpgym.remote.ors_client` runs it as a
subprocess).

Usage: ``python ors_own_server.py``. It binds 127.0.0.1 on a free port, prints ``port <n>``
on stdout, then serves the env ``multiply`` until killed. Each tool call it begins is
announced on stdout (``call <tool>``), so a test can kill it in the middle of one.

``multiply``: the task is ``{"a": int, "b": int}`` ("What is a times b?"); tools ``add``
(x + y, reward 0), ``submit`` (ends the episode: reward 1.0 if the answer is a * b, else
0.0), ``crash`` (raises on the server) and ``sleep`` (sleeps for a minute). Splits: ``train``
(5 tasks) and ``test`` (2 tasks).
"""

from __future__ import annotations

import socket
import time
from typing import Any

import uvicorn
from ors import Environment, Server, TextBlock, ToolOutput, tool
from pydantic import BaseModel

TASKS = {
    "train": [{"a": a, "b": b} for a, b in ((2, 3), (4, 5), (6, 7), (3, 9), (8, 8))],
    "test": [{"a": 11, "b": 12}, {"a": 13, "b": 7}],
}


class AddInput(BaseModel):
    x: int
    y: int


class SubmitInput(BaseModel):
    answer: int


class Multiply(Environment):
    def __init__(self, task_spec: Any = {}, secrets: dict[str, str] = {}) -> None:  # noqa: B006
        super().__init__(task_spec=task_spec, secrets=secrets)

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"What is {self.task_spec['a']} times {self.task_spec['b']}?")]

    @classmethod
    def list_splits(cls) -> list[str]:
        return list(TASKS)

    @classmethod
    def list_tasks(cls, split: str) -> list[dict[str, int]]:
        return TASKS[split]

    @tool
    def add(self, params: AddInput) -> ToolOutput:
        """Add two integers."""
        print("call add", flush=True)
        return ToolOutput(blocks=[TextBlock(text=str(params.x + params.y))])

    @tool
    def submit(self, params: SubmitInput) -> ToolOutput:
        """Submit the product; this ends the episode."""
        print("call submit", flush=True)
        right = params.answer == self.task_spec["a"] * self.task_spec["b"]
        text = "Correct." if right else "Wrong."
        return ToolOutput(
            blocks=[TextBlock(text=text)],
            reward=1.0 if right else 0.0,
            finished=True,
            metadata={"right": right},
        )

    @tool
    def crash(self) -> ToolOutput:
        """Fail on purpose."""
        print("call crash", flush=True)
        raise RuntimeError("the multiply env crashed on purpose")

    @tool
    def sleep(self) -> ToolOutput:
        """Sleep for a minute."""
        print("call sleep", flush=True)
        time.sleep(60)
        return ToolOutput(blocks=[TextBlock(text="slept")])


def main() -> None:
    app = Server([Multiply]).app
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # clients queue from now on, before uvicorn accepts
    print(f"port {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
