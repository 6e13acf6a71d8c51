"""``scripts/bench_vector_ratios.py`` runs its workloads and reports consistent ratios."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "bench_vector_ratios.py"


def load_script():
    spec = importlib.util.spec_from_file_location("bench_vector_ratios", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_tiny_run_writes_rates_and_the_ratios_of_their_medians(tmp_path, monkeypatch):
    bench = load_script()
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script adds tests/benchmarks
    out = tmp_path / "ratios.json"
    assert (
        bench.main(["--rounds", "2", "--batches", "10", "--num-envs", "3", "--out", str(out)]) == 0
    )
    result = json.loads(out.read_text())
    rates = result["env_steps_per_s"]
    assert set(rates) == {"single", "sync", "thread", "cpu_sync", "cpu_thread"}
    assert all(len(samples) == 2 for samples in result["samples"].values())
    assert all(rate > 0 for rate in rates.values())
    assert result["ratios"]["sync / single"] == pytest.approx(rates["sync"] / rates["single"])
    assert result["ratios"]["thread / sync"] == pytest.approx(rates["thread"] / rates["sync"])


def test_non_positive_sizes_are_refused():
    bench = load_script()
    with pytest.raises(SystemExit):
        bench.parse_args(["--rounds", "0"])
