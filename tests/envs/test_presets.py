"""Game presets: resolving a difficulty, putting keyword overrides into a preset, and the
`PresetEnv` base (preset per episode, the random draw, the state snapshot)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

from xpgym.envs.common.presets import PresetEnv, override_preset, resolve_presets


class Size(NamedTuple):
    rows: int
    cols: int


PRESETS = {"easy": Size(3, 3), "hard": Size(9, 9)}


def test_resolve_presets_by_name_default_and_random():
    assert resolve_presets(None, PRESETS, Size(5, 5)) == {None: Size(5, 5)}
    assert resolve_presets("hard", PRESETS, Size(5, 5)) == {"hard": Size(9, 9)}
    assert resolve_presets("random", PRESETS, Size(5, 5)) == PRESETS
    with pytest.raises(ValueError, match="'random' or one of"):
        resolve_presets("medium", PRESETS, Size(5, 5))


def test_override_preset_keeps_none_fields_and_converts_to_int():
    settings = override_preset(Size(3, 3), (None, np.int64(7)), "GridEnv")
    assert settings == Size(3, 7)
    assert type(settings) is Size
    assert type(settings.cols) is int


@pytest.mark.parametrize("bad", [True, 2.0, "4"])
def test_override_preset_refuses_non_ints_naming_the_field(bad):
    with pytest.raises(TypeError, match=r"GridEnv: cols must be an int, got"):
        override_preset(Size(3, 3), (None, bad), "GridEnv")


def test_override_preset_needs_one_value_per_field():
    with pytest.raises(ValueError, match=r"shorter|longer"):
        override_preset(Size(3, 3), (None,), "GridEnv")


class GridGame(PresetEnv[Size]):
    """A toy preset game: one random cell of a rows x cols grid per episode."""

    def __init__(self, difficulty: str | None = None) -> None:
        super().__init__(difficulty, resolve_presets(difficulty, PRESETS, Size(5, 5)))
        self.cell = 0

    def _apply_preset(self, settings: Size) -> None:
        self.rows, self.cols = settings

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.cell = int(self.np_random.integers(self.rows * self.cols))
        return f"{self.rows}x{self.cols}", {"difficulty": self.episode_difficulty}

    def step(self, action):
        return "", 0.0, True, False, {}

    def sample_random_action(self):
        return "0"

    def _episode_state(self):
        return {"cell": self.cell}

    def _restore_episode_state(self, state):
        self.cell = state["cell"]


def test_preset_env_applies_its_preset_at_construction():
    env = GridGame("hard")
    assert (env.difficulty, env.episode_difficulty, env.rows, env.cols) == ("hard", "hard", 9, 9)
    env = GridGame()
    assert (env.difficulty, env.episode_difficulty, env.rows) == (None, None, 5)


def test_random_draws_each_episodes_preset_from_np_random():
    env = GridGame("random")
    assert env.episode_difficulty == "easy"  # the first preset until the first reset
    drawn = [env.reset(seed=seed)[1]["difficulty"] for seed in range(20)]
    assert set(drawn) == {"easy", "hard"}
    assert drawn == [GridGame("random").reset(seed=seed)[1]["difficulty"] for seed in range(20)]


def test_the_draw_comes_first_and_only_with_several_presets():
    single = GridGame("hard")
    single.reset(seed=3)
    assert single.cell == int(np.random.default_rng(3).integers(81))
    several = GridGame("random")
    several.reset(seed=3)
    rng = np.random.default_rng(3)
    size = [Size(3, 3), Size(9, 9)][int(rng.integers(2))]
    assert several.cell == int(rng.integers(size.rows * size.cols))


def test_state_snapshot_holds_the_preset_the_game_state_and_the_rng():
    env = GridGame("random")
    env.reset(seed=1)
    state = env.get_state()
    assert list(state) == ["choice", "cell", "rng"]
    other = GridGame("random")
    other.set_state(state)
    assert (other.episode_difficulty, other.rows, other.cell) == (
        env.episode_difficulty,
        env.rows,
        env.cell,
    )
    assert other.np_random.integers(10**9) == env.np_random.integers(10**9)
