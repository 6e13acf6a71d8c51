"""``scripts/bench_vector_ratios.py`` runs its workloads and reports consistent ratios."""

from __future__ import annotations

import json
import sys

import pytest
from script_modules import script_module


def test_a_tiny_run_writes_rates_and_the_ratios_of_their_medians(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script adds tests/benchmarks
    out = tmp_path / "ratios.json"
    argv = ["--rounds", "2", "--batches", "10", "--num-envs", "3", "--out", str(out)]
    with script_module("bench_vector_ratios") as bench:
        assert bench.main(argv) == 0
    result = json.loads(out.read_text())
    rates = result["env_steps_per_s"]
    assert set(rates) == {"single", "sync", "thread", "cpu_sync", "cpu_thread"}
    assert all(len(samples) == 2 for samples in result["samples"].values())
    assert all(rate > 0 for rate in rates.values())
    assert result["ratios"]["sync / single"] == pytest.approx(rates["sync"] / rates["single"])
    assert result["ratios"]["thread / sync"] == pytest.approx(rates["thread"] / rates["sync"])


def test_non_positive_sizes_are_refused():
    with script_module("bench_vector_ratios") as bench, pytest.raises(SystemExit):
        bench.parse_args(["--rounds", "0"])
