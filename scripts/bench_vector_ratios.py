r"""The vector backends' own targets, measured in one process (issue 27 item 5).

    python scripts/bench_vector_ratios.py [--rounds 9] [--batches 1000] [--num-envs 64]
                                          [--out results/bench_vector_ratios.json]

`scripts/bench_vs_gem.py` measures every row in its own subprocess, which is right for
comparing libraries but makes the ratio of two rows carry the drift of a shared machine
between them. Here the workloads whose ratios are targets run in one process, interleaved
round by round (after one untimed round each), and each ratio is taken between medians:

* ``single``: one ``game:GuessTheNumber-v0-easy`` env, ``step`` and ``reset`` when the
  episode ends, for ``num_envs * batches`` steps;
* ``sync`` / ``thread``: ``num_envs`` of them in a `SyncVectorEnv` / `ThreadVectorEnv`,
  ``SAME_STEP`` (the same work as ``single``: every step is a real step, resets come on top),
  ``batches`` batch steps;
* ``cpu_sync`` / ``cpu_thread``: the same on the CPU-heavy env of ``tests/benchmarks``
  (``bench:LatinSquare-v0``), ``batches // 10`` batch steps.

Targets: sync >= 0.8x single; thread >= 1.0x sync (pure-Python envs). Writes the medians,
every sample and the ratios as JSON to `--out` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import xpgym

ROOT = Path(__file__).resolve().parent.parent
GUESS_ID = "game:GuessTheNumber-v0-easy"
CPU_ID = "bench:LatinSquare-v0"


def boxed_actions(count: int, numbers: int, high: int, seed: int = 0) -> list[str]:
    """`count` actions ``\\boxed{a b ...}`` of `numbers` uniform ints in 1..`high`."""
    rng = random.Random(seed)
    return [
        "\\boxed{" + " ".join(str(rng.randint(1, high)) for _ in range(numbers)) + "}"
        for _ in range(count)
    ]


def single_run(env_id: str, actions: list[str]) -> Callable[[], None]:
    """One env stepped through `actions`, reset whenever an episode ends."""
    env = xpgym.make(env_id)
    env.reset(seed=0)

    def run() -> None:
        step, reset = env.step, env.reset
        for action in actions:
            _, _, terminated, truncated, _ = step(action)
            if terminated or truncated:
                reset()

    return run


def vector_run(
    env_id: str, mode: str, batches: list[list[str]], closers: list[Callable[[], None]]
) -> Callable[[], None]:
    """A ``SAME_STEP`` vector env of `mode` stepped through `batches`."""
    vec = xpgym.make_vec(
        env_id,
        len(batches[0]),
        vectorization_mode=mode,
        vector_kwargs={"autoreset_mode": "SameStep"},
    )
    closers.append(vec.close)
    vec.reset(seed=0)

    def run() -> None:
        step = vec.step
        for batch in batches:
            step(batch)

    return run


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Build every workload, run them interleaved, return rates and ratios."""
    sys.path.insert(0, str(ROOT / "tests" / "benchmarks"))
    import cpu_heavy_env

    cpu_heavy_env.register()
    n = args.num_envs
    guess = boxed_actions(n * args.batches, 1, 10)
    cpu_batches = max(args.batches // 10, 1)
    cpu = boxed_actions(n * cpu_batches, 3, 8)
    guess_batches = [guess[i * n : (i + 1) * n] for i in range(args.batches)]
    cpu_split = [cpu[i * n : (i + 1) * n] for i in range(cpu_batches)]
    closers: list[Callable[[], None]] = []
    workloads = {
        "single": (single_run(GUESS_ID, guess), len(guess)),
        "sync": (vector_run(GUESS_ID, "sync", guess_batches, closers), len(guess)),
        "thread": (vector_run(GUESS_ID, "thread", guess_batches, closers), len(guess)),
        "cpu_sync": (vector_run(CPU_ID, "sync", cpu_split, closers), len(cpu)),
        "cpu_thread": (vector_run(CPU_ID, "thread", cpu_split, closers), len(cpu)),
    }
    samples: dict[str, list[float]] = {name: [] for name in workloads}
    try:
        for run, _ in workloads.values():
            run()  # untimed: first calls, the thread pool learning that steps do not block
        for round_index in range(args.rounds):
            for name, (run, steps) in workloads.items():
                start = time.perf_counter()
                run()
                samples[name].append(steps / (time.perf_counter() - start))
            print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        for close in closers:
            close()
    medians = {name: statistics.median(rates) for name, rates in samples.items()}
    return {
        "env_steps_per_s": medians,
        "samples": samples,
        "ratios": {
            "sync / single": medians["sync"] / medians["single"],
            "thread / sync": medians["thread"] / medians["sync"],
            "thread / sync (CPU-heavy)": medians["cpu_thread"] / medians["cpu_sync"],
        },
        "targets": {"sync / single": 0.8, "thread / sync": 1.0},
        "config": vars(args) | {"out": str(args.out)},
        "load_average": os.getloadavg(),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="timed rounds per workload")
    parser.add_argument("--batches", type=int, default=1000, help="batch steps per round")
    parser.add_argument("--num-envs", type=int, default=64, help="sub-envs per vector env")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "bench_vector_ratios.json")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.batches < 1 or args.num_envs < 1:
        parser.error("--rounds, --batches and --num-envs must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = measure(args)
    for name, rate in result["env_steps_per_s"].items():
        print(f"{name:12s} {rate:12,.0f} env-steps/s")
    for name, ratio in result["ratios"].items():
        target = result["targets"].get(name)
        print(f"{name:28s} {ratio:.3f}" + (f"  (target >= {target})" if target else ""))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
