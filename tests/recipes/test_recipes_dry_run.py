"""Every trainer recipe's ``--dry-run`` that can run here: config, envs, one converted batch.

Each dry run builds the trainer's configuration, plays a small batch through the adapter's
hook with a tiny offline model, converts it with the trainer's own classes and checks the
advantages; it writes ``dry_run.json``. A recipe whose trainer is not installed is skipped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# recipe -> (modules it needs: the adapter, which imports its trainer, and a few more; extra
# flags for a small batch). Importing the adapter rather than the trainer keeps the root
# logger as it was (GEM and verl configure it when imported).
DRY_RUNS = {
    "train_verl.py": (
        ("xpgym.adapters.verl", "pandas", "pyarrow"),
        ["--train-batch-size", "2", "--ppo-mini-batch-size", "2", "--num-tasks", "2"],
    ),
    "train_openrlhf.py": (
        ("xpgym.adapters.openrlhf",),
        ["--rollout-batch-size", "2", "--num-tasks", "2"],
    ),
    "train_rl2.py": (
        ("xpgym.adapters.rl2", "RL2.datasets"),
        ["--prompts-per-rollout", "2", "--num-tasks", "2"],
    ),
    "train_oat.py": (("xpgym.adapters.oat",), ["--episodes-per-step", "2"]),
    "train_trl.py": (
        ("xpgym.adapters.trl",),
        ["--batch-size", "4", "--num-generations", "2", "--num-tasks", "4", "--max-turns", "3"],
    ),
    "train_roll.py": (
        ("xpgym.adapters.roll", "yaml"),
        ["--rollout-batch-size", "8", "--sequence-length", "2048"],
    ),
}


@pytest.mark.parametrize("recipe", sorted(DRY_RUNS))
def test_dry_run_builds_converts_and_validates_a_batch(recipe: str, tmp_path: Path) -> None:
    modules, flags = DRY_RUNS[recipe]
    for module in modules:
        pytest.importorskip(module, reason=f"{recipe} needs {module}", exc_type=ImportError)
    pytest.importorskip("transformers", reason="the dry run builds a tiny local model")
    command = [
        sys.executable,
        f"recipes/{recipe}",
        "--dry-run",
        "--out-dir",
        str(tmp_path),
        *flags,
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "dry run ok" in result.stdout
    summary = json.loads((tmp_path / "dry_run.json").read_text())
    assert summary["config"]["gamma"] == 0.9  # the GEM paper's setting for games
    assert summary["config"]["algorithm"] == "rebn"
    assert summary["policy_tokens"] > 0
    assert summary["mean_return"] <= 1.0  # GuessTheNumber pays at most 1
    assert summary["max_abs_diff_vs_reference"] < 1e-6
