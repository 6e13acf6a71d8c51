"""Write the golden episode batches of `parity.tokens.cases` to ``parity/tokens/golden/``.

    python -m parity.tokens.make_golden

Deterministic: each case is written from the hand-chosen shapes and rewards below, and the
token ids are drawn from ``numpy.random.default_rng(case index)`` inside the id ranges of
`parity.tokens.cases` (first prompt 1-99, policy 100-499, env/tool 500-999). Turn ``t + 1``'s prompt
is turn ``t``'s prompt, its response, then ``env`` fresh env/tool tokens (the token-exactness
contract of `xpgym.core.trajectory`). Sampler log-probs are ``-(id % 7 + 1) / 8`` per policy
token. Re-running gives byte-identical files; the parity tests check that.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from parity.tokens.cases import CASES, ENV_IDS, GOLDEN_DIR, POLICY_IDS, PROMPT_IDS
from xpgym.core.trajectory import Episode, Turn, save_episodes

__all__ = ["SPECS", "EpisodeSpec", "build_case", "main"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EpisodeSpec:
    """Shape of one golden episode.

    Attributes:
        group: ``group_id``.
        prompt: Tokens of the first prompt.
        turns: Per turn ``(response tokens, reward, env tokens added before the next turn)``
            (the last turn's env count is ignored).
        end: ``"terminated"`` or ``"truncated"``: the flag set on the last turn.
    """

    group: str
    prompt: int
    turns: tuple[tuple[int, float, int], ...]
    end: str = "terminated"


def _pair(group: str, prompt: int, turns: tuple[tuple[int, float, int], ...]) -> list[EpisodeSpec]:
    return [EpisodeSpec(group, prompt, turns), EpisodeSpec(group, prompt, turns, "truncated")]


SPECS: dict[str, list[EpisodeSpec]] = {
    "dense_multi_turn": [
        EpisodeSpec("g0", 3, ((2, 0.5, 2), (3, -0.25, 3), (1, 1.0, 0))),
        EpisodeSpec("g0", 3, ((4, 0.25, 1), (2, 0.75, 0)), "truncated"),
        EpisodeSpec("g1", 4, ((1, -0.5, 2), (2, 0.125, 2), (3, 1.5, 0))),
        EpisodeSpec("g1", 4, ((3, 1.0, 2), (1, -1.0, 0))),
    ],
    "discounted": [
        EpisodeSpec("g0", 3, ((2, 0.0, 2), (2, 0.5, 2), (2, 1.0, 0))),
        EpisodeSpec("g0", 3, ((1, 0.25, 3), (4, 0.0, 2), (1, -0.5, 1), (2, 2.0, 0))),
        EpisodeSpec("g1", 2, ((3, -0.125, 1), (1, 0.0, 0)), "truncated"),
        EpisodeSpec("g1", 2, ((2, 0.75, 2), (2, 0.0, 0))),
    ],
    "truncated_vs_terminated": [
        *_pair("g0", 3, ((2, 0.5, 2), (2, 0.0, 2), (1, 1.0, 0))),
        *_pair("g1", 2, ((3, -0.25, 1), (2, 0.125, 0))),
    ],
    "tool_turns": [
        EpisodeSpec("g0", 4, ((3, 0.0, 17), (2, 0.25, 12), (4, 1.0, 0))),
        EpisodeSpec("g0", 4, ((2, 0.0, 20), (5, -0.5, 0))),
        EpisodeSpec("g1", 3, ((4, 0.125, 15), (1, 0.0, 9), (2, 0.0, 11), (3, 0.75, 0))),
        EpisodeSpec("g1", 3, ((1, 0.5, 25), (2, 0.5, 0)), "truncated"),
    ],
    "grpo_groups": [
        EpisodeSpec("g0", 3, ((3, 1.0, 0),)),
        EpisodeSpec("g0", 3, ((2, 0.0, 0),)),
        EpisodeSpec("g0", 3, ((2, 0.25, 2), (1, 0.5, 0))),
        EpisodeSpec("g0", 3, ((4, 0.0, 0),)),
        EpisodeSpec("g1", 5, ((1, -0.5, 2), (2, 1.0, 2), (2, 0.0, 0))),
        EpisodeSpec("g1", 5, ((2, 0.75, 0),)),
        EpisodeSpec("g1", 5, ((3, 0.0, 1), (1, 0.0, 0)), "truncated"),
        EpisodeSpec("g1", 5, ((1, 2.0, 0),)),
        EpisodeSpec("g2", 2, ((2, 0.5, 0),)),
        EpisodeSpec("g2", 2, ((2, 0.5, 1), (3, 0.25, 0))),
        EpisodeSpec("g2", 2, ((5, -0.25, 0),)),
        EpisodeSpec("g2", 2, ((1, 1.25, 3), (1, -1.0, 0))),
    ],
    "ragged": [
        EpisodeSpec("g0", 2, ((1, 1.0, 0),)),
        EpisodeSpec("g0", 8, ((9, 0.0, 3), (1, 0.25, 1), (5, -0.5, 2), (2, 0.0, 4), (7, 1.0, 0))),
        EpisodeSpec("g1", 5, ((2, 0.5, 1), (8, 0.0, 0)), "truncated"),
        EpisodeSpec("g1", 3, ((6, -0.25, 6), (1, 0.125, 2), (3, 0.5, 0))),
        EpisodeSpec("g2", 7, ((1, 0.0, 2), (1, 0.0, 2), (1, 0.0, 2), (1, 0.75, 0))),
        EpisodeSpec("g2", 4, ((4, 0.375, 0),)),
    ],
    "single_episode_group": [
        EpisodeSpec("g0", 3, ((2, 0.5, 2), (2, 0.5, 0))),
        EpisodeSpec("g0", 3, ((3, 0.0, 1), (1, -0.25, 0))),
        EpisodeSpec("g1", 2, ((1, 1.0, 0),)),
        EpisodeSpec("g1", 2, ((2, 0.25, 2), (2, 0.0, 0)), "truncated"),
        EpisodeSpec("g2", 4, ((3, 0.75, 2), (1, 0.5, 0))),
    ],
    "all_equal_rewards": [
        EpisodeSpec("g0", 3, ((2, 0.0, 2), (3, 1.0, 0))),
        EpisodeSpec("g0", 3, ((1, 0.0, 4), (5, 1.0, 0))),
        EpisodeSpec("g1", 2, ((4, 0.0, 1), (1, 1.0, 0)), "truncated"),
        EpisodeSpec("g1", 2, ((2, 0.0, 3), (2, 1.0, 0))),
    ],
}
"""Episode shapes per case name (the keys equal `parity.tokens.cases.CASES` names)."""


def _draw(rng: np.random.Generator, ids: range, n: int) -> list[int]:
    return [int(i) for i in rng.integers(ids.start, ids.stop, size=n)]


def build_case(specs: Sequence[EpisodeSpec], seed: int) -> list[Episode]:
    """The episodes of `specs`, token ids drawn from ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    episodes = []
    for e, spec in enumerate(specs):
        prompt = _draw(rng, PROMPT_IDS, spec.prompt)
        turns = []
        for t, (n_response, reward, n_env) in enumerate(spec.turns):
            response = _draw(rng, POLICY_IDS, n_response)
            last = t == len(spec.turns) - 1
            turns.append(
                Turn(
                    observation=f"observation {t}",
                    action=f"action {t}",
                    reward=reward,
                    terminated=last and spec.end == "terminated",
                    truncated=last and spec.end == "truncated",
                    prompt_ids=list(prompt),
                    response_ids=response,
                    response_logprobs=[-((i % 7) + 1) / 8 for i in response],
                )
            )
            prompt = prompt + response + _draw(rng, ENV_IDS, n_env)
        episodes.append(Episode("parity:golden", seed=e, group_id=spec.group, turns=turns))
    return episodes


def main(argv: Sequence[str] | None = None) -> None:
    """Write every case (or only ``--out-dir`` elsewhere, for comparison)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out-dir", type=Path, default=GOLDEN_DIR)
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for index, case in enumerate(CASES):
        episodes = build_case(SPECS[case.name], seed=index)
        save_episodes(episodes, args.out_dir / f"{case.name}.jsonl")
        logger.info("wrote %s: %d episodes", case.name, len(episodes))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    main()
