"""The reference package's boundaries: importing the package or the model builder does not
import torch, and no recipe is imported as a library."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_and_the_model_builder_import_without_torch() -> None:
    code = (
        "import sys, xpgym.reference, xpgym.reference.tiny_model\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def _recipe_references(path: Path) -> list[str]:
    """Imports of a ``recipes`` module, and string constants naming the ``recipes`` folder or a
    file in it (a path to load), in the code of `path`; docstrings, comments and mapping keys
    (``state["recipes"]``, ``{"recipes": ...}``: a word, not a path) do not count."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    keys = {id(node.slice) for node in ast.walk(tree) if isinstance(node, ast.Subscript)}
    keys |= {id(key) for node in ast.walk(tree) if isinstance(node, ast.Dict) for key in node.keys}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("recipes")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("recipes"):
            found.append(str(node.module))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            named = node.value == "recipes" or node.value.startswith("recipes/")
            if named and id(node) not in docstrings and id(node) not in keys:
                found.append(node.value)
    return found


RECIPE_LAUNCHERS = {
    "parity/curves/gpu.py": ["recipes/train_"],
    "parity/curves/gpu_check.py": ["recipes"],
}
"""Modules that run recipes as programs (never import them): the GPU parity run launches
each trainer's recipe in its own process, which is what it exists for; the GPU check runs
the CPU demo (``recipes/train_torch.py --device cuda``) the same way."""


def test_no_library_or_parity_module_loads_a_recipe() -> None:
    """Recipes are leaves: what they share lives in `xpgym` (e.g. `xpgym.reference`)."""
    found = {
        str(path.relative_to(ROOT)): refs
        for path in sorted([*(ROOT / "xpgym").rglob("*.py"), *(ROOT / "parity").rglob("*.py")])
        if (refs := _recipe_references(path))
    }
    assert found == RECIPE_LAUNCHERS


def test_recipe_references_count_paths_and_imports_but_not_mapping_keys(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text(
        "import recipes.train_torch\n"
        'path = ROOT / "recipes" / "x.py"\n'
        'state = {"recipes": []}\n'
        'value = state["recipes"]\n'
    )
    assert _recipe_references(module) == ["recipes.train_torch", "recipes"]
