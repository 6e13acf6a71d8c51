"""The `Policy` protocol: a batch of prompts in, one `Generation` per prompt out.

A policy is anything with a `tokenizer` attribute and a `generate` method; the rollout
collector (`xpgym.core.rollout`) needs nothing else. Backends in this package:

* `xpgym.core.policies.hf.HFPolicy`: Hugging Face ``model.generate`` (batched, in-process);
* `xpgym.core.policies.vllm.VLLMPolicy`: the vLLM offline engine (batched, in-process);
* `xpgym.core.policies.openai.OpenAIPolicy`: any OpenAI-compatible chat completions
  endpoint over HTTP (concurrent: also implements `ConcurrentPolicy.submit`).

Importing this package imports neither torch, transformers nor vllm; each backend module
imports its engine lazily, when a policy is built.

Prompts (`Prompt`) come in three kinds; a backend says which it accepts:

* ``list[int]``: token ids, used verbatim (the collector's token-exact mode);
* ``str``: text, tokenized by the backend without adding special tokens;
* ``list[Message]``: chat messages, rendered by the backend with its chat template and the
  generation prompt.

Contract of `Policy.generate(prompts)`: returns a list of the same length, in the same order,
whose ``i``-th `Generation` answers ``prompts[i]``. It raises rather than returning fewer
generations; `ContextLengthError` says that a prompt does not fit the model's context.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from xpgym.core.wrappers.observation import Message

__all__ = [
    "ConcurrentPolicy",
    "ContextLengthError",
    "FinishReason",
    "Generation",
    "Message",
    "Policy",
    "PolicyError",
    "Prompt",
    "encode_prompt",
]

Prompt = list[int] | str | list[Message]
"""Token ids, text, or chat messages (see the module docstring)."""

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
            generation is cut off: its text is still the action (see `xpgym.core.rollout`).
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

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        """One `Generation` per prompt, in order (see the module docstring)."""
        ...


@runtime_checkable
class ConcurrentPolicy(Policy, Protocol):
    """A policy that takes one request at a time and answers it when ready (e.g. over HTTP).

    The collector submits one request per waiting sub-env and steps each sub-env as soon as
    its future completes, so a fast sub-env never waits for a slow generation. `submit` must
    be safe to call from the collector's thread while earlier requests are in flight.
    """

    def submit(self, prompt: Prompt) -> Future[Generation]:
        """Start generating for `prompt`; the future holds the `Generation` or the error."""
        ...


def encode_prompt(
    tokenizer: Any, prompt: Prompt, chat_template_kwargs: dict[str, Any] | None = None
) -> list[int]:
    """The token ids of `prompt` under `tokenizer` (for backends that take ids).

    Token ids are returned as a new list; text is encoded without special tokens (a rendered
    chat template already holds them); messages are rendered with
    ``apply_chat_template(..., add_generation_prompt=True)``.

    Raises:
        ValueError: the prompt is empty.
        TypeError: the prompt is none of the three kinds.
    """
    if isinstance(prompt, str):
        return list(tokenizer.encode(prompt, add_special_tokens=False))
    if not isinstance(prompt, (list, tuple)) or not prompt:
        raise (ValueError if isinstance(prompt, (list, tuple)) else TypeError)(
            f"a prompt is token ids, text or chat messages, got {prompt!r:.80}"
        )
    if all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return [int(t) for t in prompt]
    if all(isinstance(m, dict) for m in prompt):
        rendered = tokenizer.apply_chat_template(
            list(prompt),
            tokenize=True,
            add_generation_prompt=True,
            return_dict=False,
            **(chat_template_kwargs or {}),
        )
        if isinstance(rendered, dict) or hasattr(rendered, "input_ids"):
            rendered = rendered["input_ids"]
        return [int(t) for t in rendered]
    raise TypeError(f"a prompt is token ids, text or chat messages, got {prompt!r:.80}")
