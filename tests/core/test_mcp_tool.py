"""Specification of `MCPToolset` / `MCPFunctionTool` and of the shipped SQLite MCP server.

The server runs for real: as a subprocess over stdio, and as a subprocess serving streamable
HTTP on 127.0.0.1 (port chosen by the OS). Tests that hold for both transports take the
`toolset` fixture, parametrised over them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TextIO

import pytest
from hang_guard import HANG_GUARD_S, wait_until
from toy_envs import ToyEnv

pytest.importorskip("mcp")

from mcp import StdioServerParameters

from xpgym.core.tools.base import ToolCall
from xpgym.core.tools.mcp import (
    SESSION_META_KEY,
    MCPConnectionError,
    MCPFunctionTool,
    MCPToolset,
    format_call_result,
    make_mcp_tools,
)
from xpgym.core.wrappers.tools import ToolEnvWrapper
from xpgym.mcp_servers.sqlite_server import (
    SESSION_META_KEY as SERVER_SESSION_META_KEY,
)
from xpgym.mcp_servers.sqlite_server import (
    SQLiteService,
    SQLiteToolError,
    build_sample_store,
)

SERVER = [sys.executable, "-m", "xpgym.mcp_servers.sqlite_server"]
DB_FUNCTIONS = ["list_tables", "describe_table", "query", "scratch_execute", "scratch_reset"]
DEBUG_FUNCTIONS = ["sleep", "fail", "exit_server", "wait_at_gate", "count_at_gate", "open_gate"]


# ------------------------------------------------------------------------------ helpers


def child_processes() -> set[int]:
    """Pids of this process's children, zombies included (Linux /proc)."""
    pids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid():
            pids.add(int(stat.parent.name))
    return pids


def mcp_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("xpgym-mcp-")]


def stdio_params(db: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=SERVER[0], args=[*SERVER[1:], "--db", str(db), *extra])


def rows(result: Any) -> list[str]:
    """The data lines of a query observation (no header, no row-count footer)."""
    return result.observation.split("\n")[1:-1]


def held_at(toolset: MCPToolset, gate: str) -> int:
    """How many calls wait at the debug server's `gate` (``wait_at_gate``) right now."""
    return int(toolset.call("count_at_gate", {"gate": gate}).observation)


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_sample_store(tmp_path_factory.mktemp("mcp") / "store.db")


@pytest.fixture(scope="module")
def errlog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TextIO]:
    with open(tmp_path_factory.mktemp("logs") / "server.log", "w") as log:
        yield log


@pytest.fixture(scope="module")
def stdio_toolset(store: Path, errlog: TextIO) -> Iterator[MCPToolset]:
    toolset = MCPToolset(stdio_params(store, "--debug-tools"), errlog=errlog, call_timeout_s=10)
    yield toolset
    toolset.close()


@pytest.fixture(scope="module")
def http_url(store: Path, errlog: TextIO) -> Iterator[str]:
    process = subprocess.Popen(
        [*SERVER, "--db", str(store), "--transport", "http", "--port", "0", "--debug-tools"],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    drain = None
    try:
        line = process.stderr.readline()  # "listening on http://127.0.0.1:PORT/mcp"
        assert "listening on http://127.0.0.1:" in line, line
        # Keep reading the server's log so that a full pipe never blocks it.
        drain = threading.Thread(target=errlog.writelines, args=(process.stderr,), daemon=True)
        drain.start()
        yield line.split("listening on ", 1)[1].strip()
    finally:
        process.terminate()
        process.wait(10)
        if drain is not None:
            drain.join(5)  # ends at the pipe's EOF
        process.stderr.close()


@pytest.fixture(scope="module")
def http_toolset(http_url: str) -> Iterator[MCPToolset]:
    toolset = MCPToolset(http_url, call_timeout_s=10)
    yield toolset
    toolset.close()


@pytest.fixture(params=["stdio", "http"])
def toolset(request: pytest.FixtureRequest) -> MCPToolset:
    return request.getfixturevalue(f"{request.param}_toolset")


# ---------------------------------------------------------------------------- discovery


def test_discovery_turns_every_server_function_into_a_tool(toolset: MCPToolset) -> None:
    tools = toolset.tools()
    assert [tool.name for tool in tools] == DB_FUNCTIONS + DEBUG_FUNCTIONS
    assert all(isinstance(tool, MCPFunctionTool) and tool.toolset is toolset for tool in tools)
    assert toolset.server_functions == tuple(DB_FUNCTIONS + DEBUG_FUNCTIONS)


def test_function_schemas_come_from_the_servers_input_schemas(toolset: MCPToolset) -> None:
    schema = toolset.tool("query").function_schema()
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == "query"
    assert "read-only" in function["description"]
    assert function["parameters"]["properties"]["sql"]["type"] == "string"
    assert function["parameters"]["required"] == ["sql"]
    assert toolset.function_schemas()[0]["function"]["name"] == "list_tables"


def test_tools_parse_json_calls_against_the_schema(toolset: MCPToolset) -> None:
    query = toolset.tool("query")
    action = '<tool_call>{"name": "query", "arguments": {"sql": "SELECT 1"}}</tool_call>'
    assert query.parse(action) == ToolCall("query", {"sql": "SELECT 1"}, action)
    assert query.parse('<tool_call>{"name": "list_tables"}</tool_call>') is None
    bad = query.parse('<tool_call>{"name": "query", "arguments": {"sql": 1}}</tool_call>')
    assert bad is not None
    assert "expected string" in (bad.error or "")
    assert query.parse("<query>SELECT 1</query>") is None  # MCP tools take JSON calls only
    assert '"name": "query"' in query.instructions()


def test_include_exclude_and_prefix_shape_the_tool_list(http_url: str) -> None:
    with MCPToolset(http_url, include=["query", "list_tables"], name_prefix="db_") as toolset:
        assert [t.name for t in toolset.tools()] == ["db_query", "db_list_tables"]
        assert toolset.tool("db_query").server_name == "query"
        call = toolset.tool("db_query").parse(
            '<tool_call>{"name": "db_query", "arguments": {"sql": "SELECT 2"}}</tool_call>'
        )
        assert call is not None
        assert rows(toolset.tool("db_query").execute(call)) == ["2"]
    with MCPToolset(http_url, exclude=["scratch_reset", *DEBUG_FUNCTIONS]) as toolset:
        assert [t.name for t in toolset.tools()] == DB_FUNCTIONS[:-1]
        assert toolset.call("scratch_reset").ok  # hidden from the model, callable by the env
    with pytest.raises(ValueError, match=r"no function\(s\) \['nope'\]"):
        MCPToolset(http_url, include=["nope"])


# ------------------------------------------------------------------------------- calls


def test_valid_query_returns_rows(toolset: MCPToolset) -> None:
    result = toolset.call(
        "query", {"sql": "SELECT status, count(*) FROM orders GROUP BY status ORDER BY status"}
    )
    assert result.ok
    assert result.observation.split("\n") == [
        "status | count(*)",
        "cancelled | 2",
        "delivered | 7",
        "pending | 2",
        "shipped | 3",
        "(4 rows)",
    ]
    assert result.info["exit_reason"] == "ok"
    assert result.info["server_tool"] == "query"


def test_list_and_describe_tables(toolset: MCPToolset) -> None:
    listing = toolset.call("list_tables").observation
    assert "customers (8 rows)" in listing
    assert "order_items (23 rows)" in listing
    described = toolset.call("describe_table", {"table": "orders"}).observation
    assert "customer_id INTEGER NOT NULL" in described
    assert "customer_id -> customers(id)" in described


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM customers",
        "UPDATE products SET price_cents = 1",
        "DROP TABLE orders",
        "INSERT INTO customers (id) VALUES (99)",
        "PRAGMA query_only = OFF",
        "ATTACH DATABASE '/tmp/other.db' AS other",
    ],
)
def test_writes_to_the_read_only_database_are_error_observations(
    toolset: MCPToolset, sql: str
) -> None:
    result = toolset.call("query", {"sql": sql})
    assert not result.ok
    assert result.info["exit_reason"] == "tool_error"
    assert "not allowed" in result.observation
    assert rows(toolset.call("query", {"sql": "SELECT count(*) FROM customers"})) == ["8"]


def test_bad_sql_is_an_error_observation(toolset: MCPToolset) -> None:
    result = toolset.call("query", {"sql": "SELEC * FROM orders"})
    assert not result.ok
    assert 'near "SELEC": syntax error' in result.observation


def test_unknown_table_is_an_error_observation_listing_the_tables(toolset: MCPToolset) -> None:
    result = toolset.call("query", {"sql": "SELECT * FROM invoices"})
    assert not result.ok
    assert "no such table: invoices" in result.observation
    assert "customers, order_items, orders, products" in result.observation
    described = toolset.call("describe_table", {"table": "invoices"})
    assert not described.ok
    assert "no table named 'invoices'" in described.observation


def test_multiple_statements_are_refused(toolset: MCPToolset) -> None:
    result = toolset.call("query", {"sql": "SELECT 1; DELETE FROM orders"})
    assert not result.ok
    assert "only one SQL statement per call" in result.observation


def test_server_exception_and_unknown_function_are_error_observations(
    toolset: MCPToolset,
) -> None:
    crashed = toolset.call("fail", {"message": "secret detail"})
    assert not crashed.ok
    assert crashed.info["exit_reason"] == "tool_error"
    assert "infra_error" not in crashed.info  # the tool judged the call
    assert crashed.observation == "Error executing tool fail"  # the server keeps the details
    unknown = toolset.call("drop_everything", {})
    assert not unknown.ok
    assert "Unknown tool" in unknown.observation


def test_call_timeout_is_an_error_observation_and_the_session_survives(
    toolset: MCPToolset,
) -> None:
    # The probe that tells a slow call from a stuck server gets at least 1 s, more than this
    # call's timeout: a server on a busy machine (an HTTP round trip) answers it in time.
    result = toolset.call("sleep", {"seconds": HANG_GUARD_S}, timeout_s=0.3)
    assert not result.ok
    assert result.info["exit_reason"] == "timeout"
    assert result.observation == "Tool 'sleep' timed out after 0.3 s."
    assert rows(toolset.call("query", {"sql": "SELECT 3"})) == ["3"]


def test_concurrent_calls_from_threads_share_the_session(
    toolset: MCPToolset, request: pytest.FixtureRequest
) -> None:
    gate = request.node.name
    with ThreadPoolExecutor(8) as pool:
        held = pool.submit(toolset.call, "wait_at_gate", {"gate": gate}, timeout_s=HANG_GUARD_S)
        assert wait_until(lambda: held_at(toolset, gate) == 1)  # in flight on the server
        fast = [pool.submit(toolset.call, "query", {"sql": f"SELECT {i} * 2"}) for i in range(40)]
        results = [future.result() for future in fast]
        assert not held.done()  # the queries ran beside the held call, not behind it
        assert toolset.call("open_gate", {"gate": gate}).ok
        assert held.result().ok
    assert [rows(result) for result in results] == [[str(i * 2)] for i in range(40)]


def test_aexecute_awaits_on_the_toolsets_loop(toolset: MCPToolset) -> None:
    query = toolset.tool("query")

    async def main() -> list[str]:
        results = await asyncio.gather(
            *(query.aexecute(ToolCall("query", {"sql": f"SELECT {i}"})) for i in range(5))
        )
        return [rows(result)[0] for result in results]

    assert asyncio.run(main()) == ["0", "1", "2", "3", "4"]


def test_malformed_call_is_a_programming_error(toolset: MCPToolset) -> None:
    with pytest.raises(ValueError, match="malformed"):
        toolset.tool("query").execute(ToolCall("query", {}, error="bad"))


# ----------------------------------------------------------------------------- scratch


def test_scratch_database_is_writable_and_private_to_the_session(
    toolset: MCPToolset, http_url: str
) -> None:
    toolset.call("scratch_reset")
    made = toolset.call(
        "scratch_execute",
        {"sql": "CREATE TABLE scratch.dublin AS SELECT id FROM customers WHERE city = 'Dublin'"},
    )
    assert made.ok
    assert rows(toolset.call("query", {"sql": "SELECT count(*) FROM scratch.dublin"})) == ["2"]
    joined = toolset.call(
        "query", {"sql": "SELECT count(*) FROM orders JOIN dublin ON customer_id = dublin.id"}
    )
    assert rows(joined) == ["4"]
    assert "scratch.dublin (2 rows)" in toolset.call("list_tables").observation
    with MCPToolset(http_url) as other:  # another session: its own, empty scratch
        assert not other.call("query", {"sql": "SELECT * FROM scratch.dublin"}).ok
    assert toolset.call("scratch_reset").ok
    assert not toolset.call("query", {"sql": "SELECT * FROM scratch.dublin"}).ok


def test_scratch_execute_cannot_write_the_main_database(toolset: MCPToolset) -> None:
    result = toolset.call("scratch_execute", {"sql": "CREATE TABLE notes (x)"})
    assert not result.ok
    assert "CREATE TABLE scratch.t" in result.observation  # the hint
    result = toolset.call("scratch_execute", {"sql": "DELETE FROM orders"})
    assert not result.ok
    assert "not allowed: DELETE main.orders" in result.observation


def test_session_key_names_the_scratch_database(http_url: str) -> None:
    assert SESSION_META_KEY == SERVER_SESSION_META_KEY
    with MCPToolset(http_url, session_key="shared-key") as first:
        first.call("scratch_reset")
        assert first.call("scratch_execute", {"sql": "CREATE TABLE scratch.k (x)"}).ok
        with MCPToolset(http_url, session_key="shared-key") as second:
            assert second.call("query", {"sql": "SELECT count(*) FROM scratch.k"}).ok
        first.call("scratch_reset")


# ------------------------------------------------------------------------ wrapper, env


def test_tools_work_inside_the_tool_wrapper(http_url: str) -> None:
    tools = make_mcp_tools(url=http_url, exclude=DEBUG_FUNCTIONS)
    env = ToolEnvWrapper(ToyEnv(), tools, instructions=False, close_tools=True)
    _, info = env.reset(seed=0)
    assert [schema["function"]["name"] for schema in info["tools"]] == DB_FUNCTIONS
    action = (
        'Let me count. <tool_call>{"name": "query", "arguments": {"sql": '
        '"SELECT count(*) FROM products"}}</tool_call>'
    )
    obs, _, terminated, truncated, info = env.step(action)
    assert obs == "count(*)\n10\n(1 row)"
    assert (terminated, truncated) == (False, False)
    assert info["tool_calls"][0]["ok"] is True
    obs, *_, info = env.step('<tool_call>{"name": "query", "arguments": {}}</tool_call>')
    assert info["invalid_action"] is True
    assert "missing required argument 'sql'" in obs
    obs, *_ = env.step('<tool_call>{"name": "sleep", "arguments": {"seconds": 1}}</tool_call>')
    assert obs.startswith("Unknown tool 'sleep'")  # excluded tools are not offered
    env.close()
    toolset = tools[0].toolset  # type: ignore[attr-defined]
    assert toolset.closed


def test_make_mcp_tools_needs_exactly_one_server() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        make_mcp_tools()
    with pytest.raises(ValueError, match="exactly one"):
        make_mcp_tools(command="x", url="http://127.0.0.1:9/mcp")


# -------------------------------------------------------------------- shutdown, failures


def test_close_ends_the_session_process_and_thread(store: Path, errlog: TextIO) -> None:
    before_children, before_threads = child_processes(), set(mcp_threads())
    config = {"command": SERVER[0], "args": [*SERVER[1:], "--db", str(store)]}  # mcpServers style
    toolset = MCPToolset(config, errlog=errlog, include=["query"])
    assert len(child_processes() - before_children) == 1  # the server subprocess
    assert len(set(mcp_threads()) - before_threads) == 1
    assert toolset.connected
    assert rows(toolset.call("query", {"sql": "SELECT 7"})) == ["7"]
    toolset.close()
    toolset.close()  # idempotent
    assert toolset.closed
    assert not toolset.connected
    assert child_processes() - before_children == set()  # exited and reaped
    assert set(mcp_threads()) - before_threads == set()
    result = toolset.call("query", {"sql": "SELECT 1"})
    assert not result.ok
    assert result.info["exit_reason"] == "disconnected"
    assert "closed" in result.observation


def test_closing_a_tool_closes_its_toolset(http_url: str) -> None:
    toolset = MCPToolset(http_url)
    toolset.tools()[0].close()
    assert toolset.closed
    assert not toolset.tool("query").execute(ToolCall("query", {"sql": "SELECT 1"})).ok


def test_close_while_calls_are_running_fails_them_cleanly(http_url: str) -> None:
    toolset = MCPToolset(http_url)
    gate = "close-while-running"  # never opened: only close() can end the call
    with ThreadPoolExecutor(2) as pool:
        running = pool.submit(toolset.call, "wait_at_gate", {"gate": gate}, timeout_s=HANG_GUARD_S)
        assert wait_until(lambda: held_at(toolset, gate) == 1)  # in flight on the server
        toolset.close()
        result = running.result(HANG_GUARD_S)
    assert not result.ok
    assert result.info["exit_reason"] == "disconnected"
    assert mcp_threads() == [t for t in mcp_threads() if t.is_alive()]


def test_a_server_that_dies_fails_the_call_and_the_next_call_starts_a_new_one(
    store: Path, errlog: TextIO
) -> None:
    before = child_processes()
    toolset = MCPToolset(stdio_params(store, "--debug-tools"), errlog=errlog)
    (first,) = child_processes() - before
    died = toolset.call("exit_server", {"code": 3})
    assert not died.ok
    assert died.info["exit_reason"] == "disconnected"
    assert died.info["infra_error"]["kind"] == "tool_backend_error"  # not the model's fault
    assert not toolset.connected
    assert rows(toolset.call("query", {"sql": "SELECT 1"})) == ["1"]
    assert toolset.connected
    # The dead server is reaped; the new one runs.
    assert wait_until(lambda: len(child_processes() - before - {first}) == 1)
    assert wait_until(lambda: first not in child_processes())
    toolset.close()
    assert child_processes() - before == set()


def test_without_reconnect_attempts_a_lost_session_stays_lost(store: Path, errlog: TextIO) -> None:
    before = child_processes()
    toolset = MCPToolset(stdio_params(store, "--debug-tools"), errlog=errlog, reconnect_attempts=0)
    assert toolset.call("exit_server", {"code": 3}).info["exit_reason"] == "disconnected"
    after = toolset.call("query", {"sql": "SELECT 1"})
    assert not after.ok
    assert after.info["exit_reason"] == "disconnected"
    assert after.info["infra_error"]["kind"] == "tool_backend_error"
    toolset.close()
    assert child_processes() - before == set()
    with pytest.raises(ValueError, match="reconnect_attempts"):
        MCPToolset(stdio_params(store), reconnect_attempts=-1)


def test_connection_failures_raise_at_construction_without_leaks(tmp_path: Path) -> None:
    before_children, before_threads = child_processes(), set(mcp_threads())
    with pytest.raises(MCPConnectionError, match="cannot connect"):
        MCPToolset(StdioServerParameters(command=sys.executable, args=["-c", "pass"]))
    with pytest.raises(MCPConnectionError, match="No such file"):
        MCPToolset(StdioServerParameters(command=str(tmp_path / "no-such-server")))
    silent = StdioServerParameters(
        command=sys.executable, args=["-c", "import sys; sys.stdin.read()"]
    )
    with pytest.raises(MCPConnectionError, match=r"within 0\.5 s"):
        MCPToolset(silent, connect_timeout_s=0.5)
    with pytest.raises(MCPConnectionError, match="cannot connect"):
        MCPToolset("http://127.0.0.1:9/mcp")
    with pytest.raises(ValueError, match="http"):
        MCPToolset("ftp://127.0.0.1/mcp")
    with pytest.raises(ValueError, match=r"'command' .* or 'url'"):
        MCPToolset({"cmd": "x"})
    assert child_processes() - before_children == set()
    assert set(mcp_threads()) - before_threads == set()


def test_a_server_that_ignores_eof_and_sigterm_is_killed_before_a_connect_timeout_raises() -> None:
    """The SDK ends a stdio server inside a shielded scope (stdin closed, 2 s, SIGTERM, 2 s,
    SIGKILL); abandoning a connection must let that finish, or this server outlives us."""
    stubborn = StdioServerParameters(
        command=sys.executable,
        args=[
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)",
        ],
    )
    before = child_processes()
    with pytest.raises(MCPConnectionError, match=r"within 0\.5 s"):
        MCPToolset(stubborn, connect_timeout_s=0.5)
    assert child_processes() - before == set()


# ------------------------------------------------------------------ result formatting


def test_format_call_result_renders_each_content_kind() -> None:
    result = SimpleNamespace(
        content=[
            SimpleNamespace(type="text", text="hello"),
            SimpleNamespace(type="image", mime_type="image/png", data="AAAA"),
            SimpleNamespace(type="resource_link", uri="file:///x"),
            SimpleNamespace(type="resource", resource=SimpleNamespace(text="inline", uri="u")),
        ],
        structured_content=None,
    )
    assert format_call_result(result) == (
        "hello\n[image content, image/png, 3 bytes]\n[resource link: file:///x]\ninline"
    )
    structured = SimpleNamespace(content=[], structured_content={"n": 1})
    assert json.loads(format_call_result(structured)) == {"n": 1}
    long = SimpleNamespace(content=[SimpleNamespace(type="text", text="x" * 100)])
    assert format_call_result(long, 40) == "x" * 24 + " ... [truncated]"


def test_observations_are_capped(http_url: str) -> None:
    with MCPToolset(http_url, max_output_chars=60) as toolset:
        result = toolset.call("query", {"sql": "SELECT * FROM customers"})
    assert len(result.observation) == 60
    assert result.observation.endswith("[truncated]")


# ----------------------------------------------------------- the SQLite service itself


@pytest.fixture
def service(store: Path) -> Iterator[SQLiteService]:
    service = SQLiteService(store, max_rows=3, query_timeout_s=0.3, max_sessions=2)
    yield service
    service.close()


def test_service_limits_rows_and_says_so(service: SQLiteService) -> None:
    text = service.query("s", "SELECT id FROM products ORDER BY id")
    assert text.split("\n") == [
        "id",
        "1",
        "2",
        "3",
        "(first 3 rows shown; more rows exist: add LIMIT/WHERE)",
    ]


def test_service_stops_long_queries(service: SQLiteService) -> None:
    endless = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    )
    with pytest.raises(SQLiteToolError, match=r"longer than 0.3 s"):
        service.query("s", endless)


def test_service_catalog_survives_an_endless_view(service: SQLiteService) -> None:
    service.scratch_execute(
        "s",
        "CREATE VIEW scratch.endless AS WITH RECURSIVE c(x) AS "
        "(SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c",
    )
    assert "scratch.endless (? rows, view)" in service.list_tables("s")  # counting was stopped
    assert service.describe_table("s", "scratch.endless").startswith("view scratch.endless (?")


def test_service_refuses_transactions_and_temp_tables_in_scratch(service: SQLiteService) -> None:
    with pytest.raises(SQLiteToolError, match="not allowed: TRANSACTION"):
        service.scratch_execute("s", "BEGIN")
    with pytest.raises(SQLiteToolError, match="not allowed"):
        service.scratch_execute("s", "CREATE TEMP TABLE t (x)")
    assert service.scratch_execute("s", "CREATE TABLE scratch.t (x)") == "OK"
    assert service.scratch_execute("s", "INSERT INTO scratch.t VALUES (1), (2)") == (
        "OK, 2 rows changed"
    )
    assert "table scratch.t (2 rows)" in service.describe_table("s", "scratch.t")


def test_service_keeps_at_most_max_sessions(service: SQLiteService) -> None:
    for name in ("a", "b", "c"):
        service.scratch_execute(name, f"CREATE TABLE scratch.{name} (x)")
    assert service.session_names == ["b", "c"]
    with pytest.raises(SQLiteToolError, match="no such table"):
        service.query("a", "SELECT * FROM scratch.a")  # "a" was evicted: a fresh scratch


def test_service_never_writes_the_database_file(store: Path, service: SQLiteService) -> None:
    before = store.read_bytes()
    for sql in ("DELETE FROM orders", "CREATE TABLE x (y)", "DROP TABLE customers"):
        with pytest.raises(SQLiteToolError):
            service.scratch_execute("s", sql)
    assert store.read_bytes() == before


def test_service_rejects_a_missing_database(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        SQLiteService(tmp_path / "missing.db")


def test_sample_store_is_deterministic_and_not_overwritten(tmp_path: Path) -> None:
    path = build_sample_store(tmp_path / "a.db")
    with sqlite3.connect(path) as conn:
        counts = {
            table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("customers", "products", "orders", "order_items")
        }
        (revenue,) = conn.execute(
            "SELECT sum(quantity * unit_price_cents) FROM order_items JOIN orders "
            "ON orders.id = order_id WHERE status = 'delivered'"
        ).fetchone()
    conn.close()
    assert counts == {"customers": 8, "products": 10, "orders": 14, "order_items": 23}
    assert revenue == 38050
    with pytest.raises(FileExistsError):
        build_sample_store(path)
    assert build_sample_store(path, overwrite=True) == path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.db"]  # no partial files left


def test_the_probe_after_a_timed_out_call_gets_between_one_and_five_seconds() -> None:
    from xpgym.core.tools.mcp import _probe_bound

    assert [_probe_bound(t) for t in (0.05, 0.3, 1.0, 2.5, 5.0, 60.0)] == [1, 1, 1, 2.5, 5, 5]
