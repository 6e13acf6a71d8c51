r"""Speed of world:GridWorld on its hard preset (pytest-benchmark): ``pytest tests/benchmarks
--benchmark-only -k gridworld``.

Measured: `reset` (generation plus the solver run that checks the world), and a whole
episode played with the solver's commands. The aims (no assert here): a reset well under
10 ms, an episode in milliseconds; ``extra_info`` records the median in milliseconds.
"""

from __future__ import annotations

import itertools
from typing import Any

from xpgym.envs.world.gridworld import GridWorldEnv

ROUNDS = 50


def _record_median_ms(benchmark: Any) -> None:
    benchmark.extra_info["median_ms"] = round(benchmark.stats.stats.median * 1e3, 3)


def test_gridworld_hard_reset(benchmark: Any) -> None:
    """One reset per round, a new seed each time."""
    env, seeds = GridWorldEnv(difficulty="hard"), itertools.count()
    benchmark.pedantic(lambda: env.reset(seed=next(seeds)), rounds=ROUNDS, warmup_rounds=1)
    _record_median_ms(benchmark)


def test_gridworld_hard_solved_episode(benchmark: Any) -> None:
    """A reset, then every command of the episode's solution (the last one wins)."""
    env, seeds = GridWorldEnv(difficulty="hard"), itertools.count()

    def episode() -> float:
        env.reset(seed=next(seeds))
        return sum(env.step(f"\\boxed{{{command}}}")[1] for command in env.solution)

    assert benchmark.pedantic(episode, rounds=ROUNDS, warmup_rounds=1) == 1.0
    _record_median_ms(benchmark)
