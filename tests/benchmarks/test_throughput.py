r"""Throughput benchmarks (pytest-benchmark): run ``pytest tests/benchmarks --benchmark-only``.

The default test run skips them (``--benchmark-skip`` in ``pyproject.toml``). They measure,
with the same method as ``docs/benchmarks.md`` and ``scripts/bench_vs_gem.py``:

* ``import xpgym`` wall time in a fresh interpreter (``python -c "import xpgym"``);
* one ``game:GuessTheNumber-v0-easy`` env stepped `SINGLE_STEPS` times (reset on episode end),
  as `make` returns it and in a `MaxTurns` + `EpisodeStatistics` wrapper stack;
* 64 of them in a vector env (``sync``, ``thread``, ``process``), `BATCH_STEPS` batch steps;
* the CPU-heavy `cpu_heavy_env.LatinSquareEnv` (reset about 300-500 us): its reset alone,
  and 64 of them in ``sync`` vs ``process`` vector envs.

Actions are random ``\boxed{k}`` strings pre-generated (with `sample_random_action` of a
seeded scratch env) before timing, so only stepping is timed. Vector envs use
``SAME_STEP`` autoreset, as GEM does, so every env-step is one real `step` (plus a reset
when an episode ends), exactly like the single-env loop. Each benchmark runs `ROUNDS`
rounds after one warm-up round; pytest-benchmark reports min/median/max seconds per round.

No speed target is asserted here (targets live in ``docs/benchmarks.md``). Each benchmark
records ``extra_info["env_steps_per_s"]`` (min/median/max) and, when the reference
benchmark ran earlier in the same session, the ratios the targets are about.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from cpu_heavy_env import LatinSquareEnv
from cpu_heavy_env import register as register_cpu_heavy

import xpgym

GUESS_ID = "game:GuessTheNumber-v0-easy"
N_ENVS = 64
SINGLE_STEPS = 20_000
BATCH_STEPS = 1_000
CPU_BATCH_STEPS = 200
CPU_RESETS = 500
ROUNDS = 5

_MEDIAN_RATES: dict[str, float] = {}
"""Median env-steps/s per benchmark key, for ratios between benchmarks of one session."""


def _random_actions(env_id: str, count: int, seed: int = 0) -> list[str]:
    """`count` actions from `sample_random_action` of a scratch env reset with `seed`."""
    env = xpgym.make(env_id)
    env.reset(seed=seed)
    return [env.sample_random_action() for _ in range(count)]


def _batches(env_id: str, batch_steps: int) -> list[list[str]]:
    flat = _random_actions(env_id, batch_steps * N_ENVS)
    return [flat[i * N_ENVS : (i + 1) * N_ENVS] for i in range(batch_steps)]


def _record(benchmark: Any, key: str, units: int, ratios: dict[str, str] | None = None) -> None:
    """Store env-steps/s (``units`` per round) and ratios to earlier benchmarks' medians."""
    stats = benchmark.stats.stats
    rates = {"min": units / stats.max, "median": units / stats.median, "max": units / stats.min}
    benchmark.extra_info["env_steps_per_s"] = {k: round(v, 1) for k, v in rates.items()}
    _MEDIAN_RATES[key] = rates["median"]
    for name, reference in (ratios or {}).items():
        if reference in _MEDIAN_RATES:
            benchmark.extra_info[name] = round(rates["median"] / _MEDIAN_RATES[reference], 3)


def _run(benchmark: Any, fn: Callable[[], Any], setup: Callable[[], Any]) -> None:
    """`ROUNDS` timed rounds of `fn` after one warm-up, each preceded by an untimed `setup`."""

    def setup_round() -> None:  # pedantic would take a returned value as fn's (args, kwargs)
        setup()

    benchmark.pedantic(fn, setup=setup_round, rounds=ROUNDS, warmup_rounds=1, iterations=1)


def test_import_time(benchmark: Any) -> None:
    """Wall time of ``python -c "import xpgym"`` (interpreter start-up included)."""
    command = [sys.executable, "-c", "import xpgym"]
    benchmark.pedantic(
        subprocess.run,
        args=(command,),
        kwargs={"check": True},
        rounds=ROUNDS,
        warmup_rounds=1,
        iterations=1,
    )
    bare = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - start)
    benchmark.extra_info["import_ms_median"] = round(benchmark.stats.stats.median * 1e3, 1)
    benchmark.extra_info["python_startup_ms_median"] = round(sorted(bare)[len(bare) // 2] * 1e3, 1)


def _wrapped_guess_the_number() -> Any:
    """GuessTheNumber-easy in a usual wrapper stack: every layer has its lifecycle checks."""
    from xpgym.core.wrappers import EpisodeStatistics, MaxTurns

    return EpisodeStatistics(MaxTurns(xpgym.make(GUESS_ID), 4))


@pytest.mark.parametrize("stack", ["bare", "wrapped"])
def test_single_env(benchmark: Any, stack: str) -> None:
    """One GuessTheNumber-easy env (``bare`` as `make` returns it, or ``wrapped`` in
    `MaxTurns` and `EpisodeStatistics`): `SINGLE_STEPS` steps, reset when an episode ends."""
    env = xpgym.make(GUESS_ID) if stack == "bare" else _wrapped_guess_the_number()
    actions = _random_actions(GUESS_ID, SINGLE_STEPS)

    def loop() -> int:
        episodes = 0
        step, reset = env.step, env.reset
        for action in actions:
            _, _, terminated, truncated, _ = step(action)
            if terminated or truncated:
                reset()
                episodes += 1
        return episodes

    _run(benchmark, loop, lambda: env.reset(seed=0))
    ratios = {"wrapped_over_bare": "single"} if stack == "wrapped" else {}
    _record(benchmark, "single" if stack == "bare" else "single_wrapped", SINGLE_STEPS, ratios)


@pytest.mark.parametrize("mode", ["sync", "thread", "process"])
def test_vector_guess_the_number(benchmark: Any, mode: str) -> None:
    """64 GuessTheNumber-easy envs, `BATCH_STEPS` batch steps (SAME_STEP autoreset)."""
    batches = _batches(GUESS_ID, BATCH_STEPS)
    vec = xpgym.make_vec(
        GUESS_ID,
        N_ENVS,
        vectorization_mode=mode,
        vector_kwargs={"autoreset_mode": "SameStep"},
    )
    try:

        def loop() -> None:
            step = vec.step
            for batch in batches:
                step(batch)

        _run(benchmark, loop, lambda: vec.reset(seed=0))
    finally:
        vec.close()
    ratios = {f"{mode}_over_single": "single"}
    if mode != "sync":
        ratios[f"{mode}_over_sync"] = "vec_sync"
    _record(benchmark, f"vec_{mode}", N_ENVS * BATCH_STEPS, ratios)


def test_cpu_heavy_reset(benchmark: Any) -> None:
    """`LatinSquareEnv.reset()` alone, `CPU_RESETS` times (target: about 300-500 us each)."""
    env = LatinSquareEnv()
    env.reset(seed=0)

    def loop() -> None:
        for _ in range(CPU_RESETS):
            env.reset()

    _run(benchmark, loop, lambda: None)
    benchmark.extra_info["reset_us_median"] = round(
        benchmark.stats.stats.median / CPU_RESETS * 1e6, 1
    )


@pytest.mark.parametrize("mode", ["sync", "process"])
def test_vector_cpu_heavy(benchmark: Any, mode: str) -> None:
    """64 LatinSquare envs, `CPU_BATCH_STEPS` batch steps: the process backend's use case."""
    env_id = register_cpu_heavy()
    batches = _batches(env_id, CPU_BATCH_STEPS)
    vec = xpgym.make_vec(
        env_id, N_ENVS, vectorization_mode=mode, vector_kwargs={"autoreset_mode": "SameStep"}
    )
    try:

        def loop() -> None:
            step = vec.step
            for batch in batches:
                step(batch)

        _run(benchmark, loop, lambda: vec.reset(seed=0))
    finally:
        vec.close()
    ratios = {"process_over_sync": "cpu_sync"} if mode == "process" else {}
    _record(benchmark, f"cpu_{mode}", N_ENVS * CPU_BATCH_STEPS, ratios)
