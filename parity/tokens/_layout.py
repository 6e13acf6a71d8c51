"""Layout checks shared by the trainer modules of the parity check."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from parity.tokens.core import LayoutCheck

__all__ = ["check_padding", "check_same"]


def check_same(
    name: str, got: Sequence[np.ndarray], expected: Sequence[np.ndarray], *, tol: float = 0.0
) -> LayoutCheck:
    """Per episode, `got` equals `expected` (to `tol`); the detail names the first that
    differs."""
    if len(got) != len(expected):
        return LayoutCheck(name, False, f"{len(got)} episodes read back, {len(expected)} expected")
    for e, (g, x) in enumerate(zip(got, expected, strict=True)):
        g, x = np.asarray(g, dtype=np.float64), np.asarray(x, dtype=np.float64)
        if g.shape != x.shape or (g.size and np.abs(g - x).max() > tol):
            return LayoutCheck(name, False, f"episode {e}: got {g.tolist()}, expected {x.tolist()}")
    return LayoutCheck(name, True)


def check_padding(name: str, attention_mask: np.ndarray, *, side: str) -> list[LayoutCheck]:
    """Each row's real tokens (1s of `attention_mask`) are contiguous and padding is on
    `side` (``"left"`` or ``"right"``); the width is the longest row (no all-padding column
    at the far end)."""
    mask = np.asarray(attention_mask).astype(bool)
    lengths = mask.sum(axis=1)
    width = mask.shape[1]
    columns = np.arange(width)
    if side == "right":
        expected = columns < lengths[:, None]
    else:
        expected = columns >= (width - lengths)[:, None]
    return [
        LayoutCheck(
            f"{name} padded on the {side}",
            bool((mask == expected).all()),
            "" if (mask == expected).all() else f"row {int(np.argmax((mask != expected).any(1)))}",
        ),
        LayoutCheck(
            f"{name} width is the longest row",
            int(lengths.max(initial=0)) == width,
            f"width {width}, longest row {int(lengths.max(initial=0))}",
        ),
    ]
