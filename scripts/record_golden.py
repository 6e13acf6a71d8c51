"""Record a golden transcript: an env id, a seed, scripted actions, and what the env returned.

    python scripts/record_golden.py ENV_ID --seed 0 --action '\\boxed{5}' --action ...
    python scripts/record_golden.py ENV_ID --seed 0 --random-actions 8
    python scripts/record_golden.py toolgym:ID --seed 0 --oracle-actions 4 --action '...'

Writes `tests/envs/golden/<env id with ':' and '/' replaced by '__'>.json` (or `--out`).
`tests/test_golden_transcripts.py` replays every file there and fails on any difference,
so a behaviour change forces a new version id (or a deliberate re-recording).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import xpgym

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "tests" / "envs" / "golden"


def record(env_id: str, seed: int, actions: list[str]) -> dict[str, Any]:
    """Play `actions` from ``reset(seed=seed)``; stop early if the episode ends."""
    env = xpgym.make(env_id)
    observation, _ = env.reset(seed=seed)
    steps = []
    for action in actions:
        obs, reward, terminated, truncated, _ = env.step(action)
        steps.append(
            {
                "action": action,
                "observation": obs,
                "reward": reward,
                "terminated": terminated,
                "truncated": truncated,
            }
        )
        if terminated or truncated:
            break
    env.close()
    return {"env_id": env_id, "seed": seed, "reset_observation": observation, "steps": steps}


def golden_path(env_id: str) -> Path:
    return GOLDEN_DIR / (env_id.replace(":", "__").replace("/", "__") + ".json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env_id")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--action", action="append", default=[])
    parser.add_argument("--random-actions", type=int, default=0)
    parser.add_argument(
        "--oracle-actions",
        type=int,
        default=0,
        help="start with the first N actions of the env's oracle (envs with solve())",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    actions = []
    if args.oracle_actions:
        env = xpgym.make(args.env_id)
        env.reset(seed=args.seed)
        actions += env.unwrapped.solve()[: args.oracle_actions]
    actions += args.action
    if args.random_actions:
        env = xpgym.make(args.env_id)
        env.reset(seed=args.seed)
        actions += [env.sample_random_action() for _ in range(args.random_actions)]
    transcript = record(args.env_id, args.seed, actions)
    out = args.out or golden_path(args.env_id)
    out.write_text(json.dumps(transcript, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out} ({len(transcript['steps'])} steps)")


if __name__ == "__main__":
    main()
