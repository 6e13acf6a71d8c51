"""Specification of `xpgym.core.rust_tokenizer`: the Rust tokenizer gives exactly what a
transformers fast tokenizer's own `encode` / `decode` give, and is refused or handed back
wherever it might not."""

from __future__ import annotations

import copy
import random
import types
from collections.abc import Callable
from typing import Any

import pytest

from xpgym.core.rust_tokenizer import BATCH_FROM, rust_backend, rust_decoder, rust_encoder

pytest.importorskip("transformers", reason="the Rust path is a transformers fast tokenizer's")
pytest.importorskip("torch", reason="the tests' tiny tokenizer module imports torch")

from random_byte_lm import tiny_tokenizer

from xpgym.reference.tiny_model import build_tiny_tokenizer

TOKENIZERS: dict[str, Callable[[], Any]] = {
    "byte-level ChatML": tiny_tokenizer,
    "the demo's word-level": lambda: build_tiny_tokenizer(["Too low. Guess again!"]),
}
PIECES = [
    *"abcXYZ019 .,!?\n\t",
    "é",
    "你好",
    "мир",
    "  ",
    "<|im_end|>",
    "<|im_start|>",
    "<|endoftext|>",
    "\\boxed{",
    "}",
    "Too low",
    " Guess",
]


def random_texts(n: int, seed: int = 0) -> list[str]:
    """`n` texts of 0-12 pieces: plain, unicode and whitespace text and special tokens."""
    rng = random.Random(seed)
    return ["".join(rng.choices(PIECES, k=rng.randint(0, 12))) for _ in range(n)]


@pytest.fixture(params=sorted(TOKENIZERS))
def tokenizer(request: pytest.FixtureRequest) -> Any:
    return TOKENIZERS[request.param]()  # a new object: tests may change its settings


def shouting(tokenizer: Any, method: str) -> Any:
    """A copy of `tokenizer` whose class changes `method` (its results upper-cased)."""

    def changed(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = getattr(super(cls, self), method)(*args, **kwargs)
        return result.upper() if isinstance(result, str) else result

    cls = type("Shouting", (type(tokenizer),), {method: changed})
    out = copy.copy(tokenizer)
    out.__class__ = cls
    return out


def test_the_rust_encoder_gives_each_text_what_encode_gives_it(tokenizer: Any) -> None:
    encode = rust_encoder(tokenizer)
    assert encode is not None  # a transformers fast tokenizer, nothing changed
    texts = random_texts(300)
    assert any(special in text for text in texts for special in ("<|im_end|>", "<|im_start|>"))
    expected = [tokenizer.encode(text, add_special_tokens=False) for text in texts]
    assert encode(texts) == expected  # one Rust encode_batch
    few = BATCH_FROM - 1
    assert encode(texts[:few]) == expected[:few]  # text by text
    assert tokenizer(texts, add_special_tokens=False)["input_ids"] == expected
    assert encode([]) == []


def test_the_rust_encoder_hands_back_where_the_settings_are_not_transformers(
    tokenizer: Any,
) -> None:
    encode = rust_encoder(tokenizer)
    assert encode is not None
    texts = random_texts(20, seed=1)
    long_text = "abc " * 20
    # a call with truncation leaves it set on the Rust tokenizer ...
    tokenizer([long_text], truncation=True, max_length=2)
    assert tokenizer.backend_tokenizer.truncation is not None
    assert encode(texts) is None
    # ... until the next call without it, which the encoder then matches again
    full = tokenizer.encode(long_text, add_special_tokens=False)
    assert len(full) > 2
    assert encode([long_text]) == [full]
    tokenizer.backend_tokenizer.enable_padding(length=40)
    assert encode(texts) is None
    tokenizer.backend_tokenizer.no_padding()
    # special tokens split as text by one call, then the tokenizer's own setting
    tokenizer(["<|im_end|>"], split_special_tokens=True)
    assert encode(["<|im_end|>"]) is None
    tokenizer.split_special_tokens = True
    split = tokenizer.encode("<|im_end|>", add_special_tokens=False)
    assert len(split) > 1  # as text, not the special token's one id
    assert encode(["<|im_end|>"]) == [split]


@pytest.mark.parametrize("method", ["encode", "__call__", "_encode_plus"])
def test_the_rust_encoder_is_refused_where_a_subclass_changes_encoding(
    tokenizer: Any, method: str
) -> None:
    assert rust_encoder(shouting(tokenizer, method)) is None
    assert rust_encoder(shouting(tokenizer, "decode")) is not None  # not on the path


def test_the_rust_path_is_refused_for_objects_that_are_not_fast_tokenizers() -> None:
    plain = types.SimpleNamespace(encode=lambda text, **_: [1], decode=str)
    assert rust_backend(plain, ("encode",)) is None
    assert rust_encoder(plain) is None
    assert rust_decoder(plain, True) is None
    # an attribute of that name on an object of another class is not a Rust tokenizer
    assert rust_backend(types.SimpleNamespace(backend_tokenizer=object()), ()) is None


@pytest.mark.parametrize("skip", [True, False])
def test_the_rust_decoder_gives_each_reply_what_decode_gives_it(tokenizer: Any, skip: bool) -> None:
    decode = rust_decoder(tokenizer, skip)
    assert decode is not None  # a transformers fast tokenizer that keeps spaces
    rng = random.Random(0)
    vocab = len(tokenizer)  # every token, the special ones included
    replies = [tuple(rng.randrange(vocab) for _ in range(rng.randint(0, 9))) for _ in range(400)]
    assert any(set(reply) & set(tokenizer.all_special_ids) for reply in replies)
    expected = [tokenizer.decode(list(reply), skip_special_tokens=skip) for reply in replies]
    assert [decode(reply) for reply in replies] == expected


def test_the_rust_decoder_is_refused_where_decode_is_not_the_rust_tokenizers(
    tokenizer: Any,
) -> None:
    assert rust_decoder(shouting(tokenizer, "decode"), True) is None
    assert rust_decoder(shouting(tokenizer, "_decode"), True) is None
    assert rust_decoder(shouting(tokenizer, "encode"), True) is not None  # not on the path
    cleaning = copy.copy(tokenizer)
    cleaning.clean_up_tokenization_spaces = True
    assert rust_decoder(cleaning, True) is None
