"""`ProcessVectorEnv`: a worker process killed (SIGKILL) or stopped (SIGSTOP, past the parent's
deadline) at each moment of its life (`xpgym.core.vector.process`, `xpgym.core.vector.hosted`).

Four sub-envs on two workers: worker 0 hosts sub-envs 0 and 2 (`HIT`), worker 1 hosts 1 and 3
(`SPARED`). Sub-env 0 is a `FaultEnv` that stalls at the moment under test; the test signals
its process as soon as it announces itself. The documented outcome, per moment:

==============  ==========================================================================
moment          outcome
==============  ==========================================================================
construction    the constructor raises `SubEnvError` (index 0, ``"construction"``)
reset           `reset` raises `SubEnvError` (index 0, ``"reset"``); the next reset works
step            `HIT` truncated with an infra marker, `SPARED` step on; then `HIT` reset
between steps   as ``step``, at the next step
call, get_attr  it raises `SubEnvError` (index 0); `HIT` lost their episodes: truncated
                with an infra marker at their next step, `SPARED` step on
close           `close` returns; nothing is left running
==============  ==========================================================================

A killed worker's sub-envs are reported with ``"sub_env_crash"``. A stopped worker is found
by the parent's deadline (``step_timeout`` per task + 5 s), killed and replaced; its sub-envs
ran past their step timeout, so they are reported with ``"sub_env_timeout"`` (they were
``"sub_env_crash"`` before the parent told a missed deadline from a death). Every case ends
with no child process left (`no_orphans`).
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from fault_envs import (
    FaultEnv,
    assert_hit_and_spared,
    assert_recovers,
    built_pid,
    signal_when,
)

from xpgym.core.vector import ProcessVectorEnv, SubEnvError

HIT = (0, 2)
SPARED = (1, 3)
KIND = {signal.SIGKILL: "sub_env_crash", signal.SIGSTOP: "sub_env_timeout"}
STEP_TIMEOUT = 2.0
"""For the SIGSTOP cases: a stopped worker is replaced after 2 * 2 s + 5 s (two tasks)."""

pytestmark = pytest.mark.usefixtures("no_orphans")


def make_vec(marker_dir: Path, at: str, sig: int) -> ProcessVectorEnv:
    fns = [
        functools.partial(
            FaultEnv, str(marker_dir), str(i), at if i == 0 else "", episode_length=10
        )
        for i in range(4)
    ]
    step_timeout = STEP_TIMEOUT if sig == signal.SIGSTOP else None
    return ProcessVectorEnv(fns, num_workers=2, step_timeout=step_timeout)


def fault_in_construction(marker_dir: Path, sig: int) -> None:
    signaller = signal_when(marker_dir, "construction", sig)
    with pytest.raises(SubEnvError) as raised:
        make_vec(marker_dir, "construction", sig)
    signaller.result()
    assert (raised.value.index, raised.value.operation) == (0, "construction")


def fault_in_reset(marker_dir: Path, sig: int) -> None:
    with make_vec(marker_dir, "reset", sig) as vec:
        signaller = signal_when(marker_dir, "reset", sig)
        with pytest.raises(SubEnvError) as raised:
            vec.reset(seed=0)
        signaller.result()
        assert (raised.value.index, raised.value.operation) == (0, "reset")
        vec.reset(seed=0)
        _, _, _, truncated, infos = vec.step(["x"] * 4)
        assert not truncated.any()
        assert [info["turn"] for info in infos] == [1] * 4


def fault_in_step(marker_dir: Path, sig: int) -> None:
    with make_vec(marker_dir, "step", sig) as vec:
        vec.reset(seed=0)
        signaller = signal_when(marker_dir, "step", sig)
        assert_hit_and_spared(vec.step(["x"] * 4), HIT, SPARED, turn=1, kind=KIND[sig])
        signaller.result()
        assert_recovers(vec, HIT, SPARED, spared_turn=2)


def fault_between_steps(marker_dir: Path, sig: int) -> None:
    with make_vec(marker_dir, "", sig) as vec:
        vec.reset(seed=0)
        vec.step(["x"] * 4)
        os.kill(built_pid(marker_dir, "0"), sig)
        assert_hit_and_spared(vec.step(["x"] * 4), HIT, SPARED, turn=2, kind=KIND[sig])
        assert_recovers(vec, HIT, SPARED, spared_turn=3)


def fault_in_query(moment: str, query: Callable[[ProcessVectorEnv], object]) -> Callable:
    def case(marker_dir: Path, sig: int) -> None:
        with make_vec(marker_dir, moment, sig) as vec:
            vec.reset(seed=0)
            vec.step(["x"] * 4)
            signaller = signal_when(marker_dir, moment, sig)
            with pytest.raises(SubEnvError) as raised:
                query(vec)
            signaller.result()
            assert raised.value.index == 0
            assert_hit_and_spared(vec.step(["x"] * 4), HIT, SPARED, turn=2, kind=KIND[sig])
            assert_recovers(vec, HIT, SPARED, spared_turn=3)

    return case


def fault_in_close(marker_dir: Path, sig: int) -> None:
    vec = make_vec(marker_dir, "close", sig)
    vec.reset(seed=0)
    signaller = signal_when(marker_dir, "close", sig)
    closing = threading.Thread(target=vec.close)
    closing.start()
    signaller.result()
    closing.join()
    assert vec.closed


SCENARIOS: dict[str, Callable[[Path, int], None]] = {
    "construction": fault_in_construction,
    "reset": fault_in_reset,
    "step": fault_in_step,
    "between-steps": fault_between_steps,
    "call": fault_in_query("call", lambda vec: vec.call("get_state")),
    "get_attr": fault_in_query("get_attr", lambda vec: vec.get_attr("faulty_attr")),
    "close": fault_in_close,
}

CASES = [
    *[(moment, signal.SIGKILL) for moment in SCENARIOS],
    ("step", signal.SIGSTOP),
    ("between-steps", signal.SIGSTOP),
]
"""(moment, signal): every moment killed; stopped where a deadline is documented (a step
with ``step_timeout``)."""


@pytest.mark.parametrize(
    ("moment", "sig"), CASES, ids=[f"{m}-{signal.Signals(s).name}" for m, s in CASES]
)
def test_a_worker_killed_or_stopped_ends_in_the_documented_outcome(
    marker_dir: Path, moment: str, sig: int
) -> None:
    SCENARIOS[moment](marker_dir, sig)
