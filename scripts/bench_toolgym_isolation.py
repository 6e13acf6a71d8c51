"""Time one toolgym tool call in each isolation mode (inline snapshot vs forked process).

    python scripts/bench_toolgym_isolation.py [--calls 200]

Plays ``SetDPTableCell`` on a hard EditDistance task (a 10 x 10 table in the state) and prints
the mean wall time per `step()` for ``isolation="inline"`` and ``isolation="process"``.
"""

from __future__ import annotations

import argparse
import json
import time

from xpgym.envs.toolgym.edit_distance import EditDistanceEnv


def time_per_call(isolation: str, calls: int) -> float:
    """Mean seconds per step of one tool call under `isolation`."""
    env = EditDistanceEnv(
        difficulty="hard", isolation=isolation, tool_timeout=10.0, max_tool_calls=calls + 1
    )
    env.reset(seed=0)
    action = json.dumps({"name": "SetDPTableCell", "parameters": {"i": 1, "j": 1, "value": 3}})
    start = time.perf_counter()
    for _ in range(calls):
        env.step(action)
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    for isolation in ("inline", "process"):
        print(f"{isolation:8s} {time_per_call(isolation, args.calls) * 1e3:8.3f} ms per call")


if __name__ == "__main__":
    main()
