"""xpgym.envs.common.arguments: which values the envs take as int and number arguments."""

from __future__ import annotations

import numpy as np
import pytest

from xpgym.envs.common.arguments import is_int, is_number


@pytest.mark.parametrize("value", [0, -3, np.int64(7), np.uint8(1)])
def test_python_and_numpy_integers_are_ints_and_numbers(value):
    assert is_int(value)
    assert is_number(value)


@pytest.mark.parametrize("value", [0.5, np.float32(2.0), float("nan")])
def test_floats_are_numbers_but_not_ints(value):
    assert is_number(value)
    assert not is_int(value)


@pytest.mark.parametrize("value", [True, False])
def test_a_bool_is_neither_an_int_nor_a_number(value):
    assert not is_int(value)
    assert not is_number(value)


@pytest.mark.parametrize("value", ["3", None, [1], 1j])
def test_other_values_are_neither(value):
    assert not is_int(value)
    assert not is_number(value)
