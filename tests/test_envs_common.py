"""xpgym.envs.common: the env families share helpers only through it, and the helpers' old
import paths still work with a `DeprecationWarning`."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import xpgym.envs

ENVS = Path(xpgym.envs.__file__).parent


def imported_modules(path: Path) -> list[str]:
    """Every module or name `path` imports: ``a.b`` for ``import a.b``, ``a.b.c`` for ``from
    a.b import c`` (relative imports resolved against `path`'s package)."""
    package = ".".join(path.relative_to(ENVS.parent.parent).with_suffix("").parts[:-1])
    modules = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            modules += [f"{module}.{alias.name}" for alias in node.names]
    return modules


def family_imports() -> list[tuple[str, str, str]]:
    """``(family, file, imported env family)`` for every ``xpgym.envs.X`` import in a family."""
    found = []
    for path in sorted(ENVS.glob("*/**/*.py")):
        family = path.relative_to(ENVS).parts[0]
        for module in imported_modules(path):
            parts = module.split(".")
            if parts[:2] == ["xpgym", "envs"] and len(parts) > 2:
                found.append((family, str(path.relative_to(ENVS)), parts[2]))
    return found


def test_the_import_scan_sees_imports_of_common_and_of_the_own_family():
    targets = {(family, target) for family, _, target in family_imports()}
    assert ("games", "common") in targets
    assert ("games", "games") in targets


def test_no_env_family_imports_another():
    crossing = [
        f"{file} imports xpgym.envs.{target}"
        for family, file, target in family_imports()
        if target not in (family, "common")
    ]
    assert crossing == []


def test_common_imports_no_env_family():
    assert [t for family, _, t in family_imports() if family == "common" and t != "common"] == []


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
