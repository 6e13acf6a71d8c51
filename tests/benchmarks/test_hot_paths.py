r"""Speed of three hot paths (pytest-benchmark): ``pytest tests/benchmarks --benchmark-only
-k hot_paths``.

The default test run skips benchmarks (``--benchmark-skip`` in ``pyproject.toml``); the unit
tests check what these functions return, never how fast. Measured here:

* `generate_puzzle` for a hard 9x9 Sudoku (30 givens), the slowest preset's reset: budget
  50 ms per puzzle;
* `last_boxed` on hostile input (``\boxed{`` repeated, one ``}`` at the end) at two sizes:
  the time should grow linearly with the size (4x the input, about 4x the time), never
  quadratically;
* `ChatPromptBuilder.extend`, the prompt of every turn after the first in a rollout: one
  turn of a 16-turn ChatML conversation (a 20- or 300-character observation, a 41-token
  reply) over the byte-level tiny tokenizer (`random_byte_lm.tiny_tokenizer`, a real
  ``transformers`` tokenizer built offline).

No budget is asserted here; ``extra_info`` records the median in milliseconds (per turn in
microseconds for `extend`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from xpgym.core.chat import ChatPromptBuilder
from xpgym.envs.common.answers import last_boxed
from xpgym.envs.games.sudoku import generate_puzzle

ROUNDS = 20
TURNS = 16


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


@pytest.mark.parametrize("observation_chars", [20, 300])
def test_chat_prompt_extend_per_turn(benchmark: Any, observation_chars: int) -> None:
    """Each round appends `TURNS` turns (a 40-token reply, an observation of
    `observation_chars` characters) to a conversation; ``extra_info`` records the median time
    of one turn in microseconds."""
    from random_byte_lm import EOS_ID, tiny_tokenizer

    tokenizer = tiny_tokenizer()
    builder = ChatPromptBuilder(tokenizer, system_prompt="You play a guessing game.")
    first = builder.start("Guess the number between 1 and 100.")
    reply = [
        *tokenizer.encode("I guess 50, as it halves the range 1-100.", add_special_tokens=False)
    ]
    reply.append(EOS_ID)
    board = ("Too high. Remaining range: 1-49. Turns left: 12. " * 7)[:observation_chars]

    def conversation() -> list[int]:
        prompt = first
        for _ in range(TURNS):
            prompt = builder.extend(prompt, reply, board)
        return prompt

    prompt = benchmark.pedantic(conversation, rounds=ROUNDS, warmup_rounds=1)
    assert len(prompt) > TURNS * (len(reply) + len(board))
    benchmark.extra_info["median_us_per_turn"] = round(
        benchmark.stats.stats.median / TURNS * 1e6, 1
    )
