"""Game presets: resolving a difficulty, and putting keyword overrides into a preset."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from xpgym.envs.common.presets import override_preset, resolve_presets


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
    import numpy as np

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
