r"""Speed of two env hot paths (pytest-benchmark): ``pytest tests/benchmarks --benchmark-only
-k hot_paths``.

The default test run skips benchmarks (``--benchmark-skip`` in ``pyproject.toml``); the unit
tests check what these functions return, never how fast. Measured here:

* `generate_puzzle` for a hard 9x9 Sudoku (30 givens), the slowest preset's reset: budget
  50 ms per puzzle;
* `last_boxed` on hostile input (``\boxed{`` repeated, one ``}`` at the end) at two sizes:
  the time should grow linearly with the size (4x the input, about 4x the time), never
  quadratically.

No budget is asserted here; ``extra_info`` records the median in milliseconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from xpgym.envs.common.answers import last_boxed
from xpgym.envs.games.sudoku import generate_puzzle

ROUNDS = 20


def _record_median_ms(benchmark: Any) -> None:
    benchmark.extra_info["median_ms"] = round(benchmark.stats.stats.median * 1e3, 3)


def test_hard_sudoku_generation(benchmark: Any) -> None:
    """One hard 9x9 puzzle per round, from a generator seeded once (puzzles differ)."""
    rng = np.random.default_rng(0)
    benchmark.pedantic(generate_puzzle, args=(rng, 9, 30), rounds=ROUNDS, warmup_rounds=1)
    _record_median_ms(benchmark)


@pytest.mark.parametrize("nesting", [12_500, 50_000])
def test_last_boxed_on_hostile_input(benchmark: Any, nesting: int) -> None:
    r"""``\boxed{`` `nesting` times and one closing brace: the answer is the empty box."""
    text = r"\boxed{" * nesting + "}"
    assert benchmark.pedantic(last_boxed, args=(text,), rounds=ROUNDS, warmup_rounds=1) == ""
    _record_median_ms(benchmark)
