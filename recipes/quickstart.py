"""Quickstart: play GuessTheNumber through a vector env with two scripted policies.

A first look at the env API, before the CPU training demo (`recipes/train_torch.py`). It
needs nothing but xpgym (no torch):

    python recipes/quickstart.py [--env game:GuessTheNumber-v0] [--episodes 200]

It plays `--episodes` episodes with a random policy and with binary search (what an RL
policy should learn), using a thread-backed vector env with NEXT_STEP autoreset, prints a
summary, and writes it to `results/quickstart.json`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import xpgym
from xpgym.core.wrappers import EpisodeStatistics
from xpgym.recipe_args import parse_dataclass_args


@dataclass
class Args:
    env: str = "game:GuessTheNumber-v0"
    episodes: int = 200
    num_envs: int = 8
    seed: int = 0
    out: Path = Path("results/quickstart.json")


class BinarySearch:
    """Keeps a [low, high] interval per sub-env and guesses its midpoint."""

    def __init__(self, num_envs: int) -> None:
        self.bounds = [(0, 0)] * num_envs

    def start(self, i: int, reset_info: dict) -> None:
        self.bounds[i] = (reset_info["min_number"], reset_info["max_number"])

    def update(self, i: int, feedback: str) -> None:
        low, high = self.bounds[i]
        guess = (low + high) // 2
        if "higher" in feedback:
            self.bounds[i] = (guess + 1, high)
        elif "lower" in feedback:
            self.bounds[i] = (low, guess - 1)

    def act(self, i: int) -> str:
        low, high = self.bounds[i]
        return f"\\boxed{{{(low + high) // 2}}}"


def play(args: Args, policy: str) -> dict[str, float]:
    """Play `args.episodes` episodes; return mean return, success rate and mean length."""
    vec = xpgym.make_vec(
        args.env, args.num_envs, vectorization_mode="thread", wrappers=[EpisodeStatistics]
    )
    searcher = BinarySearch(args.num_envs)
    _, infos = vec.reset(seed=args.seed)
    for i, info in enumerate(infos):
        searcher.start(i, info)
    episodes: list[dict[str, float]] = []
    while len(episodes) < args.episodes:
        if policy == "binary_search":
            actions = [searcher.act(i) for i in range(args.num_envs)]
        else:
            actions = list(vec.call("sample_random_action"))  # each sub-env's own RNG
        obs, _, terminated, _, infos = vec.step(actions)
        for i, info in enumerate(infos):
            if "episode" in info:  # the episode ended on this step
                episodes.append({**info["episode"], "success": float(terminated[i])})
            elif "min_number" in info:  # NEXT_STEP autoreset: this step was a reset
                searcher.start(i, info)
            else:
                searcher.update(i, obs[i])
    vec.close()
    episodes = episodes[: args.episodes]
    return {
        "mean_return": float(np.mean([e["return"] for e in episodes])),
        "success_rate": float(np.mean([e["success"] for e in episodes])),
        "mean_length": float(np.mean([e["length"] for e in episodes])),
    }


def main() -> None:
    args = parse_dataclass_args(Args, __doc__.splitlines()[0])
    start = time.perf_counter()
    summary = {"env": args.env, "episodes": args.episodes}
    for policy in ("random", "binary_search"):
        summary[policy] = play(args, policy)
        print(f"{policy:>14}: {summary[policy]}")
    summary["seconds"] = round(time.perf_counter() - start, 3)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
