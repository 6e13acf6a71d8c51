"""`ProcessVectorEnv`: a worker process killed (SIGKILL) or stopped (SIGSTOP, past the parent's
deadline) at each moment of its life (`xpgym.core.vector.process`, `xpgym.core.vector.hosted`).

Four sub-envs on two workers: worker 0 hosts sub-envs 0 and 2 (hit), worker 1 hosts 1 and 3
(spared). The cases and their documented outcomes are `vector_fault_cases` (shared with the
Ray backend), every moment with SIGKILL, and construction (past ``start_timeout``), a step
and between two steps with SIGSTOP.

A killed worker's sub-envs are reported with ``"sub_env_crash"``. A stopped worker is found
by the parent's deadline (``step_timeout`` per task + 5 s), killed and replaced; its sub-envs
ran past their step timeout, so they are reported with ``"sub_env_timeout"`` (they were
``"sub_env_crash"`` before the parent told a missed deadline from a death). Every case ends
with no child process left (`no_orphans`).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from vector_fault_cases import MOMENTS, VectorFaultSetup, fault_env_fns, run_case

from xpgym.core.vector import ProcessVectorEnv

STEP_TIMEOUT = 2.0
"""For the SIGSTOP cases: a stopped worker is replaced after 2 * 2 s + 5 s (two tasks)."""

START_TIMEOUT = 10.0
"""For the SIGSTOP cases: room for a worker to spawn on a loaded machine, since the stopped
one is found only after it has announced itself."""

pytestmark = pytest.mark.usefixtures("no_orphans")


def make_vec(marker_dir: Path, at: str, sig: int) -> ProcessVectorEnv:
    stopped = sig == signal.SIGSTOP
    return ProcessVectorEnv(
        fault_env_fns(marker_dir, at),
        num_workers=2,
        step_timeout=STEP_TIMEOUT if stopped else None,
        start_timeout=START_TIMEOUT if stopped else None,
    )


SETUP = VectorFaultSetup(make_vec, hit=(0, 2), spared=(1, 3))

CASES = [
    *[(moment, signal.SIGKILL) for moment in MOMENTS],
    ("construction", signal.SIGSTOP),
    ("step", signal.SIGSTOP),
    ("between-steps", signal.SIGSTOP),
]
"""(moment, signal): every moment killed; stopped where a deadline is documented
(``start_timeout`` for construction, ``step_timeout`` for a step)."""


@pytest.mark.parametrize(
    ("moment", "sig"), CASES, ids=[f"{m}-{signal.Signals(s).name}" for m, s in CASES]
)
def test_a_worker_killed_or_stopped_ends_in_the_documented_outcome(
    marker_dir: Path, moment: str, sig: int
) -> None:
    run_case(SETUP, moment, marker_dir, sig)
