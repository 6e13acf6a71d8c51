"""The `Policy` protocol: a batch of prompts in, one `Generation` per prompt out.

A policy is anything with a `tokenizer` attribute and a `generate` method; the rollout
collector (`xpgym.rollout.collector`) needs nothing else. Backends in this package:

* `xpgym.rollout.policies.hf.HFPolicy`: Hugging Face ``model.generate`` (batched, in-process);
* `xpgym.rollout.policies.vllm.VLLMPolicy`: the vLLM offline engine (batched, in-process);
* `xpgym.rollout.policies.openai.OpenAIPolicy`: any OpenAI-compatible chat completions
  endpoint over HTTP (concurrent: also implements `ConcurrentPolicy.submit`).

Importing this package imports neither torch, transformers nor vllm; each backend module
imports its engine lazily, when a policy is built.

Prompts (`xpgym.core.chat.Prompt`) come in three kinds; a backend says which it accepts:
token ids (used verbatim), text (tokenized without special tokens), or chat messages
(rendered with the chat template and the generation prompt); `xpgym.core.chat.encode_prompt`
turns any of them into ids.

Contract of `Policy.generate(prompts)`: returns a list of the same length, in the same order,
whose ``i``-th `Generation` answers ``prompts[i]``. It raises rather than returning fewer
generations; `ContextLengthError` says that a prompt does not fit the model's context.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from xpgym.core import chat

__all__ = [
    "ConcurrentPolicy",
    "ContextLengthError",
    "FinishReason",
    "Generation",
    "Policy",
    "PolicyError",
]


FinishReason = Literal["stop", "length"]
"""``"stop"``: the model emitted a stop token (or the backend's stop condition);
``"length"``: the per-turn token budget (``max_new_tokens``) ran out first."""


class PolicyError(RuntimeError):
    """A policy could not produce a generation (after retries, for remote backends)."""


class ContextLengthError(PolicyError):
    """A prompt is longer than the model's context; the collector ends that episode as
    truncated with ``info["truncated_reason"] = "context"``."""


@dataclass(frozen=True)
class Generation:
    """What a policy wrote for one prompt.

    Attributes:
        text: The generated text, without the stop token, as sent to the env.
        finish_reason: ``"stop"`` or ``"length"`` (see `FinishReason`). A ``"length"``
            generation is cut off: its text is still the action (see `xpgym.rollout.collector`).
        token_ids: The generated token ids, the stop token included when one was sampled;
            `None` when the backend does not expose ids (chat APIs).
        logprobs: The sampler's log-probability of each generated token, one per token (the
            same length as `token_ids` when both are set); `None` when not available. Each
            backend documents which distribution they are taken from.
        prompt_ids: The token ids the backend actually conditioned on, when it knows them
            (its own rendering of a text or chat prompt); `None` otherwise.
    """

    text: str
    finish_reason: FinishReason = "stop"
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_ids: list[int] | None = None

    def __post_init__(self) -> None:
        if self.finish_reason not in ("stop", "length"):
            raise ValueError(
                f"Generation.finish_reason must be 'stop' or 'length', got {self.finish_reason!r}"
            )
        if (
            self.token_ids is not None
            and self.logprobs is not None
            and len(self.token_ids) != len(self.logprobs)
        ):
            raise ValueError(
                f"Generation has {len(self.logprobs)} logprobs for {len(self.token_ids)} token ids"
            )


@runtime_checkable
class Policy(Protocol):
    """A batched text generator.

    Attributes:
        tokenizer: The Hugging Face-style tokenizer whose ids the policy reads and writes
            (with ``apply_chat_template``, ``encode``, ``decode``), or `None` for a policy
            that only takes text or chat messages. With a tokenizer that has a chat template,
            the collector builds token-id prompts itself and records exact ids.

    Optional attribute, read by the collector with ``getattr``:
        max_prompt_tokens (int | None): the longest prompt, in tokens, the policy can take
            and still generate its full budget (context window minus ``max_new_tokens``).
    """

    tokenizer: Any

    def generate(self, prompts: Sequence[chat.Prompt]) -> list[Generation]:
        """One `Generation` per prompt, in order (see the module docstring)."""
        ...


@runtime_checkable
class ConcurrentPolicy(Policy, Protocol):
    """A policy that takes one request at a time and answers it when ready (e.g. over HTTP).

    The collector submits one request per waiting sub-env and steps each sub-env as soon as
    its future completes, so a fast sub-env never waits for a slow generation. `submit` must
    be safe to call from the collector's thread while earlier requests are in flight.
    """

    def submit(self, prompt: chat.Prompt) -> Future[Generation]:
        """Start generating for `prompt`; the future holds the `Generation` or the error."""
        ...
