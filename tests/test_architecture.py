"""The dependency rules of docs/architecture.md hold (checked by scripts/import_graph.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "import_graph.py"


def test_the_package_keeps_its_dependency_rules() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_checker_names_a_broken_rule() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PLANTED.format(script=SCRIPT)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines() == [
        "xpgym.core.trajectory imports xpgym.core.wrappers.observation: records import no"
        " wrapper, policy, vector env, loop or collector",
        "xpgym.core.x imports xpgym.remote.client: core imports no env, adapter, remote, eval"
        " or reference module",
        "xpgym.envs.common.x imports xpgym.envs.games.wordle: no env family imports another"
        " (shared helpers live in xpgym.envs.common)",
        "xpgym.envs.math.x imports xpgym.envs.games.presets: no env family imports another"
        " (shared helpers live in xpgym.envs.common)",
        "xpgym.envs.math.y imports parity.core: xpgym never imports recipes or parity",
    ]


_PLANTED = """
import importlib.util
spec = importlib.util.spec_from_file_location("import_graph", "{script}")
graph = importlib.util.module_from_spec(spec)
spec.loader.exec_module(graph)
planted = {{
    "xpgym.core.trajectory": {{"xpgym.core.wrappers.observation", "xpgym.core.env"}},
    "xpgym.core.x": {{"xpgym.remote.client"}},
    "xpgym.envs.math.x": {{"xpgym.envs.games.presets", "xpgym.envs.common.answers"}},
    "xpgym.envs.math.y": {{"xpgym.envs.math.boxed", "parity.core"}},
    "xpgym.envs.common.x": {{"xpgym.envs.games.wordle", "xpgym.envs.common.answers"}},
    "xpgym.eval.runner": {{"xpgym.envs.games.presets", "xpgym.core.rollout"}},
}}
print("\\n".join(graph.broken_rules(planted)))
"""
