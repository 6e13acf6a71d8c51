"""The test run's scratch folders (``tests/conftest.py``'s `pytest_configure`): what the
tests and the libraries they start write to a temp folder lands in folders of the run,
removed at the end, instead of piling up in the system's temp folder."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# Ray's longest socket path under its temp root: <root>/ray/<session folder>/sockets/<name>
RAY_SESSION = "session_2026-11-30_06-40-00_123456_12345"
UNIX_SOCKET_PATH_BYTES = 107


def test_this_process_writes_scratch_files_in_the_runs_folder() -> None:
    scratch = tempfile.gettempdir()
    assert Path(scratch).name.startswith("xpgym-tests-")
    assert os.environ["TMPDIR"] == scratch
    assert Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]).parent == Path(scratch)
    with tempfile.NamedTemporaryFile() as f:
        assert Path(f.name).parent == Path(scratch)


def test_ray_gets_a_short_folder_of_its_own() -> None:
    ray_root = Path(os.environ["RAY_TMPDIR"])
    assert ray_root.is_dir()
    assert ray_root.name.startswith("xpgym-ray-")
    longest = ray_root / "ray" / RAY_SESSION / "sockets" / "plasma_store"
    assert len(os.fsencode(longest)) <= UNIX_SOCKET_PATH_BYTES


def test_child_processes_inherit_the_runs_folder() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == tempfile.gettempdir()


def test_inductors_header_folder_is_in_the_runs_folder() -> None:
    """Inductor fixes this folder from the temp folder when first imported (e.g. by ``import
    vllm`` during collection), so the run's folder must be set before collection."""
    pytest.importorskip("torch")
    codecache = pytest.importorskip("torch._inductor.codecache")
    header_dir = getattr(codecache, "_HEADER_DIR", None)
    if header_dir is None:
        pytest.skip("this torch has no torch._inductor.codecache._HEADER_DIR")
    assert Path(header_dir).is_relative_to(tempfile.gettempdir())


def test_pytests_own_folders_stay_in_the_system_temp_folder(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    base = tmp_path_factory.getbasetemp()
    assert not base.is_relative_to(tempfile.gettempdir())
    assert base.is_relative_to(Path(os.environ["PYTEST_DEBUG_TEMPROOT"]).resolve())
