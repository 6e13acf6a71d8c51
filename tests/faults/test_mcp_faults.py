"""An MCP server (stdio subprocess) killed (SIGKILL) or stopped past ``call_timeout_s``
(SIGSTOP) under an `MCPToolset` (`xpgym.core.tools.mcp`: "Errors", "Shutdown").

The server is the shipped SQLite server with its debug functions; a call in flight waits at
a gate (``wait_at_gate``), and the test sees it there (``count_at_gate``) before it signals
the server. The documented outcome, per case:

==================  =======================================================================
fault, moment       outcome
==================  =======================================================================
SIGKILL, call       the call returns ``ok=False``, ``exit_reason="disconnected"`` with the
                    ``tool_backend_error`` infra marker; so does every later call (the
                    toolset does not reconnect)
SIGKILL, between    the next call: as above
calls
SIGSTOP, call       the call returns ``exit_reason="timeout"`` after ``call_timeout_s``; a
                    timeout is the call's failure, not the backend's: no infra marker
SIGKILL, close      `close` returns
SIGSTOP, close      `close` returns (the SDK kills a server that does not exit)
==================  =======================================================================

Every case ends with the server process reaped (`no_orphans`) and the toolset's thread
gone (`no_stray_threads`).
"""

from __future__ import annotations

import signal
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
"""For the stopped server; a debug call answers in milliseconds."""

GATE = "fault"
"""Never opened: a call waiting at it ends only by the fault."""

pytestmark = pytest.mark.usefixtures("no_orphans", "no_stray_threads")


@pytest.fixture
def toolset(tmp_path: Path) -> Iterator[MCPToolset]:
    db = build_sample_store(tmp_path / "store.db")
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "xpgym.mcp_servers.sqlite_server", "--db", str(db), "--debug-tools"],
    )
    with (tmp_path / "server.log").open("w") as errlog:
        box = MCPToolset(server, errlog=errlog, call_timeout_s=CALL_TIMEOUT_S)
        yield box
        box.close()


def server_process() -> psutil.Process:
    (server,) = [
        child
        for child in psutil.Process().children()
        if "xpgym.mcp_servers.sqlite_server" in " ".join(child.cmdline())
    ]
    return server


def assert_disconnected(result: ToolResult) -> None:
    assert not result.ok
    assert result.info["exit_reason"] == "disconnected", result.info
    assert result.info["infra_error"]["kind"] == "tool_backend_error"


def fault_in_call(sig: int) -> Callable[[MCPToolset], None]:
    def case(toolset: MCPToolset) -> None:
        server = server_process()
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(toolset.call, "wait_at_gate", {"gate": GATE})
            assert wait_until(
                lambda: toolset.call("count_at_gate", {"gate": GATE}).observation == "1"
            )
            server.send_signal(sig)
            result = running.result(HANG_GUARD_S)
        if sig == signal.SIGKILL:
            assert_disconnected(result)
            assert_disconnected(toolset.call("query", {"sql": "SELECT 1"}))
        else:  # the gate never opens: the call ends at call_timeout_s, stopped or not
            assert not result.ok
            assert result.info["exit_reason"] == "timeout", result.info
            assert "infra_error" not in result.info
        toolset.close()

    return case


def fault_between_calls(toolset: MCPToolset) -> None:
    assert toolset.call("query", {"sql": "SELECT 1"}).ok
    server = server_process()
    server.kill()
    server.wait(HANG_GUARD_S)
    assert_disconnected(toolset.call("query", {"sql": "SELECT 1"}))
    toolset.close()


def fault_before_close(sig: int) -> Callable[[MCPToolset], None]:
    def case(toolset: MCPToolset) -> None:
        assert toolset.call("query", {"sql": "SELECT 1"}).ok
        server_process().send_signal(sig)
        toolset.close()
        assert toolset.closed

    return case


CASES: dict[str, Callable[[MCPToolset], None]] = {
    "call-SIGKILL": fault_in_call(signal.SIGKILL),
    "call-SIGSTOP": fault_in_call(signal.SIGSTOP),
    "between-calls-SIGKILL": fault_between_calls,
    "close-SIGKILL": fault_before_close(signal.SIGKILL),
    "close-SIGSTOP": fault_before_close(signal.SIGSTOP),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_killed_or_stopped_mcp_server_ends_in_the_documented_outcome(
    toolset: MCPToolset, case: str
) -> None:
    CASES[case](toolset)
