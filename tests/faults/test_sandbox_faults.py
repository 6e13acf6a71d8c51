"""The sandbox's processes killed (SIGKILL) or stopped (SIGSTOP) during a call, between two
calls and before close (`xpgym.core.sandbox`: "Lifecycle and threads", `SandboxLimits`).

The processes of one `Sandbox`: bubblewrap (what the host starts), the zygote (the warm
interpreter inside it, which builds calls), and per call its init and its program. A call
in flight names its program ``xpgym-fault`` (``prctl(PR_SET_NAME)``, visible in the host's
``/proc``), so the test finds every process of that call by name, never by timing. The
documented outcome, per case:

=========================  ===============================================================
process, moment, signal    outcome
=========================  ===============================================================
bwrap or zygote, call,     the call in flight returns ``exit_reason="killed"`` with a note
SIGKILL                    on stderr; the next call runs on a new zygote
bwrap or zygote, between   the next call runs on a new zygote. The test makes it once the
calls, SIGKILL             killed sandbox has exited: a call made while it is dying is in
                           flight (``"killed"``), here as after a kill during a call
zygote, between calls,     the next calls return ``"ok"``: a call the zygote cannot build
SIGSTOP                    is given up after its ``wall_timeout_s`` (+2 s) and retried once
                           on a new zygote
call init, call, SIGKILL   ``"killed"`` with the note; the next call works
call init, call, SIGSTOP   ``"timeout"`` at the host's deadline (``wall_timeout_s`` + 2 s)
program, call, SIGKILL     ``"killed"`` (exit code -9); the next call works
program, call, SIGSTOP     ``"timeout"`` (the init's wall clock)
zygote, close, SIGKILL     `close` returns; nothing is left running
=========================  ===============================================================

Construction is not a case: the zygote reports ready before `Sandbox()` returns, and there is
no deterministic point inside its start-up to kill. Every case ends with no child process
left (`no_orphans`).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from hang_guard import HANG_GUARD_S, wait_until

from xpgym.core.sandbox import Sandbox, SandboxLimits, SandboxResult, SandboxUnavailableError

psutil = pytest.importorskip("psutil", reason="finding the sandbox's processes needs psutil")

PROGRAM_NAME = "xpgym-fault"
FAULTED_CALL = (
    "import ctypes, time\n"
    f"ctypes.CDLL(None).prctl(15, {PROGRAM_NAME.encode()!r}, 0, 0, 0)\n"
    f"time.sleep({HANG_GUARD_S})\n"
)
"""A program that names itself, then waits to be faulted (or for its wall clock)."""

LIMITS = SandboxLimits(wall_timeout_s=3.0)
"""Short enough for a quick suite; a ``print`` takes milliseconds."""

pytestmark = pytest.mark.usefixtures("no_orphans")


_EARLIER: set[int] = set()
"""Processes of this test process that existed before the case's sandbox (another test's
sandbox may still be alive in the same session): never the case's to find or fault."""


def _ours(recursive: bool = True) -> list[psutil.Process]:
    """This process's children that the case's sandbox started."""
    return [c for c in psutil.Process().children(recursive=recursive) if c.pid not in _EARLIER]


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    _EARLIER.clear()
    _EARLIER.update(child.pid for child in psutil.Process().children(recursive=True))
    try:
        box = Sandbox(pool_size=1)
    except SandboxUnavailableError as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"no sandbox on this machine: {exc}")
    with box:
        assert box.run_python("print(0)", limits=LIMITS).ok
        yield box


def named(name: str) -> psutil.Process | None:
    for child in _ours():
        try:
            if child.name() == name:
                return child
        except psutil.NoSuchProcess:
            continue
    return None


def zygote() -> psutil.Process:
    """The zygote: the interpreter whose parent is bubblewrap."""
    for child in _ours():
        try:
            if child.name().startswith("python") and child.parent().name() == "bwrap":
                return child
        except psutil.NoSuchProcess:
            continue
    raise AssertionError("the sandbox has no zygote")


def bwrap() -> psutil.Process:
    """The bubblewrap process the host started (its direct child named ``bwrap``)."""
    (process,) = [c for c in _ours(recursive=False) if c.name() == "bwrap"]
    return process


def target(process: str) -> psutil.Process:
    """The process named `process`, found while a faulted call runs."""
    program = wait_until(lambda: named(PROGRAM_NAME))
    assert program is not None, "the faulted call never started"
    return {
        "bwrap": bwrap,
        "zygote": zygote,
        "call init": program.parent,
        "program": lambda: program,
    }[process]()


def in_flight(box: Sandbox) -> tuple[Future[SandboxResult], ThreadPoolExecutor]:
    pool = ThreadPoolExecutor(max_workers=1)
    return pool.submit(box.run_python, FAULTED_CALL, limits=LIMITS), pool


def assert_next_call_works(box: Sandbox) -> None:
    result = box.run_python("print(5)", limits=LIMITS)
    assert (result.exit_reason, result.stdout) == ("ok", "5\n"), result


def gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def fault_in_call(process: str, sig: int, reason: str) -> Callable[[Sandbox], None]:
    def case(box: Sandbox) -> None:
        sandbox_process = bwrap()
        running, pool = in_flight(box)
        victim = target(process)
        victim.send_signal(sig)
        result = running.result(timeout=HANG_GUARD_S)
        pool.shutdown()
        if process in ("bwrap", "zygote"):
            assert wait_until(lambda: gone(sandbox_process))
        assert result.exit_reason == reason, result
        if reason == "killed" and process != "program":
            assert "the sandbox failed during this call" in result.stderr
        if process == "program" and sig == signal.SIGKILL:
            assert result.exit_code == -signal.SIGKILL
        if sig == signal.SIGSTOP and process != "program":
            with contextlib.suppress(psutil.NoSuchProcess):
                victim.kill()  # if the host gave up on it without ending it
        assert_next_call_works(box)

    return case


def fault_between_calls(process: Callable[[], psutil.Process], sig: int) -> Callable:
    def case(box: Sandbox) -> None:
        sandbox_process = bwrap()
        process().send_signal(sig)
        if sig == signal.SIGKILL:  # "between": the sandbox is gone before the next call
            assert wait_until(lambda: gone(sandbox_process))
        assert_next_call_works(box)
        assert_next_call_works(box)  # the pool's next call too

    return case


def fault_before_close(box: Sandbox) -> None:
    os.kill(zygote().pid, signal.SIGKILL)
    box.close()


CASES: dict[str, Callable[[Sandbox], None]] = {
    "bwrap-call-SIGKILL": fault_in_call("bwrap", signal.SIGKILL, "killed"),
    "zygote-call-SIGKILL": fault_in_call("zygote", signal.SIGKILL, "killed"),
    "bwrap-between-calls-SIGKILL": fault_between_calls(bwrap, signal.SIGKILL),
    "zygote-between-calls-SIGKILL": fault_between_calls(zygote, signal.SIGKILL),
    "zygote-between-calls-SIGSTOP": fault_between_calls(zygote, signal.SIGSTOP),
    "call-init-call-SIGKILL": fault_in_call("call init", signal.SIGKILL, "killed"),
    "call-init-call-SIGSTOP": fault_in_call("call init", signal.SIGSTOP, "timeout"),
    "program-call-SIGKILL": fault_in_call("program", signal.SIGKILL, "killed"),
    "program-call-SIGSTOP": fault_in_call("program", signal.SIGSTOP, "timeout"),
    "zygote-close-SIGKILL": fault_before_close,
}


BOUNDED = pytest.mark.timeout(45)
"""For the stopped zygote: its calls are given up after ``wall_timeout_s`` + 2 s (5 s here);
45 s is generous on a loaded machine, and short of the 60 s the host once waited."""


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=BOUNDED) if "SIGSTOP" in c else c for c in CASES]
)
def test_a_killed_or_stopped_sandbox_process_ends_in_the_documented_outcome(
    sandbox: Sandbox, case: str
) -> None:
    CASES[case](sandbox)
