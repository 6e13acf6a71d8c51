"""The fault cases every hosted vector env (worker processes, Ray actors) must pass, at each
moment of a host's life (`xpgym.core.vector.hosted`).

A backend's test module builds a `VectorFaultSetup`: how to make a vector env of four
`FaultEnv` sub-envs in which sub-env 0 injects its fault at a moment, which sub-envs share
sub-env 0's host (`hit`) and which do not (`spared`). `run_case` then plays one moment:

==============  ==========================================================================
moment          outcome
==============  ==========================================================================
construction    the constructor raises `SubEnvError` (index 0, ``"construction"``); a
                stopped host, once it misses ``start_timeout``, and it is killed
reset           `reset` raises `SubEnvError` (index 0, ``"reset"``); the next reset works
step            `hit` truncated with an infra marker, `spared` step on; then `hit` reset
between steps   as ``step``, at the next step
call, get_attr  it raises `SubEnvError` (index 0); `hit` lost their episodes: truncated
                with an infra marker at their next step, `spared` step on
close           `close` returns
==============  ==========================================================================

The kill point is `FaultEnv`'s own announcement (`signal_when`), never a guess about timing.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fault_envs import FaultEnv, assert_hit_and_spared, assert_recovers, built_pid, signal_when

from xpgym.core.vector import SubEnvError

MOMENTS = ("construction", "reset", "step", "between-steps", "call", "get_attr", "close")

QUERIES: dict[str, Callable[[Any], object]] = {
    "call": lambda vec: vec.call("get_state"),
    "get_attr": lambda vec: vec.get_attr("faulty_attr"),
}


def fault_env_fns(marker_dir: Path, at: str, num_envs: int = 4) -> list[Callable[[], FaultEnv]]:
    """`num_envs` picklable factories of `FaultEnv`s named by index; only sub-env 0 injects
    its fault, at `at` (``""``: none)."""
    return [
        functools.partial(
            FaultEnv, str(marker_dir), str(i), at if i == 0 else "", episode_length=10
        )
        for i in range(num_envs)
    ]


@dataclass(frozen=True)
class VectorFaultSetup:
    """One backend under the cases.

    Attributes:
        make_vec: ``make_vec(marker_dir, at, sig)`` -> a vector env of `fault_env_fns`
            (`sig` lets a backend set the deadline a stopped host is found by).
        hit: The sub-envs on sub-env 0's host.
        spared: The others.
        kind: The infra-error kind the `hit` sub-envs report, per signal.
    """

    make_vec: Callable[[Path, str, int], Any]
    hit: tuple[int, ...]
    spared: tuple[int, ...]
    kind: Mapping[int, str] = field(
        default_factory=lambda: {signal.SIGKILL: "sub_env_crash", signal.SIGSTOP: "sub_env_timeout"}
    )


def run_case(setup: VectorFaultSetup, moment: str, marker_dir: Path, sig: int) -> int:
    """Play `moment` (one of `MOMENTS`) with `sig` sent to sub-env 0's host; assert the
    documented outcome (module docstring). Returns the pid `sig` was sent to."""
    hit, spared, kind = setup.hit, setup.spared, setup.kind[sig]
    if moment == "construction":
        signaller = signal_when(marker_dir, "construction", sig)
        with pytest.raises(SubEnvError) as raised:
            setup.make_vec(marker_dir, "construction", sig)
        assert (raised.value.index, raised.value.operation) == (0, "construction")
        if sig == signal.SIGSTOP:
            assert "not built within" in str(raised.value)
        return signaller.result()
    at = "" if moment == "between-steps" else moment
    vec = setup.make_vec(marker_dir, at, sig)
    if moment == "close":
        vec.reset(seed=0)
        signaller = signal_when(marker_dir, "close", sig)
        closing = threading.Thread(target=vec.close)
        closing.start()
        pid = signaller.result()
        closing.join()
        assert vec.closed
        return pid
    with vec:
        if moment == "reset":
            signaller = signal_when(marker_dir, "reset", sig)
            with pytest.raises(SubEnvError) as raised:
                vec.reset(seed=0)
            pid = signaller.result()
            assert (raised.value.index, raised.value.operation) == (0, "reset")
            vec.reset(seed=0)
            _, _, _, truncated, infos = vec.step(["x"] * vec.num_envs)
            assert not truncated.any()
            assert [info["turn"] for info in infos] == [1] * vec.num_envs
            return pid
        vec.reset(seed=0)
        if moment == "step":
            signaller = signal_when(marker_dir, "step", sig)
            assert_hit_and_spared(vec.step(["x"] * 4), hit, spared, turn=1, kind=kind)
            pid = signaller.result()
            assert_recovers(vec, hit, spared, spared_turn=2)
            return pid
        vec.step(["x"] * 4)
        if moment == "between-steps":
            pid = built_pid(marker_dir, "0")
            os.kill(pid, sig)
        else:
            signaller = signal_when(marker_dir, moment, sig)
            with pytest.raises(SubEnvError) as raised:
                QUERIES[moment](vec)
            pid = signaller.result()
            assert raised.value.index == 0
        assert_hit_and_spared(vec.step(["x"] * 4), hit, spared, turn=2, kind=kind)
        assert_recovers(vec, hit, spared, spared_turn=3)
        return pid
