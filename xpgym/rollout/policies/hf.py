"""`HFPolicy`: batched generation with Hugging Face transformers' ``model.generate``.

For decoder-only causal LMs. torch and transformers are imported when a policy is built
(`HFPolicy.from_pretrained`) or used, never when this module is imported.

What a call does, for prompts ``p_0 .. p_{B-1}`` (at most `batch_size` at a time):

1. each prompt becomes token ids (`xpgym.core.chat.encode_prompt`);
2. the rows are **left-padded** to the longest (``pad_token_id``; attention mask 0 on pads)
   and generated together with ``output_scores=True, return_dict_in_generate=True``;
3. row ``b``'s response is its new tokens up to and including the first stop token;
   ``finish_reason`` is ``"stop"`` if a stop token was generated, else ``"length"``
   (``max_new_tokens`` reached); its text is ``tokenizer.decode`` of those tokens without
   the stop token (the Rust tokenizer's own ``decode`` where that gives the same text; the
   policy remembers the texts of its last `HFPolicy.DECODED_TEXTS` distinct replies: RL
   replies repeat, and decoding costs more than a look-up);
4. ``logprobs[t] = log_softmax(scores[t])[token_t]``, where ``scores`` are the logits after
   every logits processor ``generate`` applied before drawing the token.

What the logprobs mean: the log-probability of each sampled token under the distribution it
was drawn from. With sampling that is ``softmax(logits / temperature)`` restricted to the
`top_k` most likely tokens and the `top_p` nucleus and renormalised (tokens outside get
``-inf``, so a sampled token always has a finite logprob). With ``top_k=0, top_p=1.0`` it is
exactly ``log_softmax(logits / temperature)``, what RL trainers recompute on the learner side.
With greedy decoding it is ``log_softmax(logits)`` (temperature 1). Processors set in the
model's own ``generation_config`` that this class does not override (e.g.
``no_repeat_ngram_size``) also shape the distribution and are reflected in the logprobs;
`repetition_penalty` is reset to 1.0 unless given in `generation_kwargs`.

Memory: ``output_scores`` keeps one ``[B, V]`` tensor per generated token until the call
returns (about ``B * max_new_tokens * V`` floats); lower `batch_size` for large vocabularies,
or use `xpgym.rollout.policies.vllm.VLLMPolicy`.

Cross-turn KV cache (default, ``kv_cache=True``): when a prompt extends an earlier prompt
plus its response token-exactly (every multi-turn episode the collector runs in ``"tokens"``
mode), only the new tokens are prefilled and the decoding loop is xpgym's own
(`xpgym.rollout.policies.hf_cache`), batched over the prompts of the call and built to draw the
same tokens with the same log-probs as ``model.generate`` (tested). Prompts that extend
nothing are prefilled whole; rows no prompt continues are dropped, and the cache is dropped
when the model's weights change, so it holds at most one batch (`clear_cache` frees it).
``kv_cache=False``, `generation_kwargs`, or logits processors set in the model's
``generation_config`` that the cached loop does not apply (listed in `_UNCACHED_FIELDS`) use
``model.generate`` on whole prompts instead.

Randomness: call ``k`` of `generate` seeds torch's RNG with a value derived from ``(seed,
k)`` inside ``torch.random.fork_rng`` (on a CPU: with the CPU generator's state saved and
restored around the call, what ``fork_rng`` does there), so the global RNG state is
untouched and the same sequence of calls gives the same samples. A row's sample depends on
the other rows of its batch (one multinomial draw per step for the whole batch). The policy
is not meant to be used from several threads at once; calls are serialised by a lock.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from xpgym.core.chat import Prompt, encode_prompt
from xpgym.core.optional import import_optional
from xpgym.core.rust_tokenizer import rust_decoder
from xpgym.rollout.policies import FinishReason, Generation
from xpgym.rollout.policies.hf_cache import CachedDecoder, CacheStats

__all__ = ["HFPolicy"]

logger = logging.getLogger(__name__)

# ``generation_config`` fields that make ``generate`` apply logits processors (or a search)
# the cached decoding loop does not: a model that sets any of them decodes uncached.
_UNCACHED_FIELDS = (
    "num_beams",
    "min_length",
    "min_new_tokens",
    "no_repeat_ngram_size",
    "bad_words_ids",
    "suppress_tokens",
    "begin_suppress_tokens",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "sequence_bias",
    "min_p",
    "typical_p",
    "top_h",
    "epsilon_cutoff",
    "eta_cutoff",
    "exponential_decay_length_penalty",
    "renormalize_logits",
    "guidance_scale",
    "watermarking_config",
)


def _as_id_set(value: int | Iterable[int] | None) -> list[int]:
    if value is None:
        return []
    if isinstance(value, (int, np.integer)):
        return [int(value)]
    return [int(v) for v in value]


class HFPolicy:
    """Generate with ``model.generate``; see the module docstring for padding and logprobs.

    Args:
        model: A transformers causal LM (``AutoModelForCausalLM``), on the device to use.
        tokenizer: Its tokenizer; needs a chat template for chat-message prompts and for the
            collector's token-exact mode.
        max_new_tokens: Per-turn token budget (stop token included).
        temperature: Sampling temperature; ``0`` means greedy.
        top_p: Nucleus sampling mass (``1.0``: off).
        top_k: Keep the `top_k` most likely tokens (``0``: off).
        greedy: Decode greedily (argmax), ignoring temperature, top_p and top_k.
        seed: Base seed of the per-call seeds (see module docstring).
        batch_size: Most prompts per ``generate`` call (default: all at once).
        stop_token_ids: Tokens that end a generation (default: the tokenizer's eos token
            plus the model generation config's ``eos_token_id``).
        max_prompt_tokens: The longest prompt accepted, read by the collector (default:
            ``model.config.max_position_embeddings - max_new_tokens`` when known).
        skip_special_tokens: Drop special tokens from `Generation.text` (the ids keep them).
        chat_template_kwargs: Extra arguments for ``apply_chat_template`` on message prompts.
        generation_kwargs: Extra arguments for ``model.generate`` (they win over the above;
            given any, decoding is uncached).
        kv_cache: Keep the KV cache across turns (module docstring); ``False``: prefill every
            prompt whole with ``model.generate``.

    Raises:
        ValueError: no stop token or pad token can be determined, or a bad budget.
    """

    DECODED_TEXTS = 4096  # distinct replies whose text the policy remembers

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        greedy: bool = False,
        seed: int = 0,
        batch_size: int | None = None,
        stop_token_ids: Iterable[int] | None = None,
        max_prompt_tokens: int | None = None,
        skip_special_tokens: bool = True,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        generation_kwargs: Mapping[str, Any] | None = None,
        kv_cache: bool = True,
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 or None, got {batch_size}")
        if temperature < 0 or not 0 < top_p <= 1 or top_k < 0:
            raise ValueError(
                f"need temperature >= 0, 0 < top_p <= 1, top_k >= 0; got {temperature=}, "
                f"{top_p=}, {top_k=}"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = int(max_new_tokens)
        self.greedy = bool(greedy or temperature == 0)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.top_k = int(top_k)
        self.seed = int(seed)
        self.batch_size = batch_size
        self.skip_special_tokens = skip_special_tokens
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.generation_kwargs = dict(generation_kwargs or {})
        if stop_token_ids is None:
            generation_config = getattr(model, "generation_config", None)
            stops = _as_id_set(getattr(tokenizer, "eos_token_id", None))
            stops += _as_id_set(getattr(generation_config, "eos_token_id", None))
        else:
            stops = _as_id_set(stop_token_ids)
        self.stop_token_ids: list[int] = list(dict.fromkeys(stops))
        if not self.stop_token_ids:
            raise ValueError(
                "HFPolicy found no stop token: the tokenizer has no eos_token_id; pass "
                "stop_token_ids=[...]"
            )
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_token_id: int = int(pad) if pad is not None else self.stop_token_ids[0]
        if max_prompt_tokens is None:
            context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
            if isinstance(context, int):
                max_prompt_tokens = context - self.max_new_tokens
        self.max_prompt_tokens = max_prompt_tokens
        self._calls = 0
        self._lock = threading.Lock()
        self._texts: dict[tuple[int, ...], str] = {}  # reply tokens -> text, oldest first
        self._decode_text: Callable[[tuple[int, ...]], str] = rust_decoder(
            tokenizer, skip_special_tokens
        ) or functools.partial(_decode_in_python, tokenizer, skip_special_tokens)
        self._decoder: CachedDecoder | None = None
        if kv_cache:
            blocking = _uncached_reasons(model, self.generation_kwargs)
            if blocking:
                logger.info("HFPolicy decodes without a KV cache across turns: %s", blocking)
            else:
                self._decoder = CachedDecoder(
                    model,
                    max_new_tokens=self.max_new_tokens,
                    greedy=self.greedy,
                    temperature=self.temperature,
                    top_k=self.top_k,
                    top_p=self.top_p,
                    stop_token_ids=self.stop_token_ids,
                    pad_token_id=self.pad_token_id,
                )

    @property
    def kv_cache(self) -> bool:
        """Whether prompts that extend an earlier turn are prefilled from the cache."""
        return self._decoder is not None

    @property
    def cache_stats(self) -> CacheStats | None:
        """Prompt tokens prefilled and reused so far (`CacheStats`); ``None`` when uncached."""
        return self._decoder.stats if self._decoder is not None else None

    def clear_cache(self) -> None:
        """Free the cached keys and values (e.g. before a training step on a GPU)."""
        if self._decoder is not None:
            with self._lock:
                self._decoder.clear()

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str,
        *,
        device: str | None = None,
        torch_dtype: Any = None,
        model_kwargs: Mapping[str, Any] | None = None,
        **policy_kwargs: Any,
    ) -> HFPolicy:
        """Load ``AutoModelForCausalLM`` and ``AutoTokenizer`` from `name_or_path`.

        Args:
            device: Where to put the model (default: ``"cuda"`` if available, else CPU).
            torch_dtype: Passed to ``from_pretrained`` as ``dtype`` (default: the checkpoint's).
            model_kwargs: More arguments for ``AutoModelForCausalLM.from_pretrained``.
            **policy_kwargs: `HFPolicy` arguments (``max_new_tokens``, ``temperature``, ...).
        """
        torch = import_optional("torch", needed_by="HFPolicy", install='pip install "xpgym[torch]"')
        from transformers import AutoModelForCausalLM, AutoTokenizer

        kwargs = dict(model_kwargs or {})
        if torch_dtype is not None:
            kwargs["dtype"] = torch_dtype
        model = AutoModelForCausalLM.from_pretrained(name_or_path, **kwargs)
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        # transformers declares `to` as @functools.wraps(nn.Module.to); typeshed's _Wrapped is
        # not bound as a method, so mypy takes `device` for `self`.
        model = model.to(device).eval()
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        return cls(model, tokenizer, **policy_kwargs)

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        """One `Generation` per prompt, in order (see the module docstring)."""
        ids = [encode_prompt(self.tokenizer, p, self.chat_template_kwargs) for p in prompts]
        size = self.batch_size or max(len(ids), 1)
        out: list[Generation] = []
        with self._lock:
            for slot, start in enumerate(range(0, len(ids), size)):
                out.extend(self._generate_batch(ids[start : start + size], slot))
        return out

    def _generate_batch(self, prompts: list[list[int]], slot: int) -> list[Generation]:
        torch = _torch()
        device = self.model.device
        call_seed = _call_seed(self.seed, self._calls)
        self._calls += 1
        if device.type == "cuda":
            with torch.random.fork_rng(devices=[device]):
                torch.manual_seed(call_seed)
                new_tokens, token_logprobs = self._decode(torch, prompts, slot, device)
        else:  # what fork_rng and torch.manual_seed do for the CPU generator alone, cheaper
            generator = torch.default_generator
            state = generator.get_state()
            try:
                generator.manual_seed(call_seed)
                new_tokens, token_logprobs = self._decode(torch, prompts, slot, device)
            finally:
                generator.set_state(state)
        stops = set(self.stop_token_ids)
        rows = [
            _cut_at_stop(tokens, logprobs, stops)
            for tokens, logprobs in zip(new_tokens.tolist(), token_logprobs.tolist(), strict=True)
        ]
        texts = self._texts_of([text_ids for _, _, _, text_ids in rows])
        return [
            Generation(
                text=text,
                finish_reason=finish,
                token_ids=tokens,
                logprobs=logprobs,
                prompt_ids=prompt,
            )
            for prompt, (tokens, logprobs, finish, _), text in zip(
                prompts, rows, texts, strict=True
            )
        ]

    def _decode(
        self, torch: Any, prompts: list[list[int]], slot: int, device: Any
    ) -> tuple[Any, Any]:
        """``(tokens, logprobs)``, ``[B, T]`` on the CPU, for batch `slot` of `prompts` on the
        model's `device`, cached or not, with torch's RNG seeded for the call."""
        with torch.inference_mode():
            if self._decoder is not None:
                return self._decoder.decode(torch, prompts, slot, device)
            return self._generate_uncached(torch, prompts, device)

    def _generate_uncached(
        self, torch: Any, prompts: list[list[int]], device: Any
    ) -> tuple[Any, Any]:
        """``model.generate`` on the left-padded prompts, on the model's `device`: ``(tokens,
        logprobs)``, ``[B, T]``."""
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):  # left padding: the prompt ends at the right edge
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            attention_mask[row, width - len(prompt) :] = 1
        kwargs: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "do_sample": not self.greedy,
            "eos_token_id": self.stop_token_ids,
            "pad_token_id": self.pad_token_id,
            "repetition_penalty": 1.0,
            "output_scores": True,
            "return_dict_in_generate": True,
        }
        if not self.greedy:
            kwargs.update(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k)
        kwargs.update(self.generation_kwargs)
        output = self.model.generate(
            input_ids=input_ids.to(device), attention_mask=attention_mask.to(device), **kwargs
        )
        # scores[t]: [B, V] logits after the processors, from which token t was drawn; one
        # step at a time so that no [B, T, V] tensor is built.
        picked = output.sequences[:, width:]
        token_logprobs = torch.stack(
            [
                torch.log_softmax(step.float(), dim=-1).gather(-1, picked[:, t, None])[:, 0]
                for t, step in enumerate(output.scores)
            ],
            dim=1,
        )
        return picked.cpu(), token_logprobs.cpu()

    def _texts_of(self, replies: list[tuple[int, ...]]) -> list[str]:
        """``tokenizer.decode`` of each reply's ids (through the Rust tokenizer where that
        gives the same text, `xpgym.core.rust_tokenizer.rust_decoder`), remembered for the
        last `DECODED_TEXTS` distinct replies. Called with the lock held."""
        memo = self._texts
        texts = []
        for key in replies:
            text = memo.get(key)
            if text is None:
                text = memo[key] = self._decode_text(key)
                if len(memo) > self.DECODED_TEXTS:
                    del memo[next(iter(memo))]
            texts.append(text)
        return texts

    def __repr__(self) -> str:
        mode = "greedy" if self.greedy else f"T={self.temperature}, top_p={self.top_p}"
        return (
            f"HFPolicy({type(self.model).__name__}, max_new_tokens={self.max_new_tokens}, {mode})"
        )


def _cut_at_stop(
    tokens: list[int], logprobs: list[float], stops: set[int]
) -> tuple[list[int], list[float], FinishReason, tuple[int, ...]]:
    """A generated row (padded after its first stop token) cut after that stop token:
    ``(tokens, logprobs, finish_reason, ids of the text)``, the text's ids without the stop
    token."""
    end = next((t + 1 for t, token in enumerate(tokens) if token in stops), None)
    if end is None:
        return tokens, logprobs, "length", tuple(tokens)
    return tokens[:end], logprobs[:end], "stop", tuple(tokens[: end - 1])


def _decode_in_python(tokenizer: Any, skip_special_tokens: bool, ids: tuple[int, ...]) -> str:
    """``tokenizer.decode`` of a reply's `ids`."""
    return tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)


# numpy's SeedSequence constants (numpy/random/bit_generator.pyx): 32-bit words throughout
_MASK32 = 0xFFFFFFFF
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_POOL_PAIRS = [(src, dst) for src in range(4) for dst in range(4) if src != dst]


def _call_seed(seed: int, call: int) -> int:
    """``int(np.random.SeedSequence([seed, call]).generate_state(1)[0])``, the seed of call
    `call`, computed in Python: the same value (tested against numpy). Between the model's
    calls (cold caches) numpy's arrays and checks cost 200-600 us a call in the CPU demo,
    this 60-80 us.

    Raises:
        ValueError: `seed` or `call` is negative (numpy's message).
    """
    entropy = _uint32_words(seed) + _uint32_words(call)
    pool = [0] * 4  # SeedSequence's pool of 4 words
    hash_a = _INIT_A

    def hashmix(value: int) -> int:
        nonlocal hash_a
        value ^= hash_a
        hash_a = (hash_a * _MULT_A) & _MASK32
        value = (value * hash_a) & _MASK32
        return value ^ (value >> 16)

    def mix(x: int, y: int) -> int:
        value = (_MIX_L * x - _MIX_R * y) & _MASK32
        return value ^ (value >> 16)

    for i in range(4):
        pool[i] = hashmix(entropy[i] if i < len(entropy) else 0)
    for src, dst in _POOL_PAIRS:
        pool[dst] = mix(pool[dst], hashmix(pool[src]))
    for word in entropy[4:]:
        for dst in range(4):
            pool[dst] = mix(pool[dst], hashmix(word))
    value = ((pool[0] ^ _INIT_B) * ((_INIT_B * _MULT_B) & _MASK32)) & _MASK32  # state word 0
    return value ^ (value >> 16)


def _uint32_words(n: int) -> list[int]:
    """`n` as SeedSequence reads an int: 32-bit words, least significant first (0: ``[0]``)."""
    if n < 0:
        raise ValueError("expected non-negative integer")
    words = [n & _MASK32]
    n >>= 32
    while n:
        words.append(n & _MASK32)
        n >>= 32
    return words


@functools.cache
def _torch() -> Any:
    """torch, imported at the first call (this module does not import it)."""
    return import_optional("torch", needed_by="HFPolicy", install='pip install "xpgym[torch]"')


def _uncached_reasons(model: Any, generation_kwargs: Mapping[str, Any]) -> list[str]:
    """Why the cached loop would not decode like ``model.generate`` here (empty: it would)."""
    reasons = [f"generation_kwargs {sorted(generation_kwargs)}"] if generation_kwargs else []
    config = getattr(model, "generation_config", None)
    if config is not None:
        default = type(config)()
        changed = [
            name
            for name in _UNCACHED_FIELDS
            if getattr(config, name, None) != getattr(default, name, None)
        ]
        if changed:
            reasons.append(f"generation_config sets {changed}")
    return reasons
