"""xpgym.envs.common: the helpers' old import paths still work with a `DeprecationWarning`.

That no env family imports another (they share helpers only through `xpgym.envs.common`) is
checked with the other dependency rules by ``scripts/import_graph.py --check``
(tests/test_architecture.py)."""

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
        ("xpgym.envs.math.answer_env", "Problem", "xpgym.envs.common.answer_env"),
        ("xpgym.envs.math.answer_env", "DEFAULT_INSTRUCTION", "xpgym.envs.common.answer_env"),
    ],
)
def test_old_import_paths_still_work_and_warn(old_module, name, new_module):
    with pytest.warns(DeprecationWarning, match=rf"{old_module}\.{name} moved to {new_module}"):
        value = getattr(importlib.import_module(old_module), name)
    assert value is getattr(importlib.import_module(new_module), name)


def test_the_old_boxed_answer_env_is_the_math_verify_one_under_its_new_name():
    from xpgym.envs.math.answer_env import MathAnswerEnv

    with pytest.warns(DeprecationWarning, match=r"BoxedAnswerEnv moved to .*\.MathAnswerEnv"):
        from xpgym.envs.math.answer_env import BoxedAnswerEnv
    assert BoxedAnswerEnv is MathAnswerEnv


def test_an_old_module_refuses_names_it_never_had():
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        _ = importlib.import_module("xpgym.envs.datasets").nothing
