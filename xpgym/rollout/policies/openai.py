"""`OpenAIPolicy`: any OpenAI-compatible chat completions endpoint, over plain HTTP.

Works with the OpenAI API and with servers that speak its protocol (vLLM ``vllm serve``,
SGLang, llama.cpp, TGI, ...). Standard library only (`http.client`); nothing is imported
from the ``openai`` package.

Request, one per prompt: ``POST {base_url}/chat/completions`` with headers
``Content-Type: application/json`` and, when the API key variable is set,
``Authorization: Bearer <key>``, and the JSON body::

    {"model": model, "messages": [...], "max_tokens": max_new_tokens,
     "temperature": temperature, "top_p": top_p, "n": 1,
     "logprobs": true,            # only with logprobs=True
     **extra_body}                # e.g. {"top_k": 20} for vLLM, or a different token field

Response (HTTP 200), the fields read::

    {"choices": [{"message": {"content": "..."},            # null content reads as ""
                  "finish_reason": "stop" | "length" | ...,  # "length" -> "length",
                                                             # anything else -> "stop"
                  "logprobs": {"content": [{"logprob": -0.1, ...}, ...]}}]}  # optional

`Generation.token_ids` and `prompt_ids` are `None` (chat APIs return no ids); `logprobs` is
the list of ``logprob`` values when requested and returned, else `None`. What they mean is
up to the server (OpenAI: the sampled token under the model's distribution; vLLM: see its
``logprobs_mode``).

Errors and retries:

* HTTP 429 and 5xx (and 408, 409, as the ``openai`` SDK does), connection errors and
  timeouts are retried up to `max_retries` times, waiting ``min(backoff_max, backoff_base *
  2**attempt)`` seconds scaled by a random factor in ``[0.5, 1]`` (or the server's
  ``Retry-After``, if longer, capped at `backoff_max`).
  After the last attempt, `PolicyError` names the last failure.
* HTTP 400 whose body mentions the context length (``context_length_exceeded``, "maximum
  context length") raises `ContextLengthError` at once (the collector ends that episode as
  truncated); any other 4xx raises `PolicyError` at once, with the start of the body.
* An HTTP 200 whose body is not JSON or lacks ``choices[0].message`` ("malformed response":
  a proxy's error page, a body cut short) is retried like a 5xx; after the last attempt
  `PolicyError` names it.

`timeout` bounds each socket operation (connect, each read), not the whole request.

The API key is read from the environment variable `api_key_env` when the policy is built. It
is sent only in the ``Authorization`` header and never logged, put in an error message or in
``repr``.

Concurrency: `submit` runs requests on a thread pool of `max_concurrency` threads, one new
connection per request; `generate` submits all prompts and waits for all. Call `close` (or
use the policy as a context manager) to stop the pool.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import random
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from xpgym.core.chat import Message, Prompt
from xpgym.rollout.policies import ContextLengthError, FinishReason, Generation, PolicyError

__all__ = ["OpenAIPolicy"]

logger = logging.getLogger(__name__)

_RETRY_STATUS = frozenset({408, 409, 429})  # plus every 5xx
_CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "context length")


class _RetryableError(Exception):
    """A failure worth another attempt; carries the server's Retry-After, if any."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class OpenAIPolicy:
    """Chat completions over HTTP; see the module docstring for the protocol and errors.

    Args:
        model: The ``model`` field of each request.
        base_url: API root, e.g. ``"http://127.0.0.1:8000/v1"``; ``/chat/completions`` is
            appended.
        api_key_env: Environment variable holding the API key (unset: no auth header).
        max_new_tokens: ``max_tokens`` of each request (the per-turn budget).
        temperature: Sampling temperature.
        top_p: Nucleus sampling mass.
        logprobs: Ask for the sampled tokens' log-probabilities.
        extra_body: More JSON fields for every request (they win over the above). Beware of
            a fixed ``seed``: every episode of a GRPO group would then get the same answers.
        max_concurrency: Requests in flight at once (threads).
        timeout: Seconds per socket operation.
        max_retries: Retries after the first attempt for retryable failures.
        backoff_base: First backoff, in seconds; doubles with every retry.
        backoff_max: Longest wait between attempts, in seconds.

    Attributes:
        tokenizer: Always `None`: the collector sends chat messages (``"messages"`` mode).
    """

    tokenizer: Any = None

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key_env: str = "OPENAI_API_KEY",
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        logprobs: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        max_concurrency: int = 8,
        timeout: float = 60.0,
        max_retries: int = 5,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
    ) -> None:
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if max_concurrency < 1 or max_retries < 0 or timeout <= 0 or max_new_tokens < 1:
            raise ValueError(
                "need max_concurrency >= 1, max_retries >= 0, timeout > 0, max_new_tokens >= 1; "
                f"got {max_concurrency=}, {max_retries=}, {timeout=}, {max_new_tokens=}"
            )
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self._scheme, self._host, self._port = url.scheme, url.hostname, url.port
        self._path = url.path.rstrip("/") + "/chat/completions"
        self.api_key_env = api_key_env
        self._api_key = os.environ.get(api_key_env) or None
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.logprobs = bool(logprobs)
        self.extra_body = dict(extra_body or {})
        self.max_concurrency = int(max_concurrency)
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self._jitter = random.Random()  # a private stream: never the global `random` state
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    # -- Policy / ConcurrentPolicy -------------------------------------------------------
    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        """One `Generation` per prompt, in order; requests run concurrently."""
        futures = [self.submit(prompt) for prompt in prompts]
        try:
            return [future.result() for future in futures]
        finally:
            for future in futures:
                future.cancel()

    def submit(self, prompt: Prompt) -> Future[Generation]:
        """Start one request; the future holds its `Generation` or its error.

        Raises:
            TypeError: `prompt` is token ids (chat APIs take text or messages) or malformed.
        """
        messages = _as_chat(prompt)
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self.max_concurrency, thread_name_prefix="xpgym-openai"
                )
            return self._executor.submit(self.complete, messages)

    def complete(self, messages: list[Message]) -> Generation:
        """Send one chat completions request, with retries; return its `Generation`."""
        body = json.dumps(self._payload(messages)).encode("utf-8")
        last_error = ""
        for attempt in range(self.max_retries + 1):
            try:
                return self._attempt(body)
            except _RetryableError as exc:
                last_error = str(exc)
                if attempt == self.max_retries:
                    break
                delay = self._backoff(attempt, exc.retry_after)
                logger.warning(
                    "%s: %s; retry %d/%d in %.2fs",
                    self.url,
                    exc,
                    attempt + 1,
                    self.max_retries,
                    delay,
                )
                time.sleep(delay)
        raise PolicyError(
            f"chat completions request to {self.url} failed after {self.max_retries + 1} "
            f"attempts; last error: {last_error}"
        )

    def close(self) -> None:
        """Stop the request threads (waits for requests in flight). Safe to call twice."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> OpenAIPolicy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        key = f"${self.api_key_env} set" if self._api_key else f"${self.api_key_env} unset"
        return f"OpenAIPolicy({self.model!r}, base_url={self.base_url!r}, {key})"

    # -- one request ---------------------------------------------------------------------
    def _payload(self, messages: list[Message]) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "n": 1,
        }
        if self.logprobs:
            payload["logprobs"] = True
        payload.update(self.extra_body)
        return payload

    def _attempt(self, body: bytes) -> Generation:
        """One HTTP exchange. Raises `_RetryableError`, `ContextLengthError` or `PolicyError`."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        connection_class = (
            http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        )
        connection = connection_class(self._host, self._port, timeout=self.timeout)
        try:
            connection.request("POST", self._path, body=body, headers=headers)
            response = connection.getresponse()
            status, retry_after, data = (
                response.status,
                response.getheader("Retry-After"),
                response.read(),
            )
        except TimeoutError as exc:  # socket.timeout is TimeoutError since Python 3.10
            raise _RetryableError(f"timed out after {self.timeout}s ({exc})") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise _RetryableError(f"connection error: {type(exc).__name__}: {exc}") from exc
        finally:
            connection.close()
        if status == 200:
            return self._parse(data)
        text = data.decode("utf-8", errors="replace")
        excerpt = text[:300]
        if status in _RETRY_STATUS or status >= 500:
            raise _RetryableError(f"HTTP {status}: {excerpt}", _seconds(retry_after))
        if status == 400 and any(marker in text.lower() for marker in _CONTEXT_MARKERS):
            raise ContextLengthError(f"{self.url} rejected the prompt as too long: {excerpt}")
        raise PolicyError(f"HTTP {status} from {self.url}: {excerpt}")

    def _parse(self, data: bytes) -> Generation:
        try:
            response = json.loads(data)
            choice = response["choices"][0]
            message = choice["message"]
            content = message.get("content")
            if content is not None and not isinstance(content, str):
                raise TypeError(f"message.content is {type(content).__name__}, not a string")
            logprobs = None
            if self.logprobs and isinstance(choice.get("logprobs"), dict):
                entries = choice["logprobs"].get("content")
                if entries is not None:
                    logprobs = [float(entry["logprob"]) for entry in entries]
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise _RetryableError(
                f"malformed response from {self.url} ({type(exc).__name__}: {exc}); "
                f"expected chat completions JSON with choices[0].message, got "
                f"{data[:200].decode('utf-8', errors='replace')!r}"
            ) from exc
        finish: FinishReason = "length" if choice.get("finish_reason") == "length" else "stop"
        return Generation(text=content or "", finish_reason=finish, logprobs=logprobs)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        delay = min(self.backoff_max, self.backoff_base * 2**attempt)
        delay *= 0.5 + 0.5 * self._jitter.random()
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max))
        return delay


def _seconds(retry_after: str | None) -> float | None:
    """A ``Retry-After`` header in seconds (HTTP dates are ignored)."""
    if retry_after is None:
        return None
    try:
        return max(float(retry_after), 0.0)
    except ValueError:
        return None


def _as_chat(prompt: Prompt) -> list[Message]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, (list, tuple)):
        messages = [m for m in prompt if isinstance(m, Mapping) and "role" in m]
        if messages and len(messages) == len(prompt):
            return [dict(m) for m in messages]
    raise TypeError(
        "OpenAIPolicy takes text or chat messages (a chat completions API does not take token "
        f"ids), got {prompt!r:.80}"
    )
