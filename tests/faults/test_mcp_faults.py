"""An MCP server killed (SIGKILL) or stopped past ``call_timeout_s`` (SIGSTOP) under an
`MCPToolset` (`xpgym.core.tools.mcp`: "Errors", "Reconnecting", "Shutdown").

The server is the shipped SQLite server with its debug functions, a stdio subprocess of the
toolset (one case runs it over HTTP, started by the test); a call in flight waits at a gate
(``wait_at_gate``), and the test sees it there (``count_at_gate``) before it signals the
server. The documented outcome, per case:

==================  =======================================================================
fault, moment       outcome
==================  =======================================================================
SIGKILL, call       the call returns ``ok=False``, ``exit_reason="disconnected"`` with the
                    ``tool_backend_error`` infra marker; the next call runs on a new server
                    process
SIGKILL, between    the next call: as above (the dead call); the call after it runs on a new
calls               server process
SIGSTOP, call       the call times out, the probe goes unanswered: ``"unresponsive"`` with
                    the infra marker, after ``call_timeout_s`` + the probe; the next call
                    runs on a new server process and the stopped one is killed
slow tool (no       ``"timeout"`` without a marker (the call's failure: the server answers
fault)              the probe); the next call runs on the same server process
SIGKILL, HTTP       the dead call: ``"disconnected"``; calls while the server is down fail
server              their one reconnect attempt (``"disconnected"``, marker, at once); once
                    it is back on its port, the next call reconnects
SIGKILL, close      `close` returns
SIGSTOP, close      `close` returns (the SDK kills a server that does not exit)
==================  =======================================================================

Every case ends with each server process it started reaped (`no_orphans`) and the toolset's
thread gone (`no_stray_threads`).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hang_guard import HANG_GUARD_S, wait_until

pytest.importorskip("mcp", reason="MCP tools need xpgym[mcp]")
psutil = pytest.importorskip("psutil", reason="finding the server's process needs psutil")

from mcp import StdioServerParameters  # noqa: E402  (after the skip)

from xpgym.core.tools.base import ToolResult  # noqa: E402
from xpgym.core.tools.mcp import MCPToolset  # noqa: E402
from xpgym.mcp_servers.sqlite_server import build_sample_store  # noqa: E402

CALL_TIMEOUT_S = 2.0
"""For the stopped server and the slow tool; a debug call answers in milliseconds."""

GATE = "fault"
"""Never opened: a call waiting at it ends only by the fault or its timeout."""

SERVER = [sys.executable, "-m", "xpgym.mcp_servers.sqlite_server", "--debug-tools"]

pytestmark = pytest.mark.usefixtures("no_orphans", "no_stray_threads")


@pytest.fixture
def toolset(tmp_path: Path) -> Iterator[MCPToolset]:
    db = build_sample_store(tmp_path / "store.db")
    server = StdioServerParameters(command=SERVER[0], args=[*SERVER[1:], "--db", str(db)])
    with (tmp_path / "server.log").open("w") as errlog:
        box = MCPToolset(server, errlog=errlog, call_timeout_s=CALL_TIMEOUT_S)
        yield box
        box.close()


_SEEN_SERVER_PIDS: set[int] = set()


def server_pids() -> set[int]:
    """The SQLite server processes this test process started that are not reaped yet: the
    running ones, and the exited ones (zombies, whose command line cannot be read any more)
    that an earlier look saw as servers."""
    pids = set()
    for child in psutil.Process().children():
        try:
            if "xpgym.mcp_servers.sqlite_server" in " ".join(child.cmdline()):
                _SEEN_SERVER_PIDS.add(child.pid)
                pids.add(child.pid)
        except psutil.ZombieProcess:
            if child.pid in _SEEN_SERVER_PIDS:
                pids.add(child.pid)
        except psutil.NoSuchProcess:
            pass  # reaped since it was listed
    return pids


def server_process() -> psutil.Process:
    (pid,) = server_pids()
    return psutil.Process(pid)


def assert_infra(result: ToolResult, exit_reason: str) -> None:
    assert not result.ok
    assert result.info["exit_reason"] == exit_reason, result.info
    assert result.info["infra_error"]["kind"] == "tool_backend_error"


def assert_works_on_a_new_server(toolset: MCPToolset, old: psutil.Process) -> None:
    """The next call reconnects: it works, on a server process other than `old`, and `old`
    ends (killed by the SDK if it was stopped) and is reaped."""
    assert toolset.call("query", {"sql": "SELECT 1"}).ok
    assert toolset.connected
    assert wait_until(lambda: server_pids() - {old.pid})
    assert wait_until(lambda: old.pid not in server_pids())


def hold_a_call_and_signal(toolset: MCPToolset, sig: int) -> ToolResult:
    """A call waits at the gate; `sig` hits the server; the call's result."""
    server = server_process()
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(toolset.call, "wait_at_gate", {"gate": GATE})
        assert wait_until(lambda: toolset.call("count_at_gate", {"gate": GATE}).observation == "1")
        server.send_signal(sig)
        return running.result(HANG_GUARD_S)


def killed_in_call(toolset: MCPToolset) -> None:
    server = server_process()
    assert_infra(hold_a_call_and_signal(toolset, signal.SIGKILL), "disconnected")
    assert not toolset.connected
    assert_works_on_a_new_server(toolset, server)
    toolset.close()


def stopped_in_call(toolset: MCPToolset) -> None:
    server = server_process()
    result = hold_a_call_and_signal(toolset, signal.SIGSTOP)
    assert_infra(result, "unresponsive")  # not "timeout": the probe went unanswered too
    assert not toolset.connected
    assert_works_on_a_new_server(toolset, server)
    toolset.close()


def slow_tool_on_a_live_server(toolset: MCPToolset) -> None:
    server = server_process()
    result = toolset.call("sleep", {"seconds": HANG_GUARD_S})
    assert not result.ok
    assert result.info["exit_reason"] == "timeout", result.info
    assert "infra_error" not in result.info  # the server answered the probe: the call's fault
    assert toolset.connected
    assert toolset.call("query", {"sql": "SELECT 1"}).ok
    assert server_pids() == {server.pid}
    toolset.close()


def killed_between_calls(toolset: MCPToolset) -> None:
    assert toolset.call("query", {"sql": "SELECT 1"}).ok
    server = server_process()
    server.kill()
    server.wait(HANG_GUARD_S)
    # Nothing noticed the death until this call: it is the dead call.
    assert_infra(toolset.call("query", {"sql": "SELECT 1"}), "disconnected")
    assert_works_on_a_new_server(toolset, server)
    toolset.close()


def fault_before_close(sig: int) -> Callable[[MCPToolset], None]:
    def case(toolset: MCPToolset) -> None:
        assert toolset.call("query", {"sql": "SELECT 1"}).ok
        server_process().send_signal(sig)
        toolset.close()
        assert toolset.closed

    return case


CASES: dict[str, Callable[[MCPToolset], None]] = {
    "call-SIGKILL": killed_in_call,
    "call-SIGSTOP": stopped_in_call,
    "call-slow-tool": slow_tool_on_a_live_server,
    "between-calls-SIGKILL": killed_between_calls,
    "close-SIGKILL": fault_before_close(signal.SIGKILL),
    "close-SIGSTOP": fault_before_close(signal.SIGSTOP),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_killed_or_stopped_mcp_server_ends_in_the_documented_outcome(
    toolset: MCPToolset, case: str
) -> None:
    CASES[case](toolset)


def start_http_server(db: Path, port: int, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The SQLite server over HTTP on `port` (0: any), logging to `log`, and its URL once it
    listens (it writes ``listening on http://127.0.0.1:PORT/mcp`` to its log)."""
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*SERVER, "--db", str(db), "--transport", "http", "--port", str(port)],
            stderr=stderr,
        )

    def listening() -> str | None:
        text = log.read_text()
        if "listening on " not in text:
            return None
        return text.split("listening on ", 1)[1].split()[0]

    url = wait_until(listening)
    assert url, log.read_text()
    return process, url


def test_a_killed_http_server_is_reconnected_to_once_it_is_back(tmp_path: Path) -> None:
    db = build_sample_store(tmp_path / "store.db")
    server, url = start_http_server(db, 0, tmp_path / "server.log")
    toolset = MCPToolset(url, call_timeout_s=CALL_TIMEOUT_S)
    try:
        assert toolset.call("query", {"sql": "SELECT 1"}).ok
        server.kill()
        server.wait(HANG_GUARD_S)
        assert_infra(toolset.call("query", {"sql": "SELECT 1"}), "disconnected")
        down = toolset.call("query", {"sql": "SELECT 1"})  # its one reconnect attempt fails
        assert_infra(down, "disconnected")
        assert "reconnecting failed (1 attempt(s))" in down.observation
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        server, again = start_http_server(db, port, tmp_path / "server-again.log")
        assert again == url
        assert toolset.call("query", {"sql": "SELECT 1"}).ok
    finally:
        toolset.close()
        server.kill()
        server.wait(HANG_GUARD_S)
