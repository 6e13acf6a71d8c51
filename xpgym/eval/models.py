"""Model specs: what ``--model`` and ``--agent-model AGENT=SPEC`` accept, and the policies
they become.

=============================================  ==============================================
Spec                                           Policy
=============================================  ==============================================
``http(s)://HOST[:PORT]/PATH#MODEL``           `OpenAIPolicy` on the chat completions endpoint
                                               under ``/PATH`` (e.g. ``/v1``), ``"model":
                                               MODEL`` in each request. The API key comes from
                                               the environment variable `api_key_env`.
``vllm:PATH_OR_HUB_ID``                        `VLLMPolicy.from_model` (vLLM's offline engine)
``random`` or ``scripted``                     `RandomPolicy`: the env's own
                                               ``sample_random_action`` (random moves in the
                                               games, the scripted user of
                                               ``multiagent:CustomerService-v0``); no model
anything else                                  `HFPolicy.from_pretrained`: a local
                                               transformers model directory or hub id
=============================================  ==============================================

The URL's fragment names the served model because an OpenAI-compatible server needs one and
the URL has no other place for it; the fragment is never sent. URLs with a user name,
password or query string are refused: secrets belong in the environment variable, never in
a spec that is written to the results.

Every policy that `build_policy` returns is a `ConcurrentPolicy`: the HTTP client natively,
local models behind a `BatchingPolicy`.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Literal, Protocol

from xpgym.eval.policy_adapters import BatchingPolicy
from xpgym.rollout.policies import ConcurrentPolicy

__all__ = [
    "ENV_POLICY_SPECS",
    "ClosablePolicy",
    "ModelSpec",
    "SamplingSettings",
    "build_policy",
    "parse_model_spec",
]

ENV_POLICY_SPECS = ("random", "scripted")
"""Two names of one spec: the env's own ``sample_random_action`` plays (kind ``"env"``)."""

ModelKind = Literal["openai", "vllm", "hf", "env"]


class ClosablePolicy(ConcurrentPolicy, Protocol):
    """A `ConcurrentPolicy` with a ``close()`` that releases what it holds (threads,
    connections); the runner calls it once the run ends."""

    def close(self) -> None:
        """Release the policy's threads and connections; safe to call twice."""
        ...


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec.

    Attributes:
        text: The spec as given. kind: ``"openai"``, ``"vllm"``, ``"hf"`` or ``"env"``.
        target: The base URL (openai), model path or hub id (vllm, hf), ``""`` (env).
        served_model: The ``model`` field of chat completions requests (openai only).
    """

    text: str
    kind: ModelKind
    target: str = ""
    served_model: str | None = None


@dataclass(frozen=True)
class SamplingSettings:
    """How every model policy of a run generates.

    Attributes:
        temperature: Sampling temperature; ``0`` decodes greedily.
        top_p: Nucleus mass. max_new_tokens: Token budget per turn.
        seed: Base seed of local samplers (HF, vLLM).
        concurrency: Episodes in flight: the HTTP client's threads, the local models' batch.
        api_key_env: Environment variable holding the API key of URL specs.
        timeout: Seconds per HTTP socket operation. max_retries: Retries per HTTP request.
        retry_backoff: First wait before an HTTP retry, in seconds (doubles each retry).
        device: Device of HF models (default: CUDA if available, else CPU).
    """

    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    seed: int = 0
    concurrency: int = 8
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 60.0
    max_retries: int = 5
    retry_backoff: float = 0.5
    device: str | None = None


def parse_model_spec(text: str) -> ModelSpec:
    """Parse a spec (see the module docstring).

    Raises:
        ValueError: an empty spec, a URL without ``#MODEL`` or with credentials or a query,
            or ``vllm:`` without a path.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"a model spec must be a non-empty string, got {text!r}")
    if text in ENV_POLICY_SPECS:
        return ModelSpec(text, "env")
    if text.startswith(("http://", "https://")):
        url = urllib.parse.urlsplit(text)
        if url.username is not None or url.password is not None or url.query:
            raise ValueError(
                "model URLs may not hold a user name, password or query string (they are "
                "written to the results); put the API key in the environment variable named "
                "by --api-key-env"
            )
        if not url.fragment:
            raise ValueError(
                f"name the served model after '#': {text}#MODEL, e.g. "
                "http://127.0.0.1:8000/v1#Qwen/Qwen2.5-0.5B-Instruct"
            )
        base = urllib.parse.urlunsplit((url.scheme, url.netloc, url.path, "", ""))
        return ModelSpec(text, "openai", target=base, served_model=url.fragment)
    if text.startswith("vllm:"):
        path = text.removeprefix("vllm:")
        if not path:
            raise ValueError("'vllm:' needs a model path or hub id, e.g. vllm:Qwen/Qwen2.5-0.5B")
        return ModelSpec(text, "vllm", target=path)
    return ModelSpec(text, "hf", target=text)


def build_policy(spec: ModelSpec, settings: SamplingSettings) -> ClosablePolicy:
    """The concurrent policy of a model spec (loads the model for ``hf`` and ``vllm``).

    Raises:
        ValueError: ``spec`` is of kind ``"env"`` (the runner binds a `RandomPolicy` to each
            env).
        ImportError: the backend's package is missing (the message names the extra).
    """
    if spec.kind == "openai":
        from xpgym.rollout.policies.openai import OpenAIPolicy

        assert spec.served_model is not None
        return OpenAIPolicy(
            spec.served_model,
            base_url=spec.target,
            api_key_env=settings.api_key_env,
            max_new_tokens=settings.max_new_tokens,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_concurrency=settings.concurrency,
            timeout=settings.timeout,
            max_retries=settings.max_retries,
            backoff_base=settings.retry_backoff,
        )
    if spec.kind == "vllm":
        from xpgym.rollout.policies.vllm import VLLMPolicy

        engine = VLLMPolicy.from_model(
            spec.target,
            max_new_tokens=settings.max_new_tokens,
            temperature=settings.temperature,
            top_p=settings.top_p,
            seed=settings.seed,
        )
        return BatchingPolicy(engine, max_batch=settings.concurrency)
    if spec.kind == "hf":
        from xpgym.rollout.policies.hf import HFPolicy

        model = HFPolicy.from_pretrained(
            spec.target,
            device=settings.device,
            max_new_tokens=settings.max_new_tokens,
            temperature=settings.temperature,
            top_p=settings.top_p,
            seed=settings.seed,
        )
        return BatchingPolicy(model, max_batch=settings.concurrency)
    raise ValueError(f"{spec.text!r} is not built once per run: bind a RandomPolicy to each env")
