"""Competitive-programming envs: ``code:<Name>-v0`` (and ``eval:CodeContest-v0``).

The model writes a Python solution in a fenced code block; it runs on the problem's tests in
the sandbox (`xpgym.envs.code.env` has the rules and rewards, `xpgym.envs.code.judge` the
code-block rule, verdicts and output comparison, `xpgym.envs.code.problems` the data formats).

* ``code:Sample-v0``: the 16 problems shipped with xpgym, single-turn; ``-feedback``: up to 4
  attempts with test feedback. Both work offline.
* ``code:CodeContest-v0``, ``code:Taco8k-v0``, ``code:PrimeIntellect15k-v0`` and
  ``eval:CodeContest-v0``: GEM's Hugging Face datasets (``axon-rl/...``), downloaded on first
  use with the ``datasets`` package (``requires_download=True``).
"""

from __future__ import annotations

from xpgym.core.registry import register

_ENTRY_POINT = "xpgym.envs.code.env:CodeEnv"

# GEM's code datasets: (id, hub dataset, split, max_tests, description).
_HUB_DATASETS = (
    (
        "code:CodeContest-v0",
        "axon-rl/CodeContest",
        "train",
        12,
        "DeepMind CodeContests (train split, GEM's copy): stdin/stdout problems.",
    ),
    (
        "code:Taco8k-v0",
        "axon-rl/TACO-8k",
        "train",
        12,
        "8k TACO problems (GEM's copy): stdin/stdout and function-call tests.",
    ),
    (
        "code:PrimeIntellect15k-v0",
        "axon-rl/PrimeIntellect-15k",
        "train",
        12,
        "15k PrimeIntellect verifiable coding problems (GEM's copy).",
    ),
    (
        "eval:CodeContest-v0",
        "axon-rl/CodeContest",
        "test",
        None,
        "CodeContests test split (GEM's copy), every test run: strict pass@1.",
    ),
)


def register_envs() -> None:
    """Register the code ids; the entry point is imported only by `xpgym.make`."""
    register(
        "code:Sample-v0",
        _ENTRY_POINT,
        description="16 shipped Python problems (stdin/stdout and function tests); one try.",
    )
    register(
        "code:Sample-v0-feedback",
        _ENTRY_POINT,
        max_turns=4,
        description="The 16 shipped problems; up to 4 attempts, failed tests shown.",
    )
    for env_id, dataset, split, max_tests, description in _HUB_DATASETS:
        register(
            env_id,
            _ENTRY_POINT,
            requires_download=True,
            description=description,
            dataset=dataset,
            split=split,
            statement_key="problem",
            tests_key="tests",
            max_tests=max_tests,
        )
