"""What the bridges share: the env they bridge (`bridged_env`) and its text spaces.

`gymnasium.spaces.Text` spaces for xpgym's text observations and actions:

A `Text` space is a character set and a length range. xpgym's text is unbounded Unicode,
which no practical `Text` space covers (a set of every code point costs ~150 MB per space and
makes `sample()` take seconds), so the bridges use `TEXT_CHARSET` and the lengths below by
default and take others as arguments. The bridges never check text against a space: an
observation or action outside it passes through unchanged; only ``text in space`` is then
`False` (Gymnasium's passive checker warns once) and Gymnasium's shared-memory vector envs,
which store text as indices into the character set, cannot carry it.
"""

from __future__ import annotations

import copy
import functools
import string
import unicodedata
from typing import TYPE_CHECKING, Any

from xpgym.core.registry import make

if TYPE_CHECKING:
    from gymnasium.spaces import Text

    from xpgym.core.env import EnvCore

__all__ = [
    "MAX_ACTION_LENGTH",
    "MAX_OBSERVATION_LENGTH",
    "TEXT_CHARSET",
    "bridged_env",
    "text_space",
]

_UNICODE_BLOCKS = (
    (0x00A0, 0x0370),  # Latin-1 supplement, Latin extended A/B, IPA, combining accents
    (0x0370, 0x0500),  # Greek, Cyrillic
    (0x2000, 0x2C00),  # punctuation, super/subscripts, letterlike, arrows, math operators,
    #                    technical, enclosed, box drawing, shapes, symbols, dingbats
    (0xFE00, 0xFE10),  # variation selectors
    (0x1F000, 0x1FB00),  # game pieces, emoji and pictographs
    (0xE0100, 0xE01F0),  # variation selectors supplement (rg:emoji_mystery hides text in them)
)

TEXT_CHARSET: str = string.printable + "".join(
    chr(code)
    for start, stop in _UNICODE_BLOCKS
    for code in range(start, stop)
    if unicodedata.category(chr(code)) not in {"Cc", "Cn", "Co", "Cs"}
)
"""The default character set: ASCII printable and whitespace (``string.printable``), plus the
assigned characters of the Unicode blocks that math, games and puzzles use: Latin, Greek and
Cyrillic letters, punctuation, math and technical symbols, arrows, box drawing, shapes,
dingbats, emoji and variation selectors (~9,000 characters). Every offline xpgym env's text is
inside it (tests/compat/test_compat_gymnasium.py checks that); CJK, for one, is not."""

MAX_OBSERVATION_LENGTH = 2**16
"""Default longest observation in the observation space (characters)."""

MAX_ACTION_LENGTH = 2**14
"""Default longest action in the action space (characters). Shorter than observations so
that an env that quotes a sampled action in its observation stays inside the latter."""


def text_space(max_length: int, charset: str = TEXT_CHARSET) -> Text:
    """A new `gymnasium.spaces.Text` of strings with 0 to `max_length` characters of `charset`.

    Empty strings are members: a model may answer with nothing. Each call returns its own
    space with its own unseeded generator; the character tables (the costly part: ~50 ms for
    `TEXT_CHARSET`) are built once per `(max_length, charset)` and shared, read-only.
    """
    space = copy.copy(_prototype(max_length, charset))
    space.seed()  # a generator of its own, never the prototype's
    return space


@functools.lru_cache(maxsize=16)
def _prototype(max_length: int, charset: str) -> Text:
    from gymnasium.spaces import Text

    return Text(max_length, min_length=0, charset=charset)


def bridged_env(env: EnvCore | str, make_kwargs: dict[str, Any]) -> EnvCore:
    """`env`, or the env `xpgym.make(env, **make_kwargs)` builds when `env` is an id.

    Raises:
        TypeError: `make_kwargs` are given with an env instance (they would be ignored).
    """
    if isinstance(env, str):
        return make(env, **make_kwargs)
    if make_kwargs:
        raise TypeError(
            f"keyword arguments {sorted(make_kwargs)} are for xpgym.make; "
            "pass an env id, not an env instance, to use them"
        )
    return env
