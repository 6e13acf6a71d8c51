"""`parity.bench`: one RL step's cost per trainer, split into rollout / env / update."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from parity.bench import main, markdown_table, plot, row


def _result(**overrides: list[float]) -> dict:
    result = {
        "trainer": "x",
        "step_s": [9.0, 2.0, 4.0],
        "rollout_s": [5.0, 1.0, 3.0],
        "policy_tokens": [10.0, 100.0, 300.0],
    }
    return {**result, **overrides}


def test_a_row_takes_medians_after_the_warm_up_step() -> None:
    entry = row(_result(), env_s=[4.0, 0.5, 0.5], peak_rss_mib=300.0, episodes_per_step=8)
    assert entry["steps"] == 3
    assert entry["step_s"] == 3.0  # median of 2 and 4: the first step is warm-up
    assert entry["rollout_s"] == 2.0
    assert entry["update_s"] == 1.0
    assert entry["env_s"] == 0.5
    assert entry["env_share"] == 0.25
    assert entry["policy_tokens_per_s"] == pytest.approx(200.0 / 3.0)
    assert entry["peak_rss_mib"] == 300.0


def test_a_single_step_is_its_own_median_and_zero_time_is_not_a_division() -> None:
    entry = row(_result(step_s=[0.0], rollout_s=[0.0], policy_tokens=[5.0]), [0.0], 1.0, 8)
    assert entry["steps"] == 1
    assert math.isnan(entry["policy_tokens_per_s"])
    assert math.isnan(entry["env_share"])


def test_the_table_names_a_crash_and_the_plot_skips_it(tmp_path: Path) -> None:
    good = row(_result(trainer="trl"), [0.1, 0.1, 0.1], 500.0, 8)
    crashed = {"trainer": "verl", "error": "RuntimeError: boom"}
    table = markdown_table([good, crashed])
    assert "| trl | 3 | 8 | 3.00 | 2.00 | 0.1000 | 1.00 | 67 | 5.00% | 500 |" in table
    assert "| verl | crashed: RuntimeError: boom |" in table
    plot([good, crashed], tmp_path / "bench.png")
    assert (tmp_path / "bench.png").stat().st_size > 0


@pytest.mark.timeout(900)
def test_the_reference_trainer_is_benchmarked_in_its_own_process(
    warm_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XPGYM_CACHE", str(warm_model.parent))  # the child reuses the model
    out = tmp_path / "bench"
    assert main(["--trainers", "reference", "--steps", "2", "--out", str(out)]) == 0
    report = json.loads((out / "bench.json").read_text())
    (entry,) = report["rows"]
    assert entry["trainer"] == "reference"
    assert entry["steps"] == 2
    assert entry["episodes_per_step"] == 8
    assert entry["rollout_s"] > entry["env_s"] > 0
    assert entry["policy_tokens_per_s"] > 0
    assert 0 < entry["env_share"] < 1
    assert entry["peak_rss_mib"] > 50  # torch and a model were loaded in that process
    assert "| reference | 2 |" in (out / "table.md").read_text()
    assert (out / "bench.png").exists()
