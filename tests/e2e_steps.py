"""A check the end-to-end tests share: a step trains unless its batch gave nothing to learn."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def idle_steps_with_varied_returns(
    grad_norm: Sequence[float], episodes: Sequence[dict[str, Any]], batch: int
) -> list[int]:
    """The steps whose gradient norm is 0 although their episodes' returns differ.

    With per-turn ReBN a step's advantages are all 0 only when every turn return of its batch
    is the same, which needs every episode return to be the same: such a step rightly trains
    nothing (a small model often plays 8 alike episodes). Any other step without a gradient
    is a bug. `episodes` are the run's episode-log records in the order they ended, `batch`
    per step."""
    idle = []
    for k, norm in enumerate(grad_norm):
        returns = {e["return"] for e in episodes[k * batch : (k + 1) * batch]}
        if norm <= 0 and len(returns) > 1:
            idle.append(k)
    return idle
