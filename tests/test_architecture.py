"""The dependency rules of docs/architecture.md hold (checked by scripts/import_graph.py), and
the package type-checks clean (mypy, configured in pyproject.toml)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from script_modules import script_module

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "import_graph.py"


@pytest.fixture(scope="module")
def graph() -> Iterator[ModuleType]:
    """``scripts/import_graph.py`` as a module."""
    with script_module("import_graph") as module:
        yield module


def test_the_package_keeps_its_dependency_rules() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_checker_names_each_broken_floor_rule(graph: ModuleType) -> None:
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


def test_a_package_without_a_rule_is_named(graph: ModuleType) -> None:
    assert graph.broken_rules({"xpgym.newpackage.m": set()}) == [
        "xpgym.newpackage has no rule in ALLOWED"
    ]


def test_the_checker_names_every_import_circle(graph: ModuleType) -> None:
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
    graph: ModuleType, tmp_path: Path
) -> None:
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


# ---------------------------------------------------------------- the layout in the docs

ARCHITECTURE = ROOT / "docs" / "architecture.md"
DOCUMENTED_IN_FULL = ("xpgym", "xpgym/core", "xpgym/rollout", "xpgym/training")
"""Folders whose every module and package the layout block must name."""


def _layout_entries() -> dict[str, str]:
    """The layout block of docs/architecture.md: path -> its description.

    Each line is ``<indent><name(s)>  <description>``; two spaces of indent mean one level
    down; ``a.py, b.py`` names two entries; a line that starts with spaces only continues the
    description above it.
    """
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    entries: dict[str, str] = {}
    parents: list[str] = []
    last: list[str] = []
    for line in block.strip("\n").splitlines():
        indent = len(line) - len(line.lstrip(" "))
        names, _, description = line.strip().partition("  ")
        if indent >= 24:  # the description column: a continuation line
            for path in last:
                entries[path] += " " + line.strip()
            continue
        depth = indent // 2
        del parents[depth:]
        base = "/".join(p.rstrip("/") for p in parents)
        last = []
        for name in (n.strip() for n in names.split(",")):
            path = f"{base}/{name}".lstrip("/")
            entries[path] = description.strip()
            last.append(path)
        if names.endswith("/"):
            parents.append(names)
    return entries


def _named_in(description: str) -> list[str]:
    """The files and folders a description names: ``x/`` and ``x.py`` words (a pattern such
    as ``train_<framework>.py`` is not a name)."""
    words = [w.strip("(),;:`") for w in description.split()]
    return [w for w in words if w.endswith(("/", ".py")) and "<" not in w]


def _resolves(path: str, named: str) -> bool:
    """`named`, in the description of `path`, is inside `path`, beside it, or (with a slash
    inside it) a path from the repository's root."""
    if "/" in named.rstrip("/"):
        return (ROOT / named).exists()
    here = ROOT / path
    return (here / named).exists() or (here.parent / named).exists()


def test_every_path_the_architecture_page_names_exists() -> None:
    missing = []
    for path, description in _layout_entries().items():
        if not (ROOT / path).exists():
            missing.append(path)
        missing += [
            f"{named} (in the description of {path})"
            for named in _named_in(description)
            if not _resolves(path, named)
        ]
    assert missing == []


def test_the_architecture_page_names_every_module_of_the_three_floors() -> None:
    entries = _layout_entries()
    unnamed = []
    for folder in DOCUMENTED_IN_FULL:
        for child in sorted((ROOT / folder).iterdir()):
            if child.name.startswith(("_", ".")) and child.name != "__main__.py":
                continue
            if child.is_dir() and not (child / "__init__.py").exists():
                continue
            if child.is_file() and child.suffix != ".py":
                continue
            key = f"{folder}/{child.name}/" if child.is_dir() else f"{folder}/{child.name}"
            if key.rstrip("/") not in {e.rstrip("/") for e in entries}:
                unnamed.append(key)
    assert unnamed == []
