"""WordSearch: parsing, generation invariants, rewards, a scanning solver, seeding, snapshots."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.checks import check_env
from xpgym.envs.games.word_search import (
    DIFFICULTIES,
    INVALID_REWARD,
    WordSearchEnv,
    occurrences,
    parse_claim,
)

PRESETS = [None, "easy", "hard", "random"]

# Written out here, independently of the module: compass name -> (row step, column step).
STEPS = {
    "N": (-1, 0),
    "NE": (-1, 1),
    "E": (0, 1),
    "SE": (1, 1),
    "S": (1, 0),
    "SW": (1, -1),
    "W": (0, -1),
    "NW": (-1, -1),
}


def started(seed: int = 0, **kwargs) -> WordSearchEnv:
    env = WordSearchEnv(**kwargs)
    env.reset(seed=seed)
    return env


def claim(word: str, row: int, col: int, direction: str) -> str:
    return f"Found it: \\boxed{{{word} {row} {col} {direction}}}"


def scan(grid: list[str], word: str) -> list[tuple[int, int, str]]:
    """Every 1-based (row, col, direction) where `word` reads in `grid`."""
    size = len(grid)
    hits = []
    for r in range(size):
        for c in range(size):
            for name, (dr, dc) in STEPS.items():
                cells = [(r + i * dr, c + i * dc) for i in range(len(word))]
                if (
                    all(0 <= y < size and 0 <= x < size for y, x in cells)
                    and "".join(grid[y][x] for y, x in cells) == word
                ):
                    hits.append((r + 1, c + 1, name))
    return hits


def hand_made(env: WordSearchEnv) -> None:
    """Replace the episode's puzzle with a checked 4x4 one: CAT (E from 1 1), DOG (S from
    2 4), TOP (NE from 4 1)."""
    env.grid = ["catd", "xqpo", "zoyg", "tkwv"]
    env.placements = {"cat": (0, 0, "E"), "dog": (0, 3, "S"), "top": (3, 0, "NE")}
    env.words = ["cat", "dog", "top"]
    env.size = 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{apple 2 5 SE}", ("apple", 2, 5, "SE")),
        ("\\boxed{ APPLE (2, 5) se }", ("apple", 2, 5, "SE")),
        ("\\boxed{apple,2,5,e}", ("apple", 2, 5, "E")),
        ("\\boxed{x 1 1 N} then \\boxed{dog 10 3 nw}", ("dog", 10, 3, "NW")),
    ],
)
def test_parse_claim_reads_word_cell_and_direction(text, expected):
    assert parse_claim(text)[1] == expected


@pytest.mark.parametrize(
    "text",
    ["apple 2 5 SE", "\\boxed{apple 2 5}", "\\boxed{apple 2 5 UP}", "\\boxed{2 5 SE apple}", ""],
)
def test_parse_claim_rejects_other_text(text):
    assert parse_claim(text)[1] is None


def test_occurrences_counts_every_direction():
    grid = ["cats", "xaxx", "xxtx", "xxxs"]
    assert sorted(occurrences(grid, "cats")) == [(0, 0, "E"), (0, 0, "SE")]
    assert sorted(occurrences(grid, "stac")) == [(0, 3, "W"), (3, 3, "NW")]
    assert occurrences(grid, "dog") == []


@pytest.mark.parametrize("difficulty", [None, "easy", "hard"])
def test_every_hidden_word_occurs_exactly_once_where_placed(difficulty):
    env = WordSearchEnv(difficulty=difficulty)
    for seed in range(25):
        env.reset(seed=seed)
        assert len(env.grid) == env.size
        assert all(len(row) == env.size and row.isalpha() and row.islower() for row in env.grid)
        assert len(env.words) == env.num_words == len(set(env.words))
        for word, (row, col, direction) in env.placements.items():
            assert direction in env.directions
            assert scan(env.grid, word) == [(row + 1, col + 1, direction)], (seed, word)


def test_reset_shows_grid_words_directions_and_format():
    env = WordSearchEnv(difficulty="easy")
    obs, info = env.reset(seed=3)
    assert info == {
        "difficulty": "easy",
        "size": 6,
        "num_words": 3,
        "directions": ["E", "S"],
        "max_turns": 10,
    }
    for r, row in enumerate(env.grid, start=1):
        assert f"{r} " + " ".join(row.upper()) in obs
    assert "Words to find (3): " + ", ".join(w.upper() for w in env.words) in obs
    assert "E (left to right), S (down)" in obs
    assert "\\boxed{WORD ROW COL DIR}" in obs
    assert "10 turns" in obs


def test_hits_misses_and_the_last_word():
    env = started(difficulty="easy")
    hand_made(env)
    obs, reward, terminated, truncated, info = env.step(claim("dog", 1, 4, "S"))
    assert (reward, terminated, truncated) == (0.1, False, False)
    assert info == {
        "correct": False,
        "invalid_action": False,
        "parsed_action": "dog 1 4 s",
        "turn": 1,
        "hit": True,
        "found": 1,
    }
    assert "yes, DOG is at row 1, column 4, going S" in obs
    assert "Still to find (2): CAT, TOP" in obs
    obs, reward, *_, info = env.step(claim("cat", 1, 1, "S"))
    assert (reward, info["hit"], info["invalid_action"]) == (0.0, False, False)
    assert "no, CAT does not read from row 1, column 1, going S" in obs
    env.step(claim("cat", 1, 1, "E"))
    obs, reward, terminated, truncated, info = env.step(claim("top", 4, 1, "NE"))
    assert (reward, terminated, truncated, info["correct"]) == (1.0, True, False, True)
    assert "You found every word!" in obs


def test_a_word_reads_from_either_end_only_as_written():
    env = started(difficulty="easy")
    hand_made(env)
    _, reward, *_ = env.step(claim("cat", 1, 3, "W"))  # t-a-c: the word backwards
    assert reward == 0.0
    _, reward, *_ = env.step(claim("top", 4, 1, "N"))  # runs t-z-x-c
    assert reward == 0.0


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("I think it is cat", "no \\boxed{} found"),
        ("\\boxed{cat}", "is not a claim"),
        (claim("cow", 1, 1, "E"), "COW is not one of the words to find"),
        (claim("cat", 0, 1, "E"), "cell (0, 1) is outside the 4x4 grid"),
        (claim("cat", 1, 5, "E"), "cell (1, 5) is outside the 4x4 grid"),
    ],
)
def test_invalid_claims_are_penalised_and_change_nothing(action, message):
    env = started(difficulty="easy")
    hand_made(env)
    obs, reward, terminated, truncated, info = env.step(action)
    assert reward == INVALID_REWARD == -0.1
    assert (terminated, truncated, info["invalid_action"], info["found"]) == (
        False,
        False,
        True,
        0,
    )
    assert message in obs
    assert env.found == []


def test_claiming_a_found_word_again_is_invalid():
    env = started(difficulty="easy")
    hand_made(env)
    env.step(claim("cat", 1, 1, "E"))
    obs, reward, *_, info = env.step(claim("cat", 1, 1, "E"))
    assert (reward, info["invalid_action"], info["found"]) == (-0.1, True, 1)
    assert "CAT is already found" in obs


def test_turn_limit_truncates_and_reveals_the_missing_words():
    env = started(difficulty="easy", max_turns=2)
    hand_made(env)
    env.step(claim("cat", 1, 1, "E"))
    obs, reward, terminated, truncated, info = env.step("pass")
    assert (reward, terminated, truncated, info["correct"]) == (-0.1, False, True, False)
    assert "DOG at row 1, column 4, going S; TOP at row 4, column 1, going NE" in obs


@pytest.mark.parametrize("difficulty", [None, "easy", "hard"])
def test_scanning_solver_wins_every_seed(difficulty):
    env = WordSearchEnv(difficulty=difficulty)
    for seed in range(25):
        _, info = env.reset(seed=seed)
        total = 0.0
        for word in list(env.words):
            (row, col, direction) = scan(env.grid, word)[0]
            _, reward, terminated, truncated, info = env.step(claim(word, row, col, direction))
            total += reward
        assert (terminated, truncated, info["correct"]) == (True, False, True), seed
        assert total == pytest.approx(1.0 + 0.1 * (env.num_words - 1))


_FUZZ_ENV = started()
_FUZZ_START = _FUZZ_ENV.get_state()


@settings(max_examples=300, deadline=None)
@given(st.text() | st.builds(lambda s: f"\\boxed{{{s}}}", st.text()))
def test_any_text_is_a_valid_step(action):
    env = _FUZZ_ENV
    env.set_state(_FUZZ_START)
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str)
    assert reward in (1.0, 0.1, 0.0, -0.1)
    assert type(terminated) is bool
    assert type(truncated) is bool
    assert info["invalid_action"] is (reward == -0.1)


@pytest.mark.parametrize("difficulty", PRESETS)
def test_check_env_passes(difficulty):
    check_env(WordSearchEnv(difficulty=difficulty))


def test_same_seed_same_puzzle_and_random_draws_both_presets():
    assert started(7).grid == started(7).grid
    assert len({tuple(started(s).grid) for s in range(10)}) == 10
    drawn = {WordSearchEnv(difficulty="random").reset(seed=s)[1]["difficulty"] for s in range(30)}
    assert drawn == {"easy", "hard"}


def test_set_state_round_trip_and_frozen_snapshot():
    env = started(seed=2, difficulty="random")
    word = env.words[0]
    env.step(claim(word, *scan(env.grid, word)[0]))
    snapshot = env.get_state()
    frozen = pickle.dumps(snapshot)
    first = [env.step(env.sample_random_action()) for _ in range(4)]
    other = WordSearchEnv(difficulty="random")
    other.set_state(snapshot)
    assert other.found == [word]
    assert [other.step(other.sample_random_action()) for _ in range(4)] == first
    assert pickle.dumps(snapshot) == frozen


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_presets(difficulty):
    _, info = WordSearchEnv(difficulty=difficulty).reset(seed=0)
    size, num_words, directions, max_turns = DIFFICULTIES[difficulty]
    assert (info["size"], info["num_words"], tuple(info["directions"]), info["max_turns"]) == (
        size,
        num_words,
        directions,
        max_turns,
    )


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"difficulty": "medium"}, ValueError),
        ({"size": 3}, ValueError),
        ({"num_words": 0}, ValueError),
        ({"max_turns": 0}, ValueError),
        ({"directions": ["E", "UP"]}, ValueError),
        ({"directions": []}, ValueError),
        ({"directions": "SE"}, TypeError),
        ({"size": 6.0}, TypeError),
        ({"words": ["Apple"]}, ValueError),
        ({"words": ["cat", "dog"], "num_words": 3}, ValueError),
    ],
)
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error):
        WordSearchEnv(**kwargs)


def test_words_that_cannot_fit_raise_at_reset():
    # 20 different letters cannot fit in 16 cells.
    env = WordSearchEnv(size=4, num_words=5, words=["abcd", "efgh", "ijkl", "mnop", "qrst"])
    with pytest.raises(RuntimeError, match="could not hide 5 words"):
        env.reset(seed=0)
