"""Policy adapters for evaluation: every policy the runner uses is a `ConcurrentPolicy`.

The runner plays each episode in its own worker thread (so one failing request fails one
episode, and each finished episode is written at once). These adapters give every policy
the ``submit`` method that needs:

* `BatchingPolicy` turns a batched policy (`HFPolicy`, `VLLMPolicy`) into a concurrent one:
  ``submit`` may be called from any thread; a background thread gathers the prompts waiting
  at that moment into one ``generate`` call, so episodes played in different threads still
  share batches.
* `TimedPolicy` forwards to a concurrent policy and records how long each request took.
* `RandomPolicy` answers with an env's ``sample_random_action`` (no model).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from xpgym.core.chat import Prompt
from xpgym.rollout.policies import ConcurrentPolicy, Generation, Policy, PolicyError

__all__ = ["BatchingPolicy", "RandomPolicy", "TimedPolicy", "generate_via_submit"]

logger = logging.getLogger(__name__)


def generate_via_submit(policy: ConcurrentPolicy, prompts: Sequence[Prompt]) -> list[Generation]:
    """``policy.submit`` every prompt, then wait for all: the `Policy.generate` contract."""
    futures = [policy.submit(prompt) for prompt in prompts]
    return [future.result() for future in futures]


class BatchingPolicy:
    """A batched `Policy` behind a thread-safe ``submit`` (dynamic batching).

    A background thread takes the first waiting prompt, then waits at most `linger` seconds
    for more, up to `max_batch` prompts, and answers them with one ``policy.generate`` call.
    If that call raises, every request of the batch gets the exception. `tokenizer` and
    `max_prompt_tokens` are the wrapped policy's, so the collector treats both alike.

    Args:
        policy: The batched policy.
        max_batch: Most prompts per ``generate`` call (the number of episodes in flight is a
            good value).
        linger: Seconds to wait for more prompts after the first one arrives.
    """

    def __init__(self, policy: Policy, max_batch: int, linger: float = 0.005) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self.policy = policy
        self.tokenizer = policy.tokenizer
        self.max_prompt_tokens = getattr(policy, "max_prompt_tokens", None)
        self.max_batch = int(max_batch)
        self.linger = float(linger)
        self._requests: queue.SimpleQueue[tuple[Prompt, Future[Generation]] | None] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        """One `Generation` per prompt, in order (batched with other threads' requests)."""
        return generate_via_submit(self, prompts)

    def submit(self, prompt: Prompt) -> Future[Generation]:
        """Queue `prompt`; the future holds its `Generation` or the batch's error."""
        future: Future[Generation] = Future()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="xpgym-eval-batcher", daemon=True
                )
                self._thread.start()
            self._requests.put((prompt, future))
        return future

    def close(self) -> None:
        """Answer the queued requests, then stop the background thread. Safe to call twice."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._requests.put(None)
        if thread is not None:
            thread.join()

    def _serve(self) -> None:
        stopping = False
        while not stopping:
            first = self._requests.get()
            if first is None:
                return
            batch = [first]
            deadline = time.monotonic() + self.linger
            while len(batch) < self.max_batch:
                try:
                    item = self._requests.get(timeout=max(deadline - time.monotonic(), 0.0))
                except queue.Empty:
                    break
                if item is None:  # close(): answer this batch, then stop
                    stopping = True
                    break
                batch.append(item)
            self._answer(batch)

    def _answer(self, batch: list[tuple[Prompt, Future[Generation]]]) -> None:
        batch = [(p, f) for p, f in batch if f.set_running_or_notify_cancel()]
        if not batch:
            return
        try:
            generations = self.policy.generate([prompt for prompt, _ in batch])
            if not isinstance(generations, list) or len(generations) != len(batch):
                raise PolicyError(
                    f"{type(self.policy).__name__}.generate answered {len(batch)} prompts with "
                    f"{generations!r:.80}"
                )
        except Exception as exc:  # every request of the batch fails, the thread goes on
            logger.debug("batch of %d prompts failed: %s", len(batch), exc)
            for _, future in batch:
                future.set_exception(exc)
            return
        for (_, future), generation in zip(batch, generations, strict=True):
            future.set_result(generation)

    def __repr__(self) -> str:
        return f"BatchingPolicy({self.policy!r}, max_batch={self.max_batch})"


class TimedPolicy:
    """Forwards to a `ConcurrentPolicy`; `seconds` gets each request's latency, in the order
    the requests finish (the order they were made, for one episode's sequential turns)."""

    def __init__(self, policy: ConcurrentPolicy) -> None:
        self.policy = policy
        self.tokenizer = policy.tokenizer
        self.max_prompt_tokens = getattr(policy, "max_prompt_tokens", None)
        self.seconds: list[float] = []

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        """One `Generation` per prompt, in order."""
        return generate_via_submit(self, prompts)

    def submit(self, prompt: Prompt) -> Future[Generation]:
        """Submit to the wrapped policy and time the request."""
        start = time.perf_counter()
        future = self.policy.submit(prompt)
        future.add_done_callback(lambda _: self.seconds.append(time.perf_counter() - start))
        return future


class RandomPolicy:
    """Answers every prompt with ``sample()``, e.g. an env's ``sample_random_action``.

    The model specs ``random`` and ``scripted``. ``sample`` is called in the thread that
    calls `generate`/`submit` (the episode's worker thread, which owns the env).
    """

    tokenizer: Any = None

    def __init__(self, sample: Callable[[], str]) -> None:
        self.sample = sample

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        """``Generation(text=sample())`` for each prompt."""
        return [Generation(text=self.sample()) for _ in prompts]

    def submit(self, prompt: Prompt) -> Future[Generation]:
        """An already completed future of ``generate([prompt])[0]``."""
        future: Future[Generation] = Future()
        future.set_result(self.generate([prompt])[0])
        return future
