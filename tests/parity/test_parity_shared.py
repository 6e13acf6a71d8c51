"""What several parity layers share (`parity.shared`): the curve math of the CPU curves, the
GPU run and the end-to-end runs, and the environment a block runs with."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from parity.shared.curves import band, curve, inside_fraction, smooth
from parity.shared.environment import set_environment
from parity.shared.trainer_code import stand_ins


def test_a_curve_is_the_mean_return_of_each_full_block() -> None:
    records = [{"return": float(r)} for r in [0, 1, 1, 1, 0, 0, 1]]
    assert curve(records, 2) == [0.5, 1.0, 0.0]  # the last, partial block is dropped
    assert curve(records[:1], 2) == []
    with pytest.raises(ValueError, match="at least 1"):
        curve(records, 0)


def test_band_and_inside_fraction_by_hand() -> None:
    curves = np.array([[0.0, 1.0], [2.0, 1.0]])  # std (ddof 1): sqrt(2), 0
    mean, half = band(curves, k=1.0, floor=0.1)
    np.testing.assert_allclose(mean, [1.0, 1.0])
    np.testing.assert_allclose(half, [np.sqrt(2), 0.1])
    assert inside_fraction(np.array([2.4, 1.05]), mean, half) == 1.0
    assert inside_fraction(np.array([2.5, 1.2]), mean, half) == 0.0
    np.testing.assert_allclose(smooth([1.0, 3.0, 5.0, 7.0], 2), [1.0, 2.0, 4.0, 6.0])
    with pytest.raises(ValueError, match="at least 2"):
        band(curves[:1], k=3.0, floor=0.0)


def test_set_environment_restores_every_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XPGYM_TEST_KEPT", "before")
    monkeypatch.delenv("XPGYM_TEST_NEW", raising=False)
    with set_environment({"XPGYM_TEST_KEPT": "during", "XPGYM_TEST_NEW": "during"}):
        assert os.environ["XPGYM_TEST_KEPT"] == os.environ["XPGYM_TEST_NEW"] == "during"
    assert os.environ["XPGYM_TEST_KEPT"] == "before"
    assert "XPGYM_TEST_NEW" not in os.environ


def test_set_environment_removes_a_variable_given_none_for_the_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XPGYM_TEST_GONE", "before")
    with set_environment({"XPGYM_TEST_GONE": None}):
        assert "XPGYM_TEST_GONE" not in os.environ
    assert os.environ["XPGYM_TEST_GONE"] == "before"


def test_stand_ins_leave_no_trace_of_the_trainers_modules_imported_inside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "fake_trainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "engine.py").write_text("import fake_gpu_only\nKERNEL = fake_gpu_only.Kernel\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import fake_trainer  # the package itself was imported before the block

    with stand_ins(["fake_gpu_only"], packages=("fake_trainer",)) as missing:
        from fake_trainer import engine

        assert missing == ["fake_gpu_only"]
        assert engine.KERNEL.__name__ == "Kernel"
    assert "fake_trainer.engine" not in sys.modules
    assert "fake_gpu_only" not in sys.modules
    assert not hasattr(fake_trainer, "engine")  # its parent does not serve the old module
    with pytest.raises(ImportError, match="fake_gpu_only"):
        from fake_trainer import engine as engine_again  # noqa: F401
