"""What the single- and multi-agent checkers share: the error, comparing transcripts and
snapshots, reporting the first difference, and the checks both make the same way.

A transcript is what an episode produced, in order: one tuple per `reset` or `step` whose
first item is its kind (``"reset"`` or ``"step"``); each checker names the other items
(`TranscriptFields`) so that a difference is reported by field.
"""

from __future__ import annotations

import math
import pickle
import reprlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = [
    "CheckError",
    "Fail",
    "FrozenSnapshot",
    "TranscriptFields",
    "check_close_twice",
    "expect_raises",
    "first_difference",
    "same",
    "short_repr",
    "type_name",
]


class CheckError(AssertionError):
    """An env broke the xpgym env contract; the message says where and how.

    An `AssertionError`, so pytest shows a failed check as a failed assertion.
    """


Fail = Callable[[str], CheckError]
"""Builds the checker's error from a message (adding the env's name, for instance)."""

TranscriptFields = Mapping[str, tuple[str, ...]]
"""Entry kind (``"reset"``, ``"step"``) -> the names of that entry's items, kind first."""

_repr = reprlib.Repr()
_repr.maxstring = 120
_repr.maxother = 120


def short_repr(value: Any) -> str:
    """`repr(value)`, shortened for an error message."""
    return _repr.repr(value)


def type_name(value: Any) -> str:
    """``"int"`` for builtins, ``"numpy.bool"`` (module included) for anything else."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def same(a: Any, b: Any) -> bool:
    """Exact structural equality of transcripts and snapshots.

    Values of different types differ (``1`` and ``1.0``, a list and a tuple); mappings and
    sequences are compared item by item, numpy arrays by shape, dtype and value; NaN equals
    NaN; anything else by ``==`` (a comparison that raises counts as a difference).
    """
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return (
            a.shape == b.shape
            and a.dtype == b.dtype
            and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
        )
    if isinstance(a, Mapping):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    try:
        return bool(a == b)
    except Exception:
        return False


def first_difference(
    expected: list[Any], actual: list[Any], fields: TranscriptFields | None = None
) -> str | None:
    """Where two transcripts (or lists of snapshots) first differ, in words; `None` if `same`.

    With `fields`, an entry whose kind is a key is reported by the name of its first
    differing item: ``"at entry 3 (step), reward: expected 1.0, got 0.0"``.
    """
    for index, (want, got) in enumerate(zip(expected, actual, strict=False)):
        if same(want, got):
            continue
        kind = want[0] if isinstance(want, tuple) and want else None
        names = (fields or {}).get(kind, ()) if isinstance(kind, str) else ()
        if names and isinstance(got, tuple) and len(got) == len(want) == len(names):
            item = next(i for i, (w, g) in enumerate(zip(want, got, strict=True)) if not same(w, g))
            return (
                f"at entry {index} ({kind}), {names[item]}: expected "
                f"{short_repr(want[item])}, got {short_repr(got[item])}"
            )
        return f"at entry {index}: expected {short_repr(want)}, got {short_repr(got)}"
    if len(expected) != len(actual):
        return f"lengths differ: expected {len(expected)} entries, got {len(actual)}"
    return None


class FrozenSnapshot:
    """A `get_state()` snapshot and a pickled copy of it taken now, to catch aliasing: an
    env that keeps references into a snapshot it returned (or was given) changes it later.

    Raises:
        CheckError: (from `fail`) the snapshot does not pickle.
    """

    def __init__(self, snapshot: Any, fail: Fail) -> None:
        self.snapshot = snapshot
        try:
            self._frozen = pickle.dumps(snapshot)
        except Exception as exc:
            raise fail(f"get_state() must return a picklable snapshot: {exc!r}") from exc

    def change(self) -> str | None:
        """How the snapshot changed since it was frozen, in words; `None` if it did not."""
        if pickle.dumps(self.snapshot) == self._frozen:
            return None
        before = pickle.loads(self._frozen)
        return first_difference([before], [self.snapshot]) or "its pickled form changed"


def expect_raises(
    fail: Fail, kind: type[Exception], call: Callable[[], object], what: str, hint: str = ""
) -> None:
    """Fail unless ``call()`` raises `kind`; the message says ``"<what> must raise <kind>"``,
    then `hint`, then what happened instead."""
    try:
        call()
    except kind:
        return
    except Exception as exc:
        raise fail(f"{what} must raise {kind.__name__}{hint}, it raised {exc!r}") from exc
    raise fail(f"{what} must raise {kind.__name__}{hint}; it returned")


def check_close_twice(env: Any, fail: Fail) -> None:
    """Fail if `env.close()` raises, the first time or the second."""
    for attempt in ("close()", "a second close()"):
        try:
            env.close()
        except Exception as exc:
            raise fail(f"{attempt} raised {exc!r}; close() twice must be safe") from exc
