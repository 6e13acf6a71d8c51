"""Where the ecosystem packages that cannot share the test venv live (scripts/setup.sh step 4).

openenv 0.10 and verifiers 0.4 pin mcp/openai versions that the test venv's other packages
exclude, so setup.sh builds ``$VENV/interop/openenv`` and ``$VENV/interop/verifiers``; the
interop tests run those packages' own clients and servers there, in subprocesses.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

SIDE_VENVS = Path(sys.prefix) / "interop"
SETUP_MARKER = Path(sys.prefix) / "xpgym-trainers-installed"


def side_python(name: str) -> Path:
    """The Python of the side venv `name` (``"openenv"`` or ``"verifiers"``).

    Skips the calling test when the venv is missing and the test venv was not built by
    scripts/setup.sh; fails it when setup.sh ran (then a missing side venv is a broken setup,
    not an optional extra).
    """
    python = SIDE_VENVS / name / "bin" / "python"
    if python.exists():
        return python
    message = f"{python} is missing: scripts/setup.sh builds it (step 4)"
    if SETUP_MARKER.exists():
        pytest.fail(message)
    pytest.skip(message)
