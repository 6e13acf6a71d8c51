"""Importing an adapter whose trainer is missing raises an ImportError naming the extra."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

# adapter module -> the trainer package it needs
ADAPTERS = {
    "verl": "verl",
    "openrlhf": "openrlhf",
    "rl2": "RL2",
    "oat": "oat",
    "roll": "gem",
    "trl": "trl",
}


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_missing_trainer_names_the_extra(adapter: str, monkeypatch: pytest.MonkeyPatch) -> None:
    package = ADAPTERS[adapter]
    for name in [package, *(m for m in sys.modules if m.startswith(package + "."))]:
        monkeypatch.setitem(sys.modules, name, None)  # importing it now fails
    monkeypatch.delitem(sys.modules, f"xpgym.adapters.{adapter}", raising=False)
    with pytest.raises(ImportError, match=rf"xpgym\[{adapter}\]"):
        importlib.import_module(f"xpgym.adapters.{adapter}")


def test_importing_xpgym_imports_no_trainer() -> None:
    import subprocess

    trainers = "('verl', 'openrlhf', 'oat', 'RL2', 'gem', 'trl', 'torch')"
    code = (
        "import sys, xpgym, xpgym.training.layouts, xpgym.rollout.recorder, xpgym.rollout.runner; "
        f"print(sorted(m for m in {trainers} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


TRAINERS_MARKER = Path(sys.prefix) / "xpgym-trainers-installed"


@pytest.mark.skipif(
    not TRAINERS_MARKER.exists(),
    reason=f"{TRAINERS_MARKER} is absent: scripts/setup.sh did not install the trainers here",
)
@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_every_adapter_imports_where_setup_installed_the_trainers(adapter: str) -> None:
    """scripts/setup.sh installs the trainers and leaves a marker in the venv; there a
    missing dependency must fail loudly, not turn the adapter tests into skips."""
    importlib.import_module(f"xpgym.adapters.{adapter}")
