"""The main job (`recipes/train_torch.py`) runs end to end and writes what it promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the training recipe needs torch (the torch extra)")

ROOT = Path(__file__).resolve().parent.parent


def test_train_torch_recipe_writes_metrics_summary_and_plot(tmp_path):
    command = [
        sys.executable,
        "recipes/train_torch.py",
        "--steps",
        "2",
        "--episodes-per-step",
        "8",
        "--warmstart-steps",
        "3",
        "--warmstart-episodes",
        "16",
        "--eval-episodes",
        "8",
        "--eval-every",
        "1",
        "--out-dir",
        str(tmp_path),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps_trained"] == 2
    for phase in ("initial", "before", "after"):
        assert set(summary[phase]) == {"greedy", "sampled"}
    assert summary["initial"]["greedy"]["invalid_rate"] == 1.0  # an untrained model: no format
    assert summary["references"]["binary_search"]["success"] == 1.0
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == [1, 2]
    assert (tmp_path / "reward_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "after RL, greedy" in result.stdout
