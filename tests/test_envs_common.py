"""xpgym.envs.common: the old import paths of the shared env helpers still work, with a
`DeprecationWarning`."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize(
    ("old_module", "name", "new_module"),
    [
        ("xpgym.envs.answers", "last_tagged", "xpgym.envs.common.answers"),
        ("xpgym.envs.math.boxed", "last_boxed", "xpgym.envs.common.answers"),
        ("xpgym.envs.datasets", "load_split", "xpgym.envs.common.datasets"),
        ("xpgym.envs.datasets", "pick_index", "xpgym.envs.common.datasets"),
        ("xpgym.envs.games.presets", "resolve_presets", "xpgym.envs.common.presets"),
        ("xpgym.envs.games.presets", "override_preset", "xpgym.envs.common.presets"),
    ],
)
def test_old_import_paths_still_work_and_warn(old_module, name, new_module):
    with pytest.warns(DeprecationWarning, match=rf"{old_module}\.{name} moved to {new_module}"):
        value = getattr(importlib.import_module(old_module), name)
    assert value is getattr(importlib.import_module(new_module), name)


def test_an_old_module_refuses_names_it_never_had():
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        _ = importlib.import_module("xpgym.envs.datasets").nothing
