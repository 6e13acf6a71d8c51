"""The pure parts of ``scripts/bench_vs_gem.py`` (statistics, ratios, targets, table)."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from script_modules import script_module


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    with script_module("bench_vs_gem") as module:
        yield module


def fake_results(bench: ModuleType) -> dict[str, Any]:
    d = bench.describe
    return {
        "measurements": {
            "import": {"xpgym": d([120.0, 130.0, 125.0]), "gem": d([990.0, 1000.0, 980.0])},
            "python_startup": {"xpgym": d([20.0]), "gem": d([10.0])},
            "single_guess": {"xpgym": d([300_000.0]), "gem": d([440_000.0])},
            "vec_guess_sync": {"xpgym": d([250_000.0]), "gem": d([215_000.0])},
            "vec_guess_async": {"xpgym": d([240_000.0]), "gem": d([57_000.0])},
            "cpu_sync": {"xpgym": d([30_000.0]), "gem": d([28_000.0])},
            "cpu_process": {"xpgym": d([40_000.0])},
        }
    }


def test_describe(bench: ModuleType) -> None:
    assert bench.describe([3.0, 1.0, 2.0]) == {
        "min": 1.0,
        "median": 2.0,
        "max": 3.0,
        "samples": [3.0, 1.0, 2.0],
    }
    with pytest.raises(ValueError, match="no samples"):
        bench.describe([])


def test_summarize_ratios_and_targets(bench: ModuleType) -> None:
    summary = bench.summarize(fake_results(bench))
    rows = {row["key"]: row for row in summary["rows"]}
    assert rows["vec_guess_async"]["ours_over_gem"] == pytest.approx(240 / 57)
    assert rows["cpu_process"]["gem"] is None
    assert rows["cpu_process"]["ours_over_gem"] is None
    assert rows["import_above_startup"]["xpgym"]["median"] == pytest.approx(105.0)
    assert rows["import"]["ahead"] == pytest.approx(990 / 125)  # a time: GEM's / ours
    assert rows["single_guess"]["ahead"] == pytest.approx(300 / 440)  # a rate: ours / GEM
    ratios = {(r["name"], r["lib"]): r["value"] for r in summary["ratios"]}
    assert ratios["sync / single (GuessTheNumber)", "gem"] == pytest.approx(215 / 440)
    assert ratios["process / sync (CPU-heavy)", "xpgym"] == pytest.approx(4 / 3)
    assert ("process / sync (CPU-heavy)", "gem") not in ratios
    met = {t["name"]: t["met"] for t in summary["targets"]}
    assert met == {
        "`import xpgym` <= 150 ms": True,
        "sync >= 80% of single-env rate": True,  # 250k / 300k = 0.83
        "thread not slower than sync (pure-Python env)": False,  # 0.96
        "thread >= 2x GEM's thread pool": True,
        "process faster than sync (CPU-heavy env)": True,
        "every row ahead of GEM (the closest row)": False,  # single env: 300k / 440k
    }
    closest = next(t for t in summary["targets"] if t["name"].startswith("every row"))
    assert closest["value"] == pytest.approx(300 / 440)  # python -c pass is not a row of it


def test_summarize_without_gem(bench: ModuleType) -> None:
    results = fake_results(bench)
    for per_lib in results["measurements"].values():
        per_lib.pop("gem", None)
    targets = {t["name"]: t for t in bench.summarize(results)["targets"]}
    assert targets["thread >= 2x GEM's thread pool"]["met"] is None
    assert targets["sync >= 80% of single-env rate"]["met"] is True


def test_format_table(bench: ModuleType) -> None:
    table = bench.format_table(bench.summarize(fake_results(bench)))
    assert "| GuessTheNumber-easy, 64 envs, thread | env-steps/s |" in table
    assert "240,000 / **240,000** / 240,000" in table
    assert "4.21x (higher is better) | 4.21x |" in table
    assert "0.13x (lower is better) | 7.92x |" in table  # import: 125 vs 990 ms
    assert "| thread not slower than sync (pure-Python env) | 0.96x | >= 1.00x | **no** |" in table
    assert "| `import xpgym` <= 150 ms | 125 ms | <= 150 ms | yes |" in table
    assert "n/a" in table  # GEM has no process backend
