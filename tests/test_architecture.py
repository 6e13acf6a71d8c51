"""The dependency rules of docs/architecture.md hold (checked by scripts/import_graph.py), and
the package type-checks clean (mypy, configured in pyproject.toml)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "import_graph.py"


def _import_graph_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_package_keeps_its_dependency_rules() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_checker_names_each_broken_floor_rule() -> None:
    graph = _import_graph_script()
    planted = {
        "xpgym.core.trajectory": {"xpgym.core.wrappers.observation", "xpgym.core.env"},
        "xpgym.core.x": {"xpgym.rollout.collector"},
        "xpgym.envs.math.x": {"xpgym.envs.games.wordle", "xpgym.envs.common.answers"},
        "xpgym.envs.math.y": {"xpgym.training.advantages", "parity.core"},
        "xpgym.rollout.z": {"xpgym.training.layouts", "xpgym.core.chat"},
        "xpgym.training.w": {"xpgym.rollout.recorder"},
        "xpgym.eval.v": {"xpgym.adapters.verl", "xpgym.rollout.collector"},
        "xpgym.adapters.u": {"xpgym.rollout.runner", "xpgym.training.layouts", "xpgym.eval"},
    }
    assert graph.broken_rules(planted) == [
        "xpgym.adapters.u imports xpgym.eval: xpgym.adapters may import only xpgym,"
        " xpgym.core, xpgym.rollout, xpgym.training",
        "xpgym.core.trajectory imports xpgym.core.wrappers.observation: records import no"
        " wrapper, vector env, tool or sandbox",
        "xpgym.core.x imports xpgym.rollout.collector: xpgym.core imports no other xpgym package",
        "xpgym.envs.math.x imports xpgym.envs.games.wordle: no env family imports another"
        " (shared helpers live in xpgym.envs.common)",
        "xpgym.envs.math.y imports parity.core: xpgym never imports recipes or parity",
        "xpgym.envs.math.y imports xpgym.training.advantages: xpgym.envs may import only"
        " xpgym.core",
        "xpgym.eval.v imports xpgym.adapters.verl: xpgym.eval may import only xpgym,"
        " xpgym.core, xpgym.rollout",
        "xpgym.rollout.z imports xpgym.training.layouts: xpgym.rollout may import only xpgym.core",
        "xpgym.training.w imports xpgym.rollout.recorder: xpgym.training may import only"
        " xpgym.core",
    ]


def test_a_package_without_a_rule_is_named() -> None:
    graph = _import_graph_script()
    assert graph.broken_rules({"xpgym.newpackage.m": set()}) == [
        "xpgym.newpackage has no rule in ALLOWED"
    ]


def test_the_checker_names_every_import_circle() -> None:
    graph = _import_graph_script()
    planted = {
        "xpgym.core.a": {"xpgym.core.b"},
        "xpgym.core.b": {"xpgym.core.c"},
        "xpgym.core.c": {"xpgym.core.a", "xpgym.core.d"},
        "xpgym.core.d": set(),
        "xpgym.core.e": {"xpgym.core.f"},
        "xpgym.core.f": {"xpgym.core.e"},
    }
    assert graph.broken_rules(planted) == [
        "import circle: xpgym.core.a -> xpgym.core.b -> xpgym.core.c -> xpgym.core.a",
        "import circle: xpgym.core.e -> xpgym.core.f -> xpgym.core.e",
    ]
    assert graph.import_circles({"parity.a": {"parity.b"}, "parity.b": {"parity.a"}}) == [
        ["parity.a", "parity.b", "parity.a"]
    ]


def test_an_import_of_a_package_name_is_an_import_of_the_package_not_its_submodules(
    tmp_path: Path,
) -> None:
    graph = _import_graph_script()
    source = tmp_path / "m.py"
    source.write_text("from xpgym.core import chat, registry\nfrom xpgym.core.env import Env\n")
    known = {"xpgym.core", "xpgym.core.chat", "xpgym.core.registry", "xpgym.core.env"}
    assert set(graph.imported_modules(source, known, name="pkg.m")) == {
        "xpgym.core.chat",
        "xpgym.core.registry",
        "xpgym.core.env",
    }


def test_the_package_type_checks_clean() -> None:
    if shutil.which("mypy") is None and importlib.util.find_spec("mypy") is None:
        pytest.skip('mypy is a dev dependency: pip install -e ".[dev]"')
    done = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr
