"""Crosswords: parsing, generated grids are valid crosswords, rewards, an anagram solver,
seeding and snapshots."""

from __future__ import annotations

import pickle
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.checks import check_env
from xpgym.envs.games.crosswords import (
    DIFFICULTIES,
    INVALID_REWARD,
    CrosswordsEnv,
    Entry,
    parse_answer,
    solution_grid,
)
from xpgym.envs.games.wordle import load_words

PRESETS = [None, "easy", "hard", "random"]


def started(seed: int = 0, **kwargs) -> CrosswordsEnv:
    env = CrosswordsEnv(**kwargs)
    env.reset(seed=seed)
    return env


def answer(key: str, word: str) -> str:
    return f"My answer: \\boxed{{{key}: {word}}}"


def hand_made(env: CrosswordsEnv) -> None:
    """Replace the puzzle with a checked one: STEAM across from (1, 1), TIGER down from (1, 2).

    S T E A M
    # I # # #
    # G # # #
    # E # # #
    # R # # #
    """
    env.rows, env.cols = 5, 5
    env.entries = [
        Entry(1, "across", "steam", 0, 0, "tsaem"),
        Entry(2, "down", "tiger", 0, 1, "regit"),
    ]


def runs(grid: list[str]) -> set[tuple[int, int, str, str]]:
    """Maximal runs of two or more letters: (row, col, direction, word), 0-based."""
    rows, cols = len(grid), len(grid[0])

    def letter(r: int, c: int) -> bool:
        return 0 <= r < rows and 0 <= c < cols and grid[r][c] != "#"

    found = set()
    for r in range(rows):
        for c in range(cols):
            for direction, (dr, dc) in (("across", (0, 1)), ("down", (1, 0))):
                if not letter(r, c) or letter(r - dr, c - dc):
                    continue  # not the first letter of a run
                word = ""
                while letter(r + len(word) * dr, c + len(word) * dc):
                    word += grid[r + len(word) * dr][c + len(word) * dc]
                if len(word) >= 2:
                    found.add((r, c, direction, word))
    return found


def connected(grid: list[str]) -> bool:
    cells = {(r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch != "#"}
    stack, seen = [min(cells)], {min(cells)}
    while stack:
        r, c = stack.pop()
        for nxt in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if nxt in cells and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen == cells


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{3 across: steam}", (3, "across", "steam")),
        ("\\boxed{3A: STEAM}", (3, "across", "steam")),
        ("\\boxed{ 12 down = tiger }", (12, "down", "tiger")),
        ("\\boxed{4-d - apple}", (4, "down", "apple")),
        ("\\boxed{1 across: x} \\boxed{2 down tiger}", (2, "down", "tiger")),
    ],
)
def test_parse_answer(text, expected):
    assert parse_answer(text)[1] == expected


@pytest.mark.parametrize(
    "text", ["3 across: steam", "\\boxed{across 3: steam}", "\\boxed{3 up: steam}", "\\boxed{3a}"]
)
def test_parse_answer_rejects_other_text(text):
    assert parse_answer(text)[1] is None


@pytest.mark.parametrize("difficulty", [None, "easy", "hard"])
def test_generated_grids_are_valid_numbered_crosswords(difficulty):
    words = set(load_words())
    letter_sets = defaultdict(set)
    for word in words:
        letter_sets["".join(sorted(word))].add(word)
    env = CrosswordsEnv(difficulty=difficulty)
    for seed in range(25):
        env.reset(seed=seed)
        grid = solution_grid(env.rows, env.cols, env.entries)
        assert max(env.rows, env.cols) <= env.size
        # every run of letters is exactly one entry, and letters agree where entries cross
        assert runs(grid) == {(e.row, e.col, e.direction, e.answer) for e in env.entries}, seed
        assert connected(grid), seed
        assert len(env.entries) == env.num_words == len({e.answer for e in env.entries})
        starts = sorted({(e.row, e.col) for e in env.entries})
        for entry in env.entries:
            assert entry.number == starts.index((entry.row, entry.col)) + 1
            assert env.min_length <= len(entry.answer) <= env.max_length
            assert sorted(entry.anagram) == sorted(entry.answer)
            assert entry.anagram != entry.answer
            assert letter_sets["".join(sorted(entry.answer))] == {entry.answer}


def test_reset_shows_rules_grid_and_clues_with_first_letters():
    env = CrosswordsEnv(difficulty="easy")
    obs, info = env.reset(seed=1)
    assert "\\boxed{NUMBER DIRECTION: WORD}" in obs
    assert "9 turns" in obs
    assert info == {
        "difficulty": "easy",
        "rows": env.rows,
        "cols": env.cols,
        "num_words": 3,
        "max_turns": 9,
    }
    shown = [
        [ch if ch == "#" else "." for ch in row]
        for row in solution_grid(env.rows, env.cols, env.entries)
    ]
    for entry in env.entries:
        shown[entry.row][entry.col] = entry.answer[0].upper()
        assert (
            f"{entry.key} ({len(entry.answer)} letters, from row {entry.row + 1}, column "
            f"{entry.col + 1}): anagram of {entry.anagram.upper()}, starts with "
            f"{entry.answer[0].upper()}; so far: {entry.answer[0].upper()} _"
        ) in obs
    for r, row in enumerate(shown, start=1):
        assert f"\n{r} {' '.join(row)}\n" in obs


def test_hard_preset_shows_no_first_letters():
    obs, _ = CrosswordsEnv(difficulty="hard").reset(seed=0)
    assert "starts with" not in obs
    assert "so far: _ _ _ _ _ _" in obs


def test_right_wrong_and_last_answers():
    env = started()
    hand_made(env)
    obs, reward, terminated, truncated, info = env.step(answer("1 across", "steam"))
    assert (reward, terminated, truncated) == (0.1, False, False)
    assert info == {
        "correct": False,
        "invalid_action": False,
        "parsed_action": "1 across: steam",
        "turn": 1,
        "hit": True,
        "solved": 1,
    }
    assert "1 S T E A M" in obs
    assert "2 down (5 letters, from row 1, column 2): anagram of REGIT, starts with T; " in obs
    assert "so far: T _ _ _ _" in obs
    obs, reward, terminated, _, info = env.step(answer("2d", "tiler"))
    assert (reward, terminated, info["hit"], info["invalid_action"]) == (0.0, False, False, False)
    assert "2 down: TILER is wrong" in obs
    obs, reward, terminated, truncated, info = env.step(answer("2 down", "TIGER"))
    assert (reward, terminated, truncated, info["correct"]) == (1.0, True, False, True)
    assert "complete" in obs


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("steam", "no \\boxed{} found"),
        ("\\boxed{steam}", "is not an answer"),
        (answer("1 down", "steam"), "there is no entry 1 down"),
        (answer("3 across", "steam"), "there is no entry 3 across"),
        (answer("1 across", "stem"), "1 across has 5 letters, STEM has 4"),
    ],
)
def test_invalid_answers_are_penalised_and_change_nothing(action, message):
    env = started()
    hand_made(env)
    obs, reward, terminated, truncated, info = env.step(action)
    assert reward == INVALID_REWARD == -0.1
    assert (terminated, truncated, info["invalid_action"], info["solved"]) == (
        False,
        False,
        True,
        0,
    )
    assert message in obs
    assert env.solved == []


def test_answering_a_solved_entry_again_is_invalid():
    env = started()
    hand_made(env)
    env.step(answer("1 across", "steam"))
    obs, reward, *_, info = env.step(answer("1 across", "steam"))
    assert (reward, info["invalid_action"]) == (-0.1, True)
    assert "1 across is already solved" in obs


def test_turn_limit_truncates_and_gives_the_answers():
    env = started(max_turns=2)
    hand_made(env)
    env.step(answer("1 across", "steam"))
    obs, reward, terminated, truncated, _ = env.step(answer("2 down", "tiler"))
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert "The missing answers were: 2 down TIGER." in obs


def solve(env: CrosswordsEnv) -> float:
    """Answer each clue with the only list word that has its letters (and fits the pattern)."""
    by_letters = defaultdict(list)
    for word in load_words():
        by_letters["".join(sorted(word))].append(word)
    total = 0.0
    for entry in list(env.entries):
        options = by_letters["".join(sorted(entry.anagram))]
        if env.reveal_first:
            options = [w for w in options if w[0] == entry.answer[0]]
        _, reward, terminated, _, info = env.step(answer(entry.key, options[0]))
        total += reward
    assert terminated
    assert info["correct"]
    return total


@pytest.mark.parametrize("difficulty", [None, "easy", "hard"])
def test_anagram_solver_wins_every_seed(difficulty):
    env = CrosswordsEnv(difficulty=difficulty)
    for seed in range(25):
        env.reset(seed=seed)
        assert solve(env) == pytest.approx(1.0 + 0.1 * (env.num_words - 1)), seed


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
    check_env(CrosswordsEnv(difficulty=difficulty))


def test_same_seed_same_puzzle_and_random_draws_both_presets():
    assert started(4).entries == started(4).entries
    assert len({tuple(started(s).entries) for s in range(10)}) == 10
    drawn = {CrosswordsEnv(difficulty="random").reset(seed=s)[1]["difficulty"] for s in range(30)}
    assert drawn == {"easy", "hard"}


def test_set_state_round_trip_and_frozen_snapshot():
    env = started(seed=6, difficulty="random")
    first_entry = env.entries[0]
    env.step(answer(first_entry.key, first_entry.answer))
    snapshot = env.get_state()
    frozen = pickle.dumps(snapshot)
    first = [env.step(env.sample_random_action()) for _ in range(4)]
    other = CrosswordsEnv(difficulty="random")
    other.set_state(snapshot)
    assert other.solved == [first_entry.key]
    assert [other.step(other.sample_random_action()) for _ in range(4)] == first
    assert pickle.dumps(snapshot) == frozen


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_presets(difficulty):
    env = CrosswordsEnv(difficulty=difficulty)
    _, info = env.reset(seed=0)
    preset = DIFFICULTIES[difficulty]
    assert (info["num_words"], info["max_turns"]) == (preset.num_words, preset.max_turns)
    assert (env.size, env.min_length, env.max_length, env.reveal_first) == (
        preset.size,
        preset.min_length,
        preset.max_length,
        preset.reveal_first,
    )


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"difficulty": "medium"}, ValueError),
        ({"min_length": 2}, ValueError),
        ({"min_length": 7, "max_length": 6}, ValueError),
        ({"max_length": 10, "size": 9}, ValueError),
        ({"num_words": 0}, ValueError),
        ({"max_turns": 0}, ValueError),
        ({"reveal_first": 1}, TypeError),
        ({"size": "9"}, TypeError),
        ({"words": ["Steam"]}, ValueError),
        ({"words": ["steam", "meats", "tiger"], "num_words": 2}, ValueError),
    ],
)
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error):
        CrosswordsEnv(**kwargs)
