"""Rollout speed of the CPU demo (pytest-benchmark): ``pytest tests/benchmarks --benchmark-only``.

One rollout of the demo (``recipes/train_torch.py`` defaults: 64 episodes of
``game:GuessTheNumber-v0-easy`` in flight, the tiny model after `PRETRAIN_STEPS` pretraining
steps), collected by `HFPolicy` with the cross-turn KV cache (the default) and without it.
Each records ``extra_info`` with the generated tokens per second and, once both ran, the
speed-up. No speed target is asserted here: the goal (>= 2x per rollout) and the measured
numbers are in ``docs/benchmarks.md``; ``scripts/bench_rollout.py`` measures whole RL steps
and where the rollout's time goes.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the demo needs torch (the torch extra)")

from xpgym.rollout.collector import RolloutCollector  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_rollout.py"
PRETRAIN_STEPS = 15
ROUNDS = 3

_MEDIANS: dict[str, float] = {}

pytestmark = pytest.mark.timeout(900)  # pretraining and 2 x 4 rollouts, on a busy machine


@pytest.fixture(scope="module")
def demo() -> Any:
    """``(recipe module, Args, pretrained weights)``."""
    spec = importlib.util.spec_from_file_location("bench_rollout", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    recipe = bench.load_recipe()
    torch.set_num_threads(recipe.idle_cores())  # as the demo: threads that fight cost up to 5x
    args = recipe.Args(pretrain_steps=PRETRAIN_STEPS)
    tokenizer, model, vec, _ = recipe.build(args)
    recipe.warm_start(model, tokenizer, vec, args)
    vec.close()
    yield recipe, args, model.state_dict()
    del sys.modules["bench_rollout"], sys.modules["train_torch"]


@pytest.mark.parametrize("kv_cache", [True, False], ids=["cached", "uncached"])
def test_demo_rollout(benchmark, demo, kv_cache):
    recipe, args, weights = demo
    args = dataclasses.replace(args, no_kv_cache=not kv_cache)
    tokenizer, model, vec, _ = recipe.build(args)
    model.load_state_dict(weights)
    collector = RolloutCollector(vec, recipe.make_policy(model, tokenizer, args, 1.0))
    seeds = iter(range(10**6))
    episodes = benchmark.pedantic(
        lambda: collector.collect(args.episodes_per_step, seed=next(seeds)),
        rounds=ROUNDS,
        warmup_rounds=1,
    )
    vec.close()
    assert len(episodes) == args.episodes_per_step
    tokens = sum(len(t.response_ids) for e in episodes for t in e.turns)
    median = benchmark.stats.stats.median
    key = "cached" if kv_cache else "uncached"
    _MEDIANS[key] = median
    benchmark.extra_info["generated_tokens_per_s_last_round"] = tokens / median
    if len(_MEDIANS) == 2:
        benchmark.extra_info["rollout_speedup"] = _MEDIANS["uncached"] / _MEDIANS["cached"]
