"""A SQLite database as an MCP server: read-only queries plus a writable scratch database.

Run it::

    python -m xpgym.mcp_servers.sqlite_server --db store.db                  # stdio
    python -m xpgym.mcp_servers.sqlite_server --db store.db --transport http --port 8765
    python -m xpgym.mcp_servers.sqlite_server --db store.db --create-sample  # build it first

Over HTTP the server binds ``--host`` (default ``127.0.0.1``) and serves streamable HTTP at
``/mcp``; once listening it writes ``listening on http://HOST:PORT/mcp`` to stderr (with
``--port 0`` the OS picks the port, and that line says which).

Tools
-----

* ``list_tables()``: the tables and views of the database with their row counts, and the
  session's scratch tables.
* ``describe_table(table)``: columns (type, primary key, NOT NULL, default), foreign keys and
  row count; ``scratch.<name>`` describes a scratch table.
* ``query(sql)``: one read-only SQL statement; returns at most `max_rows` rows as a ``|``
  separated table. Read-only is enforced three ways: the database is opened with the
  ``mode=ro`` URI flag, the connection runs with ``PRAGMA query_only=ON``, and an SQLite
  authorizer admits only reads (``SELECT``, reading columns, functions, recursive CTEs and
  the introspection pragmas ``table_info``, ``table_xinfo``, ``index_list``, ``index_info``,
  ``index_xinfo``, ``foreign_key_list``). ``ATTACH``, ``DETACH``, other pragmas and every
  write are refused.
* ``scratch_execute(sql)``: one SQL statement that may write, but only to the scratch
  database, an in-memory SQLite database attached as ``scratch`` (``CREATE TABLE scratch.t
  AS SELECT ...``, ``INSERT INTO scratch.t ...``); each call commits on its own (``BEGIN``
  and savepoints are refused). Unqualified names in a ``CREATE`` go to the read-only main
  database and are refused with a hint. Reads may join main and scratch tables
  (unqualified table names are looked up in main, then scratch).
* ``scratch_reset()``: drop every scratch table of the session (call it between episodes).
* With ``--debug-tools`` only: ``sleep(seconds)`` (waits, for timeout tests),
  ``fail(message)`` (raises an unexpected exception), ``exit_server(code)`` (ends the
  process without answering, for lost-connection tests), and a gate for ordering tests:
  ``wait_at_gate(gate)`` answers only once ``open_gate(gate)`` was called, and
  ``count_at_gate(gate)`` says how many calls are waiting there, so a test can hold a call
  provably in flight while others run.

Every call runs one statement (``a; b`` is refused), stops after `query_timeout_s` (an
SQLite progress handler interrupts it), and fails with a message naming the problem (an
``isError`` result), never by crashing the server.

Sessions
--------

Each *session* has its own SQLite connection and scratch database. The session is named by
the request's ``_meta`` key ``"xpgym/session"`` (`SESSION_META_KEY`), which
`xpgym.core.tools.mcp.MCPToolset` sends with every call (one key per toolset, so one scratch
per toolset on either transport and either protocol era: the 2026-07-28 protocol has no
transport sessions). Requests without the key share the session ``"default"``. At most
`max_sessions` sessions are kept; the least recently used one is dropped beyond that.

The sample database (`build_sample_store`) is a tiny store: ``customers``, ``products``,
``orders`` and ``order_items`` (see `SAMPLE_STORE_SCHEMA`), with fixed rows.
"""

import argparse
import logging
import os
import socket
import sqlite3
import sys
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "SAMPLE_STORE_SCHEMA",
    "SESSION_META_KEY",
    "SQLiteService",
    "SQLiteToolError",
    "build_sample_store",
    "build_server",
    "main",
]

logger = logging.getLogger(__name__)

SESSION_META_KEY = "xpgym/session"
"""Request ``_meta`` key naming the session (and so the scratch database) of a call."""

DEFAULT_SESSION = "default"

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

_READ_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo", "foreign_key_list"}
)
_WRITABLE_SCHEMAS = frozenset({"scratch"})
_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_temp_master", "sqlite_schema"})


class SQLiteToolError(Exception):
    """A call failed because of its input (bad SQL, a refused write, a timeout, ...)."""


# The authorizer's action codes (sqlite3 also has SQLITE_* error codes with the same values).
_ACTION_NAMES = [
    "CREATE_INDEX",
    "CREATE_TABLE",
    "CREATE_TEMP_INDEX",
    "CREATE_TEMP_TABLE",
    "CREATE_TEMP_TRIGGER",
    "CREATE_TEMP_VIEW",
    "CREATE_TRIGGER",
    "CREATE_VIEW",
    "DELETE",
    "DROP_INDEX",
    "DROP_TABLE",
    "DROP_TEMP_INDEX",
    "DROP_TEMP_TABLE",
    "DROP_TEMP_TRIGGER",
    "DROP_TEMP_VIEW",
    "DROP_TRIGGER",
    "DROP_VIEW",
    "INSERT",
    "PRAGMA",
    "READ",
    "SELECT",
    "TRANSACTION",
    "UPDATE",
    "ATTACH",
    "DETACH",
    "ALTER_TABLE",
    "REINDEX",
    "ANALYZE",
    "CREATE_VTABLE",
    "DROP_VTABLE",
    "FUNCTION",
    "SAVEPOINT",
    "RECURSIVE",
]


def _action_names() -> dict[int, str]:
    return {
        getattr(sqlite3, f"SQLITE_{name}"): name.replace("_", " ")
        for name in _ACTION_NAMES
        if hasattr(sqlite3, f"SQLITE_{name}")
    }


_ACTIONS = _action_names()
_READ_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
# Actions whose database name is the `dbname` argument of the authorizer callback.
_WRITE_ACTIONS = frozenset(
    {
        sqlite3.SQLITE_INSERT,
        sqlite3.SQLITE_UPDATE,
        sqlite3.SQLITE_DELETE,
        sqlite3.SQLITE_CREATE_TABLE,
        sqlite3.SQLITE_CREATE_INDEX,
        sqlite3.SQLITE_CREATE_VIEW,
        sqlite3.SQLITE_CREATE_TRIGGER,
        sqlite3.SQLITE_DROP_TABLE,
        sqlite3.SQLITE_DROP_INDEX,
        sqlite3.SQLITE_DROP_VIEW,
        sqlite3.SQLITE_DROP_TRIGGER,
        sqlite3.SQLITE_REINDEX,
        sqlite3.SQLITE_ANALYZE,
    }
)


@dataclass
class _Session:
    """One session's connection; `lock` serialises its calls (tools run in worker threads)."""

    conn: sqlite3.Connection
    lock: threading.Lock = field(default_factory=threading.Lock)
    denied: str | None = None  # why the authorizer refused the last statement


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _cell(value: Any, max_chars: int) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    text = str(value).replace("\n", "\\n")
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


class SQLiteService:
    """The database logic behind the MCP tools (no MCP here; usable and testable alone).

    Args:
        db_path: An existing SQLite database file; it is only ever opened read-only.
        max_rows: Rows returned by a query at most (the result says when there were more).
        query_timeout_s: Wall-clock limit of one statement.
        max_sessions: Sessions (connections and scratch databases) kept at once.
        max_cell_chars: Longer cell values are cut.

    Every method takes the session name and returns text; it raises `SQLiteToolError` with a
    message for the model when the input is at fault. Thread-safe.

    Raises:
        FileNotFoundError: `db_path` does not exist.
    """

    def __init__(
        self,
        db_path: str | os.PathLike[str],
        *,
        max_rows: int = 100,
        query_timeout_s: float = 5.0,
        max_sessions: int = 64,
        max_cell_chars: int = 200,
    ) -> None:
        path = Path(db_path).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"no SQLite database at {str(path)!r}")
        self.db_path = path
        self.max_rows = max_rows
        self.query_timeout_s = query_timeout_s
        self.max_sessions = max_sessions
        self.max_cell_chars = max_cell_chars
        self._uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._lock = threading.Lock()
        self._connect().close()  # fail now, not on the first call, if it cannot be opened

    # ------------------------------------------------------------------ sessions

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._uri, uri=True, check_same_thread=False, isolation_level=None, timeout=1.0
        )
        conn.execute("ATTACH DATABASE ':memory:' AS scratch")
        conn.execute("PRAGMA query_only = ON")
        return conn

    def _session(self, name: str) -> _Session:
        evicted: list[_Session] = []
        with self._lock:
            session = self._sessions.get(name)
            if session is None:
                session = _Session(self._connect())
                self._sessions[name] = session
                while len(self._sessions) > self.max_sessions:
                    evicted.append(self._sessions.popitem(last=False)[1])
            self._sessions.move_to_end(name)
        for old in evicted:
            with old.lock:
                old.conn.close()
        return session

    @property
    def session_names(self) -> list[str]:
        """The live sessions, least recently used first."""
        with self._lock:
            return list(self._sessions)

    def close(self) -> None:
        """Close every session's connection."""
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for session in sessions:
            with session.lock:
                session.conn.close()

    # -------------------------------------------------------------- authorizers

    def _authorizer(self, session: _Session, *, writable: bool) -> Callable[..., int]:
        def authorize(
            action: int, arg1: str | None, arg2: str | None, db: str | None, _: Any
        ) -> int:
            if action in _READ_ACTIONS:
                return sqlite3.SQLITE_OK
            if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _READ_PRAGMAS:
                return sqlite3.SQLITE_OK
            if writable:
                if action in _WRITE_ACTIONS and db in _WRITABLE_SCHEMAS:
                    return sqlite3.SQLITE_OK
                if action == sqlite3.SQLITE_ALTER_TABLE and arg1 in _WRITABLE_SCHEMAS:
                    return sqlite3.SQLITE_OK  # ALTER TABLE passes the database as arg1
            if session.denied is None:  # report the first refusal, the statement's own
                if arg1 in _SCHEMA_TABLES:  # CREATE/DROP first ask to write the schema
                    session.denied = f"changing the tables of database {db or 'main'!r}"
                else:
                    what = _ACTIONS.get(action, f"action {action}")
                    target = ".".join(part for part in (db, arg1) if part)
                    session.denied = f"{what} {target}".strip()
            return sqlite3.SQLITE_DENY

        return authorize

    def _run(self, session_name: str, sql: str, *, writable: bool) -> str:
        sql = sql.strip()
        if not sql:
            raise SQLiteToolError("empty SQL: write one SQL statement")
        session = self._session(session_name)
        with session.lock:
            conn = session.conn
            session.denied = None
            if writable:
                conn.execute("PRAGMA query_only = OFF")
            deadline = time.monotonic() + self.query_timeout_s
            conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
            conn.set_authorizer(self._authorizer(session, writable=writable))
            cursor = None
            try:
                cursor = conn.execute(sql)
                if cursor.description is None:
                    return self._summary(cursor, writable)
                columns = [d[0] for d in cursor.description]
                rows = cursor.fetchmany(self.max_rows + 1)
                return self._table(columns, rows)
            except sqlite3.Error as exc:
                raise SQLiteToolError(self._explain(exc, session, writable)) from exc
            except (OverflowError, ValueError) as exc:  # e.g. an integer too large for Python
                raise SQLiteToolError(f"SQL error: {exc}") from exc
            finally:
                if cursor is not None:
                    cursor.close()
                conn.set_authorizer(None)
                conn.set_progress_handler(None, 0)
                if writable:
                    conn.execute("PRAGMA query_only = ON")

    def _explain(self, exc: sqlite3.Error, session: _Session, writable: bool) -> str:
        message = str(exc)
        if isinstance(exc, sqlite3.ProgrammingError) and "one statement" in message:
            return "only one SQL statement per call: remove the ';' and what follows it"
        if "interrupted" in message:
            return f"the statement ran longer than {self.query_timeout_s:g} s and was stopped"
        if session.denied is not None or "not authorized" in message:
            denied = session.denied or "this statement"
            if writable:
                return (
                    f"not allowed: {denied}. scratch_execute writes only to the scratch database; "
                    "qualify new tables with 'scratch.', e.g. CREATE TABLE scratch.t AS SELECT ..."
                )
            return (
                f"not allowed: {denied}. query is read-only (one SELECT); use scratch_execute to "
                "create or change tables in the scratch database"
            )
        if "readonly" in message or "read-only" in message:
            return (
                f"{message}: the database is read-only; write to the scratch database with "
                "scratch_execute (e.g. CREATE TABLE scratch.t ...)"
            )
        if message.startswith("no such table"):
            return f"{message}. Tables: {', '.join(self._table_names(session.conn)) or 'none'}"
        return f"SQL error: {message}"

    def _summary(self, cursor: sqlite3.Cursor, writable: bool) -> str:
        if not writable:
            return "OK (the statement returned no rows)"
        count = cursor.rowcount
        return f"OK, {count} row{'s' if count != 1 else ''} changed" if count >= 0 else "OK"

    def _table(self, columns: Sequence[str], rows: list[tuple[Any, ...]]) -> str:
        more = len(rows) > self.max_rows
        rows = rows[: self.max_rows]
        lines = [" | ".join(columns)]
        lines += [" | ".join(_cell(v, self.max_cell_chars) for v in row) for row in rows]
        if more:
            lines.append(f"(first {self.max_rows} rows shown; more rows exist: add LIMIT/WHERE)")
        else:
            lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
        return "\n".join(lines)

    # ------------------------------------------------------------------- catalog

    @staticmethod
    def _objects(conn: sqlite3.Connection, schema: str) -> list[tuple[str, str]]:
        return conn.execute(
            f"SELECT name, type FROM {schema}.sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall()

    def _count(self, conn: sqlite3.Connection, schema: str, name: str) -> str:
        """``"N rows"`` of a table or view, ``"? rows"`` if counting exceeds the time limit."""
        deadline = time.monotonic() + self.query_timeout_s
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
        try:
            (count,) = conn.execute(f"SELECT count(*) FROM {schema}.{_quote(name)}").fetchone()
        except sqlite3.Error:
            return "? rows"
        finally:
            conn.set_progress_handler(None, 0)
        return f"{count} row{'s' if count != 1 else ''}"

    def _table_names(self, conn: sqlite3.Connection) -> list[str]:
        names = [name for name, _ in self._objects(conn, "main")]
        return names + [f"scratch.{name}" for name, _ in self._objects(conn, "scratch")]

    def list_tables(self, session_name: str) -> str:
        """Tables and views with row counts, then the session's scratch tables."""
        session = self._session(session_name)
        with session.lock:
            lines = ["Tables:"]
            for schema in ("main", "scratch"):
                if schema == "scratch":
                    lines.append("Scratch tables (scratch_execute can write them):")
                objects = self._objects(session.conn, schema)
                for name, kind in objects:
                    prefix = "scratch." if schema == "scratch" else ""
                    suffix = ", view" if kind == "view" else ""
                    rows = self._count(session.conn, schema, name)
                    lines.append(f"  {prefix}{name} ({rows}{suffix})")
                if not objects:
                    lines.append("  (none)")
            return "\n".join(lines)

    def describe_table(self, session_name: str, table: str) -> str:
        """Columns, foreign keys and row count of `table` (``scratch.<name>`` for scratch)."""
        schema, _, name = table.strip().rpartition(".")
        schema = schema or "main"
        name = name.strip('"`[]')
        session = self._session(session_name)
        with session.lock:
            conn = session.conn
            known = {
                (s, n): kind for s in ("main", "scratch") for n, kind in self._objects(conn, s)
            }
            kind = known.get((schema, name))
            if kind is None:
                tables = ", ".join(self._table_names(conn)) or "none"
                raise SQLiteToolError(f"no table named {table!r}. Tables: {tables}")
            columns = conn.execute(f"PRAGMA {schema}.table_info({_quote(name)})").fetchall()
            keys = conn.execute(f"PRAGMA {schema}.foreign_key_list({_quote(name)})").fetchall()
            rows = self._count(conn, schema, name)
        label = f"scratch.{name}" if schema == "scratch" else name
        lines = [f"{kind} {label} ({rows})", "columns:"]
        for _, column, ctype, notnull, default, pk in columns:
            parts = [f"  {column} {ctype or 'ANY'}"]
            if pk:
                parts.append("PRIMARY KEY")
            if notnull:
                parts.append("NOT NULL")
            if default is not None:
                parts.append(f"DEFAULT {default}")
            lines.append(" ".join(parts))
        if keys:
            lines.append("foreign keys:")
            for key in keys:
                lines.append(f"  {key[3]} -> {key[2]}({key[4]})")
        return "\n".join(lines)

    def query(self, session_name: str, sql: str) -> str:
        """Run one read-only statement; see the module docstring."""
        return self._run(session_name, sql, writable=False)

    def scratch_execute(self, session_name: str, sql: str) -> str:
        """Run one statement that may write to the scratch database only."""
        return self._run(session_name, sql, writable=True)

    def scratch_reset(self, session_name: str) -> str:
        """Drop every table, view, index and trigger of the session's scratch database."""
        session = self._session(session_name)
        with session.lock:
            conn = session.conn
            conn.execute("PRAGMA query_only = OFF")
            try:
                conn.execute("DETACH DATABASE scratch")
                conn.execute("ATTACH DATABASE ':memory:' AS scratch")
            finally:
                conn.execute("PRAGMA query_only = ON")
        return "OK, the scratch database is empty"


# ---------------------------------------------------------------------------- MCP server

_INSTRUCTIONS = (
    "A read-only SQLite database. Start with list_tables and describe_table, then run one "
    "SELECT per query call. To keep intermediate results, write to your own scratch database "
    "with scratch_execute (tables named scratch.<name>); scratch_reset empties it."
)


def _session_name(ctx: Any) -> str:
    meta = ctx.request_context.meta or {}
    name = meta.get(SESSION_META_KEY) if hasattr(meta, "get") else None
    return name if isinstance(name, str) and name else DEFAULT_SESSION


def build_server(
    service: SQLiteService,
    *,
    debug_tools: bool = False,
    log_level: LogLevel = "WARNING",
) -> Any:
    """An `mcp.server.mcpserver.MCPServer` exposing `service` as the tools listed above.

    Args:
        service: The database logic (owns the connections; close it after the server stops).
        debug_tools: Also register ``sleep``, ``fail``, ``exit_server`` and the gate tools
            ``wait_at_gate``, ``count_at_gate``, ``open_gate`` (for tests).
        log_level: The server's logging level (its log goes to stderr).
    """
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("xpgym-sqlite", instructions=_INSTRUCTIONS, log_level=log_level)
    register = _registrar(server)
    _register_database_tools(register, service)
    if debug_tools:
        _register_debug_tools(register)
    return server


_Registrar = Callable[..., Callable[[Callable[..., Any]], Callable[..., Any]]]
"""``register(read_only=...)(fn)`` adds `fn` to a server as a tool (see `_registrar`)."""


def _registrar(server: Any) -> _Registrar:
    """The decorator that adds a function to `server` as a tool: its docstring on one line is
    the description; ``read_only`` gives the tool's read-only hint."""
    from mcp_types import ToolAnnotations

    def tool(*, read_only: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            return server.tool(
                description=" ".join((fn.__doc__ or "").split()),
                annotations=ToolAnnotations(read_only_hint=read_only, open_world_hint=False),
                structured_output=False,
            )(fn)

        return register

    return tool


def _register_database_tools(tool: _Registrar, service: SQLiteService) -> None:
    """``list_tables``, ``describe_table``, ``query``, ``scratch_execute``, ``scratch_reset``:
    each runs in the caller's session, a `SQLiteToolError` becomes the MCP tool error."""
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError

    def run(fn: Callable[..., str], *args: Any) -> str:
        try:
            return fn(*args)
        except SQLiteToolError as exc:
            raise ToolError(str(exc)) from None

    @tool(read_only=True)
    def list_tables(ctx: Context) -> str:
        """List the database's tables and views with row counts, and your scratch tables."""
        return run(service.list_tables, _session_name(ctx))

    @tool(read_only=True)
    def describe_table(table: str, ctx: Context) -> str:
        """Show a table's columns (type, primary key, NOT NULL, default), foreign keys and row
        count. Use 'scratch.<name>' for a scratch table."""
        return run(service.describe_table, _session_name(ctx), table)

    def query(sql: str, ctx: Context) -> str:
        return run(service.query, _session_name(ctx), sql)

    query.__doc__ = (
        "Run one read-only SQL statement (SQLite dialect, e.g. a SELECT) and return the rows "
        f"as a '|'-separated table (at most {service.max_rows} rows; use LIMIT and WHERE)."
    )
    tool(read_only=True)(query)

    @tool(read_only=False)
    def scratch_execute(sql: str, ctx: Context) -> str:
        """Run one SQL statement that may write, only to your scratch database: name its
        tables scratch.<name>, e.g. CREATE TABLE scratch.t AS SELECT ... . The main database
        is read-only; SELECTs may join main and scratch tables."""
        return run(service.scratch_execute, _session_name(ctx), sql)

    @tool(read_only=False)
    def scratch_reset(ctx: Context) -> str:
        """Drop every table of your scratch database."""
        return run(service.scratch_reset, _session_name(ctx))


def _register_debug_tools(tool: _Registrar) -> None:
    """``sleep``, ``fail``, ``exit_server`` and the gate tools (see the module docstring)."""
    import anyio

    @tool(read_only=True)
    async def sleep(seconds: float) -> str:
        """Debug: wait `seconds` seconds, then answer."""
        await anyio.sleep(seconds)
        return f"slept {seconds:g} s"

    @tool(read_only=True)
    def fail(message: str) -> str:
        """Debug: raise an unexpected exception."""
        raise RuntimeError(message)

    @tool(read_only=False)
    def exit_server(code: int = 1) -> str:
        """Debug: end the server process at once, without answering."""
        os._exit(code)

    # The gate tools are coroutines: they run on the event loop, which owns the events.
    gates: dict[str, anyio.Event] = {}
    waiting: dict[str, int] = {}

    @tool(read_only=True)
    async def wait_at_gate(gate: str) -> str:
        """Debug: wait until open_gate(gate) is called, then answer."""
        waiting[gate] = waiting.get(gate, 0) + 1
        try:
            await gates.setdefault(gate, anyio.Event()).wait()
        finally:
            waiting[gate] -= 1
        return f"gate {gate} opened"

    @tool(read_only=True)
    async def count_at_gate(gate: str) -> str:
        """Debug: the number of calls waiting at the gate, as text."""
        return str(waiting.get(gate, 0))

    @tool(read_only=False)
    async def open_gate(gate: str) -> str:
        """Debug: let every call waiting at the gate (and every later one) through."""
        gates.setdefault(gate, anyio.Event()).set()
        return f"gate {gate} open"


async def _serve_http(server: Any, host: str, port: int) -> None:
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit TCP_NODELAY; without it every keep-alive request waits ~40 ms
    # (Nagle's algorithm against delayed ACKs).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    sys.stderr.write(f"listening on http://{shown}:{bound}/mcp\n")
    sys.stderr.flush()
    await uvicorn.Server(config).serve(sockets=[sock])


def main(argv: Sequence[str] | None = None) -> None:
    """The command line; see the module docstring."""
    parser = argparse.ArgumentParser(
        prog="python -m xpgym.mcp_servers.sqlite_server",
        description="Serve a SQLite database over MCP (read-only queries, per-session scratch).",
    )
    parser.add_argument("--db", required=True, help="SQLite database file")
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address")
    parser.add_argument("--port", type=int, default=8765, help="HTTP port (0: any free port)")
    parser.add_argument("--create-sample", action="store_true", help="build the sample store")
    parser.add_argument("--max-rows", type=int, default=100)
    parser.add_argument("--query-timeout", type=float, default=5.0, help="seconds")
    parser.add_argument(
        "--debug-tools", action="store_true", help="add sleep, fail, exit_server and a gate"
    )
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    # Plain stderr logging; set up before MCPServer, whose own setup then changes nothing.
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if args.create_sample and not Path(args.db).exists():
        build_sample_store(args.db)
    try:
        service = SQLiteService(args.db, max_rows=args.max_rows, query_timeout_s=args.query_timeout)
    except (FileNotFoundError, sqlite3.Error) as exc:
        parser.error(str(exc))
    server = build_server(service, debug_tools=args.debug_tools, log_level=args.log_level.upper())
    try:
        if args.transport == "stdio":
            server.run("stdio")
        else:
            import anyio

            anyio.run(_serve_http, server, args.host, args.port)
    except KeyboardInterrupt:
        pass
    finally:
        service.close()


# -------------------------------------------------------------------------- sample store

SAMPLE_STORE_SCHEMA = """
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    city TEXT NOT NULL,
    country TEXT NOT NULL,
    joined_on TEXT NOT NULL
);
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    price_cents INTEGER NOT NULL CHECK (price_cents > 0)
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    ordered_on TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'shipped', 'delivered', 'cancelled'))
);
CREATE TABLE order_items (
    order_id INTEGER NOT NULL REFERENCES orders(id),
    product_id INTEGER NOT NULL REFERENCES products(id),
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    unit_price_cents INTEGER NOT NULL,
    PRIMARY KEY (order_id, product_id)
);
"""
"""The sample store's tables. Prices are integer cents; dates are ISO ``YYYY-MM-DD``."""

_CUSTOMERS = [
    (1, "Ada Brennan", "ada@example.com", "Dublin", "Ireland", "2023-01-14"),
    (2, "Bruno Silva", "bruno@example.com", "Lisbon", "Portugal", "2023-02-03"),
    (3, "Chen Wei", "chen@example.com", "Vienna", "Austria", "2023-03-22"),
    (4, "Dara Okafor", "dara@example.com", "Dublin", "Ireland", "2023-05-09"),
    (5, "Elena Petrova", "elena@example.com", "Prague", "Czech Republic", "2023-06-30"),
    (6, "Farid Haddad", "farid@example.com", "Cairo", "Egypt", "2023-08-17"),
    (7, "Greta Lind", "greta@example.com", "Vienna", "Austria", "2023-10-01"),
    (8, "Hugo Martin", "hugo@example.com", "Paris", "France", "2024-01-20"),
]
_PRODUCTS = [
    (1, "Notebook", "stationery", 450),
    (2, "Fountain pen", "stationery", 2500),
    (3, "Desk lamp", "home", 3900),
    (4, "Coffee mug", "home", 1200),
    (5, "Backpack", "bags", 5900),
    (6, "Water bottle", "outdoor", 1800),
    (7, "Headphones", "electronics", 8900),
    (8, "USB cable", "electronics", 900),
    (9, "Rain jacket", "outdoor", 7400),
    (10, "Pencil set", "stationery", 650),
]
_ORDERS = [
    (1, 1, "2024-02-01", "delivered"),
    (2, 2, "2024-02-05", "delivered"),
    (3, 1, "2024-02-19", "delivered"),
    (4, 3, "2024-03-02", "shipped"),
    (5, 4, "2024-03-11", "cancelled"),
    (6, 5, "2024-03-15", "delivered"),
    (7, 3, "2024-04-01", "delivered"),
    (8, 6, "2024-04-09", "pending"),
    (9, 7, "2024-04-20", "shipped"),
    (10, 2, "2024-05-02", "delivered"),
    (11, 8, "2024-05-14", "pending"),
    (12, 1, "2024-05-30", "shipped"),
    (13, 5, "2024-06-08", "delivered"),
    (14, 7, "2024-06-21", "cancelled"),
]
_ORDER_ITEMS = [
    (1, 1, 3, 450),
    (1, 2, 1, 2500),
    (2, 5, 1, 5900),
    (3, 4, 2, 1200),
    (3, 10, 1, 650),
    (4, 7, 1, 8900),
    (4, 8, 2, 900),
    (5, 3, 1, 3900),
    (6, 6, 2, 1800),
    (6, 9, 1, 7400),
    (7, 1, 5, 450),
    (7, 4, 1, 1200),
    (8, 7, 1, 8500),
    (9, 2, 2, 2500),
    (9, 10, 3, 650),
    (10, 8, 4, 900),
    (10, 6, 1, 1800),
    (11, 5, 1, 5900),
    (11, 9, 1, 7400),
    (12, 3, 1, 3900),
    (13, 1, 10, 450),
    (13, 8, 1, 900),
    (14, 7, 1, 8900),
]


def build_sample_store(path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write the sample store database (`SAMPLE_STORE_SCHEMA`, fixed rows) to `path`.

    8 customers, 10 products, 14 orders (statuses pending, shipped, delivered, cancelled)
    and 23 order items; ``unit_price_cents`` is the price paid, which differs from the
    current list price in one item (order 8). The file is written atomically.

    Returns:
        The path written.

    Raises:
        FileExistsError: `path` exists and `overwrite` is false.
    """
    target = Path(path)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{str(target)!r} exists; pass overwrite=True to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    conn = sqlite3.connect(partial)
    try:
        with conn:
            conn.executescript(SAMPLE_STORE_SCHEMA)
            conn.executemany("INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?)", _CUSTOMERS)
            conn.executemany("INSERT INTO products VALUES (?, ?, ?, ?)", _PRODUCTS)
            conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", _ORDERS)
            conn.executemany("INSERT INTO order_items VALUES (?, ?, ?, ?)", _ORDER_ITEMS)
    finally:
        conn.close()
    os.replace(partial, target)
    return target


if __name__ == "__main__":
    main()
