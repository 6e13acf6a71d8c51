"""Fakes shared by the policy and eval tests: a scripted chat completions server on
127.0.0.1 and an object that answers like ``vllm.LLM``."""

from __future__ import annotations

import json
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """What the scripted server answers: status, JSON (or raw bytes), headers, delay."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def completion(text: str, finish_reason: str = "stop", logprobs: list[float] | None = None):
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": finish_reason,
    }
    if logprobs is not None:
        choice["logprobs"] = {
            "content": [{"token": "t", "logprob": x, "top_logprobs": []} for x in logprobs]
        }
    return {"id": "c", "object": "chat.completion", "choices": [choice]}


class ChatServer:
    """A chat completions endpoint on 127.0.0.1 whose replies come from `responder`.

    `responder(body, attempt)` gets the request JSON and the 0-based count of requests
    seen so far and returns a `Reply`. Every request is recorded in `requests` as
    ``(path, headers, body)``.
    """

    def __init__(self, responder: Callable[[dict, int], Reply]) -> None:
        self.responder = responder
        self.requests: list[tuple[str, dict[str, str], dict]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                body = json.loads(raw)
                with server._lock:
                    attempt = len(server.requests)
                    server.requests.append((self.path, dict(self.headers), body))
                reply = server.responder(body, attempt)
                time.sleep(reply.delay)
                data = (
                    reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                )
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (timeout test)
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeSamplingParams:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


class FakeLLM:
    """Answers like ``vllm.LLM.generate``: one `RequestOutput`-shaped object per prompt."""

    def __init__(
        self,
        tokenizer: Any,
        finish_reason: Callable[[int], str | None] = lambda k: "length" if k % 2 else "stop",
    ) -> None:
        self.tokenizer = tokenizer
        self.finish_reason = finish_reason  # prompt index -> RequestOutput finish_reason
        self.calls: list[tuple[list, list]] = []

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def generate(self, prompts, sampling_params, use_tqdm):
        assert use_tqdm is False
        self.calls.append((prompts, sampling_params))
        outputs = []
        for k, prompt in enumerate(prompts):
            tokens = [97 + k, 98, self.tokenizer.eos_token_id] if k % 2 == 0 else [99, 100]
            logprobs = [
                {t: types.SimpleNamespace(logprob=-0.25 * (j + 1)), 5: None}
                for j, t in enumerate(tokens)
            ]
            completion = types.SimpleNamespace(
                text=self.tokenizer.decode(tokens, skip_special_tokens=True),
                token_ids=tuple(tokens),
                logprobs=logprobs,
                finish_reason=self.finish_reason(k),
            )
            outputs.append(
                types.SimpleNamespace(
                    prompt_token_ids=prompt["prompt_token_ids"], outputs=[completion]
                )
            )
        return outputs
