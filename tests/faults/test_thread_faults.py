"""`ThreadVectorEnv`: a sub-env that raises, or hangs past ``step_timeout``, at each moment
(`xpgym.core.vector.threaded`, `xpgym.core.vector.base`). A thread cannot be killed, so a
hang is the thread backend's worst fault.

Two sub-envs: sub-env 0 is a `FaultEnv` that faults at the moment under test, sub-env 1 is
healthy. The documented outcome, per moment:

==============  ==========================================================================
moment          outcome (``raise``; ``stall`` past ``step_timeout`` where it differs)
==============  ==========================================================================
construction    the constructor raises `SubEnvError` (index 0, ``"construction"``); with
                a stall, past ``start_timeout``, and the sub-env built meanwhile is closed
reset           `reset` raises `SubEnvError` (index 0, ``"reset"``); the next reset works
step            sub-env 0 truncated with ``"sub_env_crash"`` (``"sub_env_timeout"``),
                sub-env 1 steps on; the next step resets sub-env 0
call, get_attr  it raises `SubEnvError` (index 0); sub-env 1 steps on. A raise leaves
                sub-env 0's episode going; a stall gives the env up to its thread, so
                sub-env 0's next step is truncated with an infra marker, and it is reset
close           `close` returns without raising
==============  ==========================================================================

``step_timeout`` bounds steps, resets, calls and close; ``start_timeout`` construction. Every
case ends with no thread left running once its stall has ended (`no_stray_threads`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pytest
from fault_envs import FaultEnv, infra_kind

from xpgym.core.vector import SubEnvError, ThreadVectorEnv

STEP_TIMEOUT = 1.0
"""Long enough for a toy step on a loaded machine, short enough for a quick suite."""

pytestmark = pytest.mark.usefixtures("no_stray_threads")


def make_vec(marker_dir: Path, at: str, how: str) -> ThreadVectorEnv:
    fns = [
        functools.partial(FaultEnv, str(marker_dir), str(i), at if i == 0 else "", how, 10)
        for i in range(2)
    ]
    timeout = STEP_TIMEOUT if how == "stall" else None
    return ThreadVectorEnv(fns, step_timeout=timeout, start_timeout=timeout)


def assert_steps_on(vec: ThreadVectorEnv, turn: int, *, zero_lost: bool) -> None:
    """Sub-env 1 is at `turn` after this step; sub-env 0 either goes on (``not
    zero_lost``) or is truncated with an infra marker and then reset."""
    _, _, _, truncated, infos = vec.step(["x", "x"])
    assert not truncated[1]
    assert infos[1]["turn"] == turn
    cause = infra_kind(infos[0])
    if not zero_lost:
        assert not truncated[0]
        assert cause is None
        assert infos[0]["turn"] == turn
        return
    assert truncated[0]
    assert cause is not None, infos[0]
    observations, _, _, truncated, _ = vec.step(["x", "x"])
    assert observations[0].startswith("start")
    assert not truncated.any()


def fault_in_construction(marker_dir: Path, how: str) -> None:
    with pytest.raises(SubEnvError) as raised:
        make_vec(marker_dir, "construction", how)
    assert (raised.value.index, raised.value.operation) == (0, "construction")
    if how == "stall":
        assert "not built within" in str(raised.value)
    assert (marker_dir / "closed-1").exists(), "the healthy sub-env was left unclosed"


def fault_in_reset(marker_dir: Path, how: str) -> None:
    with make_vec(marker_dir, "reset", how) as vec:
        with pytest.raises(SubEnvError) as raised:
            vec.reset(seed=0)
        assert (raised.value.index, raised.value.operation) == (0, "reset")
        vec.reset(seed=0)
        _, _, _, truncated, infos = vec.step(["x", "x"])
        assert not truncated.any()
        assert [info["turn"] for info in infos] == [1, 1]


def fault_in_step(marker_dir: Path, how: str) -> None:
    with make_vec(marker_dir, "step", how) as vec:
        vec.reset(seed=0)
        _, _, _, truncated, infos = vec.step(["x", "x"])
        kind = "sub_env_timeout" if how == "stall" else "sub_env_crash"
        assert truncated[0]
        assert infra_kind(infos[0]) == kind, infos[0]
        assert not truncated[1]
        assert infra_kind(infos[1]) is None
        assert infos[1]["turn"] == 1
        observations, _, _, truncated, infos = vec.step(["x", "x"])
        assert observations[0].startswith("start")
        assert not truncated.any()
        assert infos[1]["turn"] == 2


def fault_in_query(moment: str, query: Callable[[ThreadVectorEnv], object]) -> Callable:
    def case(marker_dir: Path, how: str) -> None:
        with make_vec(marker_dir, moment, how) as vec:
            vec.reset(seed=0)
            vec.step(["x", "x"])
            with pytest.raises(SubEnvError) as raised:
                query(vec)
            assert raised.value.index == 0
            assert_steps_on(vec, turn=2, zero_lost=how == "stall")

    return case


def fault_in_close(marker_dir: Path, how: str) -> None:
    vec = make_vec(marker_dir, "close", how)
    vec.reset(seed=0)
    vec.close()
    assert vec.closed


SCENARIOS: dict[str, Callable[[Path, str], None]] = {
    "construction": fault_in_construction,
    "reset": fault_in_reset,
    "step": fault_in_step,
    "call": fault_in_query("call", lambda vec: vec.call("get_state")),
    "get_attr": fault_in_query("get_attr", lambda vec: vec.get_attr("faulty_attr")),
    "close": fault_in_close,
}

CASES = [
    *[(moment, "raise") for moment in SCENARIOS],
    *[(moment, "stall") for moment in SCENARIOS],
]
"""(moment, fault): every moment raises, and stalls past its timeout."""


@pytest.mark.parametrize(("moment", "how"), CASES, ids=[f"{m}-{h}" for m, h in CASES])
def test_a_sub_env_that_raises_or_hangs_ends_in_the_documented_outcome(
    marker_dir: Path, moment: str, how: str
) -> None:
    SCENARIOS[moment](marker_dir, how)
