"""The Rust tokenizer behind a transformers fast tokenizer, called directly where it gives
what the tokenizer's own methods give.

A transformers fast tokenizer keeps a Rust ``tokenizers.Tokenizer`` (``backend_tokenizer``)
and wraps each call in Python that costs more than the Rust work for a rollout's short
texts: encoding a one-line feedback text took 29 us through ``tokenizer.encode`` and 10 us
through the Rust ``encode`` (transformers 5.19, tokenizers 0.23), decoding a six-token reply
3-4 us against under 1 us. The rollout's hot paths (`xpgym.core.chat.ChatPromptBuilder`'s new
texts, `xpgym.rollout.policies.hf.HFPolicy`'s reply texts) call the Rust tokenizer where
that is the same:

* the tokenizer's class takes the methods on the path (`ENCODE_PATH`, `DECODE_PATH`) from
  the fast base class, the class in its MRO that defines ``backend_tokenizer``: no subclass
  changes what they do;
* the settings make transformers' Python a pass-through: for decoding, no clean-up of
  tokenization spaces (checked once); for encoding, no truncation and no padding set on the
  Rust tokenizer and its splitting of special tokens as the tokenizer's
  ``split_special_tokens`` says (checked at every call: transformers sets these on the
  Rust tokenizer for each call and leaves them so).

Anything else (a slow tokenizer, a wrapper object, a subclass that changes a method, other
settings) gets `None` or falls back, and the caller uses the tokenizer's own methods. The
Rust path skips one thing transformers does: its one-time warning about a text longer than
``model_max_length``. Duck-typed: transformers is not imported here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "BATCH_FROM",
    "DECODE_PATH",
    "ENCODE_PATH",
    "rust_backend",
    "rust_decoder",
    "rust_encoder",
]

ENCODE_PATH = (
    "__call__",
    "_call_one",
    "encode",
    "encode_plus",
    "batch_encode_plus",
    "_encode_plus",
    "_batch_encode_plus",
    "_get_padding_truncation_strategies",
    "set_truncation_and_padding",
    "_convert_encoding",
)
"""The methods between ``tokenizer(texts)`` / ``tokenizer.encode(text)`` and the Rust
``encode_batch`` (transformers 4 and 5; a name a version lacks counts as unchanged)."""

DECODE_PATH = ("decode", "_decode")
"""The methods between ``tokenizer.decode(ids)`` and the Rust ``decode``."""

BATCH_FROM = 16
"""`rust_encoder` encodes this many texts or more in one ``encode_batch``: on the CPU demo's
texts, 16 took 160 us in one batch and 189 us one by one, 8 took the same either way, 2
took 40 us in a batch and 20 us one by one (2 cores)."""

_ENCODING_SETTINGS = ("truncation", "padding", "encode_special_tokens")


def rust_backend(tokenizer: Any, methods: Sequence[str]) -> Any | None:
    """The Rust tokenizer behind `tokenizer` if it is a transformers fast tokenizer whose
    class changes none of `methods` below the fast base class (the class in its MRO that
    defines ``backend_tokenizer``); else `None`."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    owner = next((c for c in type(tokenizer).__mro__ if "backend_tokenizer" in vars(c)), None)
    if backend is None or owner is None:
        return None
    own = type(tokenizer)
    if any(getattr(own, name, None) is not getattr(owner, name, None) for name in methods):
        return None
    return backend


def rust_decoder(tokenizer: Any, skip_special_tokens: bool) -> Callable[[Any], str] | None:
    """A function that gives the text ``tokenizer.decode(ids, skip_special_tokens=...)``
    gives: the Rust tokenizer's ``decode``, where `tokenizer` is a fast tokenizer whose
    decoding methods (`DECODE_PATH`) are the fast base class's and that does not clean up
    tokenization spaces; else `None`. One reply at a time: the Rust ``decode_batch`` starts
    a thread pool, slower than this for the few replies of a policy call."""
    decode = getattr(rust_backend(tokenizer, DECODE_PATH), "decode", None)
    if not callable(decode):
        return None
    if getattr(tokenizer, "clean_up_tokenization_spaces", True) is not False:
        return None
    return functools.partial(decode, skip_special_tokens=skip_special_tokens)


def rust_encoder(tokenizer: Any) -> Callable[[Sequence[str]], list[list[int]] | None] | None:
    """A function that gives each text's ``tokenizer.encode(text, add_special_tokens=False)``
    (the same as ``tokenizer(texts, add_special_tokens=False)["input_ids"]``) from the Rust
    tokenizer's ``encode``, where `tokenizer` is a fast tokenizer whose encoding methods
    (`ENCODE_PATH`) are the fast base class's; else `None`.

    The function returns `None` instead of ids at a call where the Rust tokenizer's settings
    are not the ones transformers would set for that call (truncation or padding left on
    it by an earlier call, special tokens split otherwise than ``split_special_tokens``
    says): the caller then uses the tokenizer's own methods, which reset them. Text by
    text below `BATCH_FROM` texts, else in one ``encode_batch`` (which spreads a batch over
    the cores; for the few texts of a vector step its start costs more than it saves).
    """
    backend = rust_backend(tokenizer, ENCODE_PATH)
    if backend is None or not all(hasattr(backend, s) for s in _ENCODING_SETTINGS):
        return None
    encode = getattr(backend, "encode", None)
    if not callable(encode):
        return None

    def encode_texts(texts: Sequence[str]) -> list[list[int]] | None:
        split_special_tokens = bool(getattr(tokenizer, "split_special_tokens", False))
        if (
            backend.truncation is not None
            or backend.padding is not None
            or backend.encode_special_tokens != split_special_tokens
        ):
            return None
        if len(texts) >= BATCH_FROM:
            batch = backend.encode_batch(list(texts), add_special_tokens=False)
            return [encoding.ids for encoding in batch]
        return [encode(text, add_special_tokens=False).ids for text in texts]

    return encode_texts
