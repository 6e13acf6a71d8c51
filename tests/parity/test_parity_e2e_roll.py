"""ROLL end to end (`parity.e2e.roll`): git only, and its own loop has no harness here, so the
entry point says why it does not run, with or without a checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from parity.e2e.config import E2EConfig
from parity.e2e.roll import NO_LOOP, main, run_roll
from parity.shared.trainer_code import NotRunnableError, roll_importable


def test_without_a_checkout_the_run_says_how_to_get_roll() -> None:
    if roll_importable():
        pytest.skip("a ROLL checkout imports here: the next test covers it")
    with pytest.raises(NotRunnableError, match="ROLL is git-only: put a checkout on PYTHONPATH"):
        run_roll(E2EConfig(), Path("unused"), Path("unused"))


def test_with_a_checkout_the_run_says_its_loop_is_not_built() -> None:
    if not roll_importable():
        pytest.skip("needs a ROLL checkout on PYTHONPATH (ROLL is git-only)")
    with pytest.raises(NotRunnableError, match="vLLM/SGLang strategies"):
        run_roll(E2EConfig(), Path("unused"), Path("unused"))


def test_the_command_line_exits_2_and_logs_the_reason(caplog: pytest.LogCaptureFixture) -> None:
    assert main() == 2
    reason = caplog.records[-1].getMessage()
    assert reason.startswith("roll: not runnable: ")
    assert "git-only" in reason or reason.endswith(NO_LOOP)


def test_roll_is_not_among_the_runs_that_must_train() -> None:
    from parity.e2e.runs import TRAINERS

    assert "roll" not in TRAINERS
