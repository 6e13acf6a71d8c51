"""The env server killed (SIGKILL) or stopped past the client's ``timeout`` (SIGSTOP) while a
`RemoteEnv` uses it (`xpgym.remote.client`'s failure contract, docs/remote.md).

Server A is a ``python -m``-style child process that this test starts on 127.0.0.1 and
kills; server B runs in this process and is never touched. A `ThreadVectorEnv` holds sub-env
0 on A (a `FaultEnv` that stalls at the moment under test) and sub-env 1 on B. After the
fault, A is started again on the same port. The documented outcome, per moment:

==============  ==========================================================================
moment          outcome
==============  ==========================================================================
reset           `reset` raises `SubEnvError` (index 0; `RemoteEnvError` inside); once the
                server is back, the next reset opens a new session and works
step            sub-env 0 truncated with ``"remote_error"``, sub-env 1 steps on; once the
                server is back, sub-env 0's next step resets it in a new session
between steps   as ``step``, at the next step
call            ``call("get_state")`` raises `SubEnvError` (index 0); the session is gone,
                so sub-env 0's next step is truncated with ``"remote_error"``, then reset
close           `close` returns without raising (within ``timeout`` for a stopped server)
==============  ==========================================================================

A `RemoteEnv` is built without contacting the server (its session opens at the first reset),
so construction is the ``reset`` case. Every case ends with the server process reaped
(`no_orphans`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fault_envs import FAULT_ENV_ID, infra_kind, register_fault_env, signal_when

import xpgym
from xpgym.core.vector import SubEnvError, ThreadVectorEnv

pytest.importorskip("uvicorn", reason="the env server needs xpgym[remote]")
pytest.importorskip("starlette", reason="the env server needs xpgym[remote]")

from xpgym.remote import BackgroundServer

TIMEOUT = 3.0
"""The client's request timeout for the stopped-server cases (a toy step takes ms)."""

SERVER_MAIN = """
import sys
from fault_envs import register_fault_env
from xpgym.remote import BackgroundServer
register_fault_env()
server = BackgroundServer(["faults:*"], port=int(sys.argv[1])).start()
print(server.port, flush=True)
sys.stdin.read()  # serve until the test closes stdin (or is gone)
server.stop()
"""

pytestmark = pytest.mark.usefixtures("no_orphans")


class ServerProcess:
    """Env server A: a child process on 127.0.0.1 serving ``faults:*``."""

    def __init__(self) -> None:
        self.port = 0
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        """Start it (on the port it had, if it ran before); return once it serves."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER_MAIN, str(self.port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.strip().isdigit(), f"env server did not start (it said {line!r})"
        self.port = int(line)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """SIGKILL it (stopped or not) and reap it."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            assert pipe is not None
            pipe.close()

    def restart(self) -> None:
        self.kill()
        self.start()


@pytest.fixture
def server_a() -> Iterator[ServerProcess]:
    server = ServerProcess()
    server.start()
    yield server
    server.kill()


@pytest.fixture(scope="module")
def server_b() -> Iterator[BackgroundServer]:
    register_fault_env()
    with BackgroundServer(["faults:*"]) as server:
        yield server


def make_vec(
    marker_dir: Path, server_a: ServerProcess, server_b: BackgroundServer, at: str
) -> ThreadVectorEnv:
    def remote(url: str, name: str, fault_at: str) -> Callable[[], xpgym.Env]:
        return lambda: xpgym.make(
            f"remote:{url}/{FAULT_ENV_ID}",
            marker_dir=str(marker_dir),
            name=name,
            at=fault_at,
            episode_length=10,
            timeout=TIMEOUT,
        )

    return ThreadVectorEnv([remote(server_a.url, "0", at), remote(server_b.url, "1", "")])


def assert_zero_lost(batch: tuple, turn: int) -> None:
    """Sub-env 0 truncated with a remote-error marker; sub-env 1 at `turn`."""
    _, _, _, truncated, infos = batch
    assert truncated[0]
    assert infra_kind(infos[0]) == "remote_error", infos[0]
    assert not truncated[1]
    assert infra_kind(infos[1]) is None
    assert infos[1]["turn"] == turn


def assert_recovers(vec: ThreadVectorEnv, turn: int) -> None:
    """The next step resets sub-env 0 in a new session and steps sub-env 1 to `turn`; the one
    after steps both."""
    observations, _, _, truncated, infos = vec.step(["x", "x"])
    assert observations[0].startswith("start")
    assert not truncated.any()
    assert infos[1]["turn"] == turn
    _, _, _, truncated, infos = vec.step(["x", "x"])
    assert not truncated.any()
    assert [info["turn"] for info in infos] == [1, turn + 1]


Case = Callable[[Path, ServerProcess, BackgroundServer, int], None]


def fault_in_reset(marker_dir: Path, a: ServerProcess, b: BackgroundServer, sig: int) -> None:
    with make_vec(marker_dir, a, b, "reset") as vec:
        signaller = signal_when(marker_dir, "reset", sig)
        with pytest.raises(SubEnvError) as raised:
            vec.reset(seed=0)
        signaller.result()
        assert (raised.value.index, raised.value.operation) == (0, "reset")
        a.restart()
        vec.reset(seed=0)
        _, _, _, truncated, infos = vec.step(["x", "x"])
        assert not truncated.any()
        assert [info["turn"] for info in infos] == [1, 1]


def fault_in_step(marker_dir: Path, a: ServerProcess, b: BackgroundServer, sig: int) -> None:
    with make_vec(marker_dir, a, b, "step") as vec:
        vec.reset(seed=0)
        signaller = signal_when(marker_dir, "step", sig)
        assert_zero_lost(vec.step(["x", "x"]), turn=1)
        signaller.result()
        a.restart()
        assert_recovers(vec, turn=2)


def fault_between_steps(marker_dir: Path, a: ServerProcess, b: BackgroundServer, sig: int) -> None:
    with make_vec(marker_dir, a, b, "") as vec:
        vec.reset(seed=0)
        vec.step(["x", "x"])
        assert a.process is not None
        os.kill(a.process.pid, sig)
        assert_zero_lost(vec.step(["x", "x"]), turn=2)
        a.restart()
        assert_recovers(vec, turn=3)


def fault_in_call(marker_dir: Path, a: ServerProcess, b: BackgroundServer, sig: int) -> None:
    with make_vec(marker_dir, a, b, "call") as vec:
        vec.reset(seed=0)
        vec.step(["x", "x"])
        signaller = signal_when(marker_dir, "call", sig)
        with pytest.raises(SubEnvError) as raised:
            vec.call("get_state")
        signaller.result()
        assert raised.value.index == 0
        a.restart()
        assert_zero_lost(vec.step(["x", "x"]), turn=2)
        assert_recovers(vec, turn=3)


def fault_before_close(marker_dir: Path, a: ServerProcess, b: BackgroundServer, sig: int) -> None:
    vec = make_vec(marker_dir, a, b, "")
    vec.reset(seed=0)
    vec.step(["x", "x"])
    assert a.process is not None
    os.kill(a.process.pid, sig)
    vec.close()
    assert vec.closed


SCENARIOS: dict[str, Case] = {
    "reset": fault_in_reset,
    "step": fault_in_step,
    "between-steps": fault_between_steps,
    "call": fault_in_call,
    "close": fault_before_close,
}

CASES = [
    *[(moment, signal.SIGKILL) for moment in SCENARIOS],
    ("step", signal.SIGSTOP),
    ("close", signal.SIGSTOP),
]
"""(moment, signal): every moment killed; stopped past the client's ``timeout`` in a step
and in close."""


@pytest.mark.parametrize(
    ("moment", "sig"), CASES, ids=[f"{m}-{signal.Signals(s).name}" for m, s in CASES]
)
def test_a_killed_or_stopped_server_ends_in_the_documented_outcome(
    marker_dir: Path,
    server_a: ServerProcess,
    server_b: BackgroundServer,
    moment: str,
    sig: int,
) -> None:
    SCENARIOS[moment](marker_dir, server_a, server_b, sig)
