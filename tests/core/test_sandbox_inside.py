"""The sandbox wall: the code that runs inside bubblewrap is one stdlib-only module.

The host ships `xpgym.core.sandbox.inside` into the sandbox as source text (``python -I -B -c
<source>``), where neither xpgym nor any third-party package is importable. These tests
keep it that way: by reading its imports, and by running it in an interpreter that has
nothing but the standard library.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from xpgym.core.sandbox import host, inside

INSIDE_SOURCE = Path(inside.__file__).read_text(encoding="utf-8")


def imported_modules(source: str) -> list[str]:
    """Every module an ``import`` statement of `source` names (relative ones as ``.x``)."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append("." * node.level + (node.module or ""))
    return names


def test_inside_imports_only_the_standard_library() -> None:
    modules = imported_modules(INSIDE_SOURCE)
    assert "os" in modules  # the parse found the imports
    outside = [m for m in modules if m.split(".")[0] not in sys.stdlib_module_names]
    assert outside == []


def test_inside_runs_in_an_interpreter_without_site_packages() -> None:
    probe = "\nimport json, sys\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    proc = subprocess.run(
        [host.interpreter(), "-I", "-S", "-B", "-c", INSIDE_SOURCE + probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    loaded = json.loads(proc.stdout)
    assert "socket" in loaded  # the module's own imports ran
    assert [m for m in loaded if m not in sys.stdlib_module_names and m != "__main__"] == []
