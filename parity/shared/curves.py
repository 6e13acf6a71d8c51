"""Learning-curve math shared by the CPU curves, the GPU run and the end-to-end runs: a curve
from an episode log (`curve`), trailing smoothing (`smooth`), the band of a set of curves
(`band`) and the share of a curve inside it (`inside_fraction`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["band", "curve", "inside_fraction", "smooth"]


def curve(records: Sequence[dict[str, Any]], episodes_per_step: int) -> list[float]:
    """Mean return of every full block of `episodes_per_step` consecutive episodes.

    `records` are `xpgym.core.wrappers.episode_log.read_episode_log` rows in the order the
    episodes ended; a last partial block is dropped (it would mix fewer episodes into one
    point).
    """
    if episodes_per_step < 1:
        raise ValueError(f"episodes_per_step must be at least 1, got {episodes_per_step}")
    returns = np.array([float(r["return"]) for r in records], dtype=np.float64)
    blocks = len(returns) // episodes_per_step
    full = returns[: blocks * episodes_per_step].reshape(blocks, episodes_per_step)
    return full.mean(axis=1).tolist()


def smooth(values: Sequence[float], window: int) -> np.ndarray:
    """Trailing moving average: ``out[t] = mean(values[max(0, t - window + 1) : t + 1])``."""
    x = np.asarray(values, dtype=np.float64)
    sums = np.concatenate([[0.0], np.cumsum(x)])
    start = np.maximum(np.arange(len(x)) - window + 1, 0)
    return (sums[1:] - sums[start]) / (np.arange(len(x)) + 1 - start)


def band(curves: np.ndarray, k: float, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, half_width)`` per step of `curves` ``[K, steps]`` (K >= 2):
    ``half_width = max(k * std, floor)``, std the sample std (ddof 1) over the K curves."""
    curves = np.asarray(curves, dtype=np.float64)
    if curves.shape[0] < 2:
        raise ValueError(f"a band needs at least 2 reference curves, got {curves.shape[0]}")
    return curves.mean(axis=0), np.maximum(k * curves.std(axis=0, ddof=1), floor)


def inside_fraction(curve: np.ndarray, mean: np.ndarray, half_width: np.ndarray) -> float:
    """Share of the points of `curve` with ``|curve - mean| <= half_width``."""
    return float(np.mean(np.abs(np.asarray(curve) - mean) <= half_width))
