r"""MCP tools: the functions of an MCP server as xpgym tools, over one long-lived session.

One xpgym `Tool` is one function name, so a server with many functions becomes many tools:
`MCPToolset` connects to the server, lists its functions (``tools/list``) and makes one
`MCPFunctionTool` per function; all of them share the toolset's session.

    toolset = MCPToolset(StdioServerParameters(command="python", args=["-m", "my_server"]))
    env = ToolEnvWrapper(env, toolset.tools(), instructions=False)  # chat template: info["tools"]
    ...
    toolset.close()

Calls are JSON function calls, ``<tool_call>{"name": "query", "arguments": {"sql": "..."}}
</tool_call>``, checked against the server's input schema (`validate_arguments`) before they
are sent (``tools/call``).

Server
------

`server` is what `mcp.Client` accepts: a `StdioServerParameters` (the server runs as a
subprocess and speaks over its stdin/stdout), an ``http(s)://`` URL (streamable HTTP), or an
in-process `mcp.server.mcpserver.MCPServer`; or, for configuration files, a mapping in the
usual ``mcpServers`` entry shape: ``{"command": str, "args": [...], "env": {...}, "cwd":
str}`` or ``{"url": str}``. The protocol version is negotiated by the SDK (``mode="auto"``:
2026-07-28 when the server speaks it, else the initialize handshake).

Sessions and threads
--------------------

GEM's ``MCPTool`` opens a new session (a new subprocess, for stdio) for every call. Here a
toolset owns **one** session at a time (a new one only after the server was lost, see
"Reconnecting"): it starts an asyncio event loop in a background thread (named
``xpgym-mcp-<n>``), enters ``mcp.Client`` there, and keeps it open until `close`.
`execute` submits the call to that loop with `asyncio.run_coroutine_threadsafe` and waits,
so it is synchronous and thread-safe (calls from many threads run concurrently on the one
session); `aexecute` awaits the same coroutine from any event loop without blocking it.

Every call carries the request ``_meta`` entry ``{"xpgym/session": session_key}``
(`SESSION_META_KEY`; a random key per toolset unless given). Servers that keep per-client
state, such as `xpgym.mcp_servers.sqlite_server` (a scratch database per session), use it to
tell clients apart on every transport; other servers ignore it.

Errors
------

Nothing a call does raises into the env: a result with ``isError`` set, a protocol error
(e.g. an unknown tool), a timeout (`call_timeout_s`), an unresponsive server, a lost
connection or a closed toolset all become ``ToolResult(ok=False)`` with
``info["exit_reason"]`` one of ``"tool_error"``, ``"protocol_error"``, ``"timeout"``,
``"unresponsive"``, ``"disconnected"``, ``"error"``; the last three (the backend broke, not
the call) also carry the infrastructure marker ``info["infra_error"]`` (kind
``"tool_backend_error"``, `xpgym.core.errors`), the others are the model's call going wrong.
Connecting is the exception: `MCPToolset` raises `MCPConnectionError` when the server cannot
be started or reached, so a misconfigured env fails when it is built.

A call that times out could be the model's (a query that runs too long) or the server's (a
hung or stopped process). To tell them apart the toolset then *probes* the session: it asks
the server for its function list (``tools/list``, bypassing the SDK's cache; MCP's ``ping``
is gone from the 2026-07-28 protocol), bounded by ``min(5 s, max(1 s, timeout))`` (at least
1 s: on a busy machine a healthy server's answer can take longer than a short call's
timeout, and a missed probe gives the session up). If the server
answers, the call's ``exit_reason`` is ``"timeout"`` (the call's failure); if not, it is
``"unresponsive"``, with the marker, and the session is given up (see below). So a timed-out
call returns after at most its timeout + 1 s + the probe bound. A call that raised something
unexpected (``"error"``) is probed the same way. The probe assumes that the server answers
requests concurrently, as servers built on the MCP SDK do; a server that serves one request
at a time cannot answer it during a slow call, and its slow calls count as unresponsive.

Reconnecting
------------

A session is *lost* when its connection closed (the server died: ``"disconnected"``), when a
probe went unanswered (``"unresponsive"``), or when it ended by itself. The call that found
it lost is an infrastructure error; the **next** call starts a new session first (for stdio
a new server process, for HTTP a new connection, for an in-process server a new in-process
connection), with up to `reconnect_attempts` attempts per call, each bounded by
`connect_timeout_s`, and then runs on it. A call whose attempts all fail returns
``"disconnected"`` with the marker and the reason; the call after it tries again, so nothing
loops, and a server that comes back is used again. The lost session is ended in the
background (the SDK closes a stdio server's stdin, then terminates and kills it, so a
stopped server is killed too) and `close` waits for it. ``reconnect_attempts=0`` keeps a
lost session lost: every later call is an infra error until the toolset is rebuilt.

State the server kept for the session is gone after a reconnect to a new process (the SQLite
server's scratch tables); the session key (below) stays the same. In an episode this matches
the recorder's rule: the infra error that lost the session ends the episode
(`xpgym.core.errors`), so the next episode starts on the new session. Envs that share one
toolset share its session too: a call of one env can lose the session that another env's
episode was using.

Shutdown
--------

`MCPToolset.close` ends the session, and a lost one still ending (for stdio the SDK closes
the server's stdin, then terminates and kills it if it does not exit), stops the loop and
joins the thread. Closing any one of the toolset's tools closes the toolset (so
`ToolEnvWrapper(close_tools=True)` cleans up); share tools between envs only with
``close_tools=False``. Use the toolset as a context manager or call `close`; it is
idempotent.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from xpgym.core.errors import INFRA_ERROR_KEY, InfraCause
from xpgym.core.tools.base import Tool, ToolCall, ToolResult
from xpgym.core.tools.calls import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, function_schema, parse_call

__all__ = [
    "SESSION_META_KEY",
    "MCPConnectionError",
    "MCPFunctionTool",
    "MCPToolset",
    "format_call_result",
    "make_mcp_tools",
]

logger = logging.getLogger(__name__)

SESSION_META_KEY = "xpgym/session"
"""Request ``_meta`` key whose value names the calling toolset's session."""

_TRUNCATED = " ... [truncated]"
_PROBE_TIMEOUT_S = 5.0
"""Upper bound of the probe after a timed-out call (module docstring, "Errors")."""
_PROBE_FLOOR_S = 1.0
"""Lower bound of that probe, whatever the call's timeout."""
_GRACE_S = 5.0
"""Slack of the waits across threads over the bounds the loop keeps itself."""
_thread_ids = itertools.count(1)


class MCPConnectionError(RuntimeError):
    """The MCP server could not be started, reached, or initialised."""


def _import_mcp() -> Any:
    try:
        import mcp
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError('MCPToolset needs the MCP SDK; pip install "xpgym[mcp]"') from exc
    return mcp


def _server_target(server: Any, errlog: TextIO | None) -> tuple[Callable[[], Any], str]:
    """What makes the `server` argument of each new `mcp.Client` (a stdio transport with
    `errlog` is single-use), and a short description for messages."""
    mcp = _import_mcp()
    from mcp.client.stdio import stdio_client

    if isinstance(server, Mapping):
        if "url" in server:
            server = str(server["url"])
        elif "command" in server:
            server = mcp.StdioServerParameters(
                command=str(server["command"]),
                args=[str(a) for a in server.get("args", ())],
                env=dict(server["env"]) if server.get("env") else None,
                cwd=server.get("cwd"),
            )
        else:
            raise ValueError(
                f"an MCP server mapping needs 'command' (stdio) or 'url' (HTTP), got keys "
                f"{sorted(server)}"
            )
    if isinstance(server, str):
        if not server.startswith(("http://", "https://")):
            raise ValueError(
                f"an MCP server URL must start with http:// or https://, got {server!r}"
            )
        url = server
        return lambda: url, url
    if isinstance(server, mcp.StdioServerParameters):
        label = " ".join([server.command, *server.args])
        params = server
        if errlog is None:
            return lambda: params, label
        return lambda: stdio_client(params, errlog=errlog), label
    return lambda: server, type(server).__name__


def _content_text(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind} content, {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    if kind == "resource_link":
        return f"[resource link: {block.uri}]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        return str(text) if text is not None else f"[binary resource: {resource.uri}]"
    return f"[{kind or type(block).__name__} content]"


def format_call_result(result: Any, max_chars: int | None = None) -> str:
    """The text of a ``CallToolResult``: its content blocks, one after another.

    Text blocks and text resources are given verbatim; images, audio, binary resources and
    resource links become a one-line placeholder. A result with no content but structured
    content gives that as JSON. The text is cut to `max_chars` (marker included).
    """
    parts = [_content_text(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False, default=str)]
    text = "\n".join(parts)
    if max_chars is not None and len(text) > max_chars:
        text = (text[: max(0, max_chars - len(_TRUNCATED))] + _TRUNCATED)[:max_chars]
    return text


class MCPFunctionTool(Tool):
    """One function of an MCP server, called through its `MCPToolset`'s session.

    Attributes:
        name: The xpgym tool name (the toolset's `name_prefix` + `server_name`); the name the
            model writes in ``<tool_call>``.
        server_name: The function's name on the server.
        description: The server's description of the function.
        parameters: The function's JSON-schema input (``inputSchema``).
        toolset: The owning toolset.

    Not `forkable`: the server may keep per-session state (the SQLite server's scratch
    database) that no env snapshot holds, so a restored snapshot would not bring it back.
    """

    forkable = False

    def __init__(
        self,
        toolset: MCPToolset,
        server_name: str,
        *,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
    ) -> None:
        self.toolset = toolset
        self.server_name = server_name
        self.name = name
        self.description = description
        self.parameters = dict(parameters)

    def instructions(self) -> str:
        """The function, its schema, and the JSON call format (MCP tools have no tag form)."""
        return (
            f"Function {self.name}: {self.description}\n"
            f"Arguments (JSON schema): {json.dumps(self.parameters, ensure_ascii=False)}\n"
            f'Call it with {TOOL_CALL_OPEN}{{"name": "{self.name}", "arguments": {{...}}}}'
            f"{TOOL_CALL_CLOSE}"
        )

    def function_schema(self) -> dict[str, Any]:
        return function_schema(self.name, self.description, self.parameters)

    def parse(self, action: str) -> ToolCall | None:
        return parse_call(action, self.name, parameters=self.parameters)

    def execute(self, call: ToolCall) -> ToolResult:
        """Call the server function with ``call.arguments``; see the module docstring.

        Raises:
            ValueError: `call` is malformed (``call.error`` set) - a programming error.
        """
        if call.error is not None:
            raise ValueError(f"cannot execute a malformed call: {call.error}")
        return self.toolset.call(self.server_name, dict(call.arguments))

    async def aexecute(self, call: ToolCall) -> ToolResult:
        """`execute` awaited on the toolset's loop, without blocking the caller's loop."""
        if call.error is not None:
            raise ValueError(f"cannot execute a malformed call: {call.error}")
        return await self.toolset.acall(self.server_name, dict(call.arguments))

    def close(self) -> None:
        """Close the toolset, and with it every tool of the toolset."""
        self.toolset.close()

    def __repr__(self) -> str:
        return f"MCPFunctionTool(name={self.name!r}, server={self.toolset.label!r})"


@dataclass(eq=False)
class _Session:
    """One connection to the server: the task that holds `mcp.Client` open, and its state.

    Attributes:
        ready: Set (on the loop) to the listed functions once the client is connected.
        stop: Set to leave the client normally (`MCPToolset._end`).
        scope: The anyio cancel scope around the client; cancelling it (never the task
            itself) abandons the session. The SDK's stdio transport ends its server inside a
            shielded scope, which an anyio cancel respects and a native ``task.cancel()``
            would cut short, leaving the server running after `close`.
        task: The task running `MCPToolset._hold_session`.
        client: The entered `mcp.Client`, once ready.
        lost: Why the session is given up (`None` while it is usable).
    """

    ready: asyncio.Future[list[Any]]
    scope: Any
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    client: Any = None
    lost: str | None = None


class MCPToolset:
    """A session with an MCP server, and its functions as xpgym tools.

    Args:
        server: The server; see the module docstring.
        include: Expose only these server functions (by server name), in this order;
            `None` exposes all, in the server's order.
        exclude: Hide these server functions from `tools()` (e.g. a reset function the env
            calls itself through `call`).
        name_prefix: Prepended to each function name to make the tool name (for two servers
            with clashing names).
        call_timeout_s: Default limit of one call, waiting for the server included.
        connect_timeout_s: Limit for starting the server, the handshake and ``tools/list``;
            at construction and for each reconnect attempt.
        reconnect_attempts: How many times a call tries to start a new session when the
            current one is lost (module docstring, "Reconnecting"); 0 never reconnects.
        max_output_chars: Cap on an observation.
        session_key: Value sent as ``_meta["xpgym/session"]`` with every call; default: a
            random key.
        errlog: Where a stdio server's stderr goes (default: this process's stderr); must be
            a real file (it is given to the subprocess).
        mode: The SDK's protocol negotiation: ``"auto"``, ``"legacy"`` or a version string.

    Raises:
        MCPConnectionError: The server cannot be started, reached or listed in time.
        ValueError: Bad arguments: an `include` or `exclude` name the server does not have,
            a name included twice, a malformed server mapping or URL, a negative
            `reconnect_attempts`.
        ImportError: The MCP SDK is not installed.
    """

    def __init__(
        self,
        server: Any,
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        name_prefix: str = "",
        call_timeout_s: float = 30.0,
        connect_timeout_s: float = 30.0,
        reconnect_attempts: int = 1,
        max_output_chars: int = 4000,
        session_key: str | None = None,
        errlog: TextIO | None = None,
        mode: str = "auto",
    ) -> None:
        if call_timeout_s <= 0 or connect_timeout_s <= 0:
            raise ValueError("call_timeout_s and connect_timeout_s must be > 0")
        if reconnect_attempts < 0:
            raise ValueError(f"reconnect_attempts must be >= 0, got {reconnect_attempts}")
        if max_output_chars <= len(_TRUNCATED):
            raise ValueError(f"max_output_chars must be > {len(_TRUNCATED)}")
        self._make_target, self.label = _server_target(server, errlog)
        self.mode = mode
        self.call_timeout_s = float(call_timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.reconnect_attempts = int(reconnect_attempts)
        self.max_output_chars = int(max_output_chars)
        self.session_key = session_key if session_key is not None else uuid.uuid4().hex
        self._closed = False
        self._close_lock = threading.Lock()
        self._sessions: set[_Session] = set()  # every session whose task has not ended
        self._session: _Session | None = None  # the one calls go to
        self._reconnecting = asyncio.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run_loop, name=f"xpgym-mcp-{next(_thread_ids)}", daemon=True
        )
        self._thread.start()
        try:
            connecting = asyncio.run_coroutine_threadsafe(self._connect(), self._loop)
            try:
                self._session, listed = connecting.result(self.connect_timeout_s + _GRACE_S)
            except concurrent.futures.TimeoutError as exc:  # the loop itself is stuck
                raise MCPConnectionError(f"connecting to {self.label} did not end") from exc
            self._tools = self._make_tools(listed, include, exclude, name_prefix)
        except BaseException:
            self.close()
            raise
        logger.debug("connected to MCP server %s: %d functions", self.label, len(listed))

    # ------------------------------------------------------------------ the loop thread

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    async def _hold_session(self, session: _Session) -> None:
        """Enter the client, list the functions, then keep the session until `session.stop`."""
        mcp = _import_mcp()
        with session.scope:
            async with mcp.Client(self._make_target(), mode=self.mode) as client:
                listed: list[Any] = []
                cursor = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    listed.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                session.client = client
                if session.ready.done():  # given up by `_connect` meanwhile
                    return
                session.ready.set_result(listed)
                await session.stop.wait()
        if session.scope.cancelled_caught and session.lost is None:
            session.lost = f"the connection to MCP server {self.label} was abandoned"

    async def _connect(self) -> tuple[_Session, list[Any]]:
        """Runs on the loop: start a session and wait until it is ready.

        Raises:
            MCPConnectionError: It failed or was not ready within `connect_timeout_s`; its
                scope is then cancelled (its cleanup goes on in the background, and `close`
                waits for it).
        """
        import anyio  # a dependency of the MCP SDK

        session = _Session(ready=self._loop.create_future(), scope=anyio.CancelScope())
        session.task = task = asyncio.create_task(self._hold_session(session))
        self._sessions.add(session)
        task.add_done_callback(lambda ended: self._session_ended(session, ended))
        watched: set[asyncio.Future[Any]] = {session.ready, task}
        await asyncio.wait(
            watched,
            timeout=self.connect_timeout_s,
            return_when=asyncio.FIRST_COMPLETED,
        )
        if session.ready.done():
            return session, session.ready.result()
        session.ready.cancel()
        if task.done():
            exc = None if task.cancelled() else task.exception()
            raise MCPConnectionError(
                f"cannot connect to MCP server {self.label}: {_describe(exc)}"
            ) from exc
        session.scope.cancel()
        raise MCPConnectionError(
            f"MCP server {self.label} did not start and list its tools within "
            f"{self.connect_timeout_s:g} s"
        )

    def _session_ended(self, session: _Session, task: asyncio.Task[None]) -> None:
        """Done callback of a session's task: it is lost (if it was not already)."""
        self._sessions.discard(session)
        exc = None if task.cancelled() else task.exception()
        if session.lost is None:
            session.lost = f"the session with MCP server {self.label} ended ({_describe(exc)})"
        logger.debug("MCP session with %s ended: %s", self.label, session.lost)

    def _end(self, session: _Session) -> None:
        """Runs on the loop: leave a connected session normally (for stdio the SDK closes the
        server's stdin, waits, then terminates and kills it); cancel one still connecting."""
        if session.task is None or session.task.done():
            return
        if session.ready.done() and not session.ready.cancelled():
            session.stop.set()
        else:
            session.scope.cancel()

    async def _session_for_call(self, name: str) -> _Session | ToolResult:
        """Runs on the loop: the session a call goes to, reconnecting first if it was lost;
        or the call's failure when the toolset is closed or no attempt connected."""
        async with self._reconnecting:
            session = self._session
            if self._closed or session is None:
                return _closed(name)
            if session.lost is None:
                return session
            if self.reconnect_attempts == 0:
                return _failure(name, session.lost, exit_reason="disconnected")
            self._end(session)
            failures = []
            for _ in range(self.reconnect_attempts):
                try:
                    self._session, listed = await self._connect()
                except MCPConnectionError as exc:
                    failures.append(str(exc))
                    if self._closed:
                        return _closed(name)
                    continue
                if self._closed:  # `close` ran while connecting: it ends this session too
                    return _closed(name)
                if tuple(fn.name for fn in listed) != self.server_functions:
                    logger.warning(
                        "MCP server %s came back with other functions: %s (was %s)",
                        self.label,
                        [fn.name for fn in listed],
                        list(self.server_functions),
                    )
                logger.info("reconnected to MCP server %s (%s)", self.label, session.lost)
                return self._session
            why = (
                f"{session.lost}; reconnecting failed "
                f"({self.reconnect_attempts} attempt(s)): {'; '.join(failures)}"
            )
            return _failure(name, why, exit_reason="disconnected")

    async def _responds(self, session: _Session, timeout: float) -> bool:
        """Runs on the loop: whether the server answers ``tools/list`` within
        `_probe_bound(timeout)` s; if not, `session` is lost (module docstring, "Errors")."""
        bound = _probe_bound(timeout)
        try:
            await asyncio.wait_for(session.client.list_tools(cache_mode="bypass"), bound)
        except Exception as exc:
            if session.lost is None:
                session.lost = (
                    f"MCP server {self.label} did not answer a probe within {bound:g} s "
                    f"({_describe(exc)})"
                )
            return False
        return True

    def _make_tools(
        self,
        listed: list[Any],
        include: Sequence[str] | None,
        exclude: Sequence[str],
        prefix: str,
    ) -> list[MCPFunctionTool]:
        by_name = {tool.name: tool for tool in listed}
        self.server_functions: tuple[str, ...] = tuple(by_name)
        unknown = [n for n in [*(include or ()), *exclude] if n not in by_name]
        if unknown:
            raise ValueError(
                f"MCP server {self.label} has no function(s) {unknown}; it has {list(by_name)}"
            )
        names = list(include) if include is not None else list(by_name)
        if len(set(names)) != len(names):
            raise ValueError(f"include lists a function more than once: {names}")
        tools = []
        for name in names:
            if name in exclude:
                continue
            spec = by_name[name]
            tools.append(
                MCPFunctionTool(
                    self,
                    name,
                    name=prefix + name,
                    description=(spec.description or "").strip(),
                    parameters=spec.input_schema or {"type": "object", "properties": {}},
                )
            )
        return tools

    # ------------------------------------------------------------------------- public

    @property
    def closed(self) -> bool:
        """Whether `close` was called (the session is gone)."""
        return self._closed

    @property
    def connected(self) -> bool:
        """`False` once closed or once the current session is known to be lost (the next
        call reconnects). A server that died is noticed by the next call, which fails with
        ``exit_reason="disconnected"``."""
        session = self._session
        return not self._closed and session is not None and session.lost is None

    def tools(self) -> list[MCPFunctionTool]:
        """The exposed functions as tools (the same objects on every call)."""
        return list(self._tools)

    def tool(self, name: str) -> MCPFunctionTool:
        """The tool named `name` (the xpgym name, prefix included).

        Raises:
            KeyError: No such tool.
        """
        for tool in self._tools:
            if tool.name == name:
                return tool
        raise KeyError(f"no tool {name!r}; tools: {[t.name for t in self._tools]}")

    def function_schemas(self) -> list[dict[str, Any]]:
        """The tools' function schemas, for a chat template's ``tools=``."""
        return [tool.function_schema() for tool in self._tools]

    def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
    ) -> ToolResult:
        """Call server function `name` (any function, excluded ones too) and wait.

        Thread-safe; never raises for the server's or the connection's failures (see the
        module docstring). `timeout_s` defaults to `call_timeout_s`; a call that reconnects
        first may also take up to `reconnect_attempts` x `connect_timeout_s`.
        """
        if self._closed:
            return _closed(name)
        timeout = self.call_timeout_s if timeout_s is None else float(timeout_s)
        try:
            future = asyncio.run_coroutine_threadsafe(
                self._call(name, dict(arguments or {}), timeout), self._loop
            )
        except RuntimeError:  # the loop stopped between the check and the submit
            return _closed(name)
        bound = (
            timeout
            + _probe_bound(timeout)
            + self.reconnect_attempts * self.connect_timeout_s
            + _GRACE_S
        )
        try:
            return future.result(bound)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return _timeout(name, timeout)
        except concurrent.futures.CancelledError:
            return _closed(name) if self._closed else _failure(name, "the call was cancelled")

    async def acall(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
    ) -> ToolResult:
        """`call` for async code: awaits the call on the toolset's loop from any loop."""
        if self._closed:
            return _closed(name)
        timeout = self.call_timeout_s if timeout_s is None else float(timeout_s)
        coro = self._call(name, dict(arguments or {}), timeout)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - acall is always awaited in a loop
            running = None
        if running is self._loop:
            return await coro
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        except RuntimeError:
            coro.close()
            return _closed(name)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()
            raise

    async def _call(self, name: str, arguments: dict[str, Any], timeout: float) -> ToolResult:
        """Runs on the toolset's loop."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        session = await self._session_for_call(name)
        if isinstance(session, ToolResult):
            return session
        start = time.perf_counter()
        try:
            result = await asyncio.wait_for(
                session.client.call_tool(
                    name,
                    arguments,
                    read_timeout_seconds=timeout,
                    meta={SESSION_META_KEY: self.session_key},
                ),
                timeout + 1.0,
            )
        except (TimeoutError, asyncio.TimeoutError):
            return await self._timed_out(session, name, timeout)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                return await self._timed_out(session, name, timeout)
            if exc.code == CONNECTION_CLOSED or session.lost is not None:
                why = f"the connection to MCP server {self.label} was closed ({exc.message})"
                return self._lost(session, name, why)
            return ToolResult(
                f"Tool {name!r} failed: {exc.message}",
                ok=False,
                info={"exit_reason": "protocol_error", "server_tool": name, "code": exc.code},
            )
        except Exception as exc:
            if self._closed:
                return _closed(name)
            logger.warning("MCP call %r to %s raised", name, self.label, exc_info=True)
            if session.lost is None:
                await self._responds(session, timeout)
            return _failure(name, _describe(exc))
        text = format_call_result(result, self.max_output_chars)
        info = {
            "exit_reason": "tool_error" if result.is_error else "ok",
            "server_tool": name,
            "duration_s": time.perf_counter() - start,
        }
        if result.is_error:
            return ToolResult(text or f"Tool {name!r} failed.", ok=False, info=info)
        return ToolResult(text, info=info)

    async def _timed_out(self, session: _Session, name: str, timeout: float) -> ToolResult:
        """A call ran past `timeout`: the call's failure if the server answers a probe, else
        the server's (``"unresponsive"``, and the session is lost)."""
        if self._closed:
            return _closed(name)
        if session.lost is None and await self._responds(session, timeout):
            return _timeout(name, timeout)
        why = session.lost or f"the session with MCP server {self.label} was lost"
        return _failure(name, why, exit_reason="unresponsive")

    def _lost(self, session: _Session, name: str, why: str) -> ToolResult:
        """The connection closed under a call: the session is lost, the call disconnected."""
        if self._closed:
            return _closed(name)
        if session.lost is None:
            session.lost = why
        return _failure(name, why, exit_reason="disconnected")

    def close(self, timeout_s: float = 10.0) -> None:
        """End every session, stop the loop and join its thread. Idempotent; never raises.

        A connected session is ended gracefully (for stdio the SDK closes the server's
        stdin, waits, then terminates the process); one still connecting is cancelled; a
        lost one still ending is waited for. Calls still running get ``ToolResult(ok=False)``
        (``"disconnected"``). `timeout_s` bounds the graceful part; the tasks are cancelled
        after it.
        """
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        loop = self._loop
        if threading.current_thread() is self._thread:  # called from a callback on the loop
            loop.create_task(self._shutdown()).add_done_callback(lambda _: loop.stop())
            return
        if self._thread.is_alive():
            try:
                done = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
                done.result(timeout_s)
            except concurrent.futures.TimeoutError:
                logger.warning("MCP session %s did not end within %g s", self.label, timeout_s)
            except RuntimeError:  # the loop is closed already
                pass
            except Exception as exc:
                logger.debug("MCP session %s ended with %r", self.label, exc)
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(loop.stop)
        # Tasks still running are cancelled and awaited by the loop thread before it ends.
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            logger.warning("MCP loop thread %s did not stop", self._thread.name)

    async def _shutdown(self) -> None:
        """Runs on the loop: end every session and wait until their cleanup is done."""
        tasks = [s.task for s in self._sessions if s.task is not None and not s.task.done()]
        for session in list(self._sessions):
            self._end(session)
        if tasks:
            await asyncio.wait(tasks)

    def __enter__(self) -> MCPToolset:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("connected" if self.connected else "lost")
        return f"MCPToolset({self.label!r}, {state}, tools={[t.name for t in self._tools]})"


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "unknown error"
    group = getattr(exc, "exceptions", None)  # an (anyio / PEP 654) exception group
    if isinstance(group, (list, tuple)) and group:
        return "; ".join(_describe(e) for e in group)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _probe_bound(timeout: float) -> float:
    """Seconds the probe after a call with `timeout` may take: ``min(5 s, max(1 s, timeout))``."""
    return min(_PROBE_TIMEOUT_S, max(_PROBE_FLOOR_S, timeout))


def _timeout(name: str, timeout: float) -> ToolResult:
    return ToolResult(
        f"Tool {name!r} timed out after {timeout:g} s.",
        ok=False,
        info={"exit_reason": "timeout", "server_tool": name, "duration_s": timeout},
    )


def _closed(name: str) -> ToolResult:
    return _failure(name, "the MCP session is closed.", exit_reason="disconnected")


def _failure(name: str, why: str, *, exit_reason: str = "error") -> ToolResult:
    """A call that failed because the backend broke (not the call): marked as
    infrastructure (`xpgym.core.errors`)."""
    return ToolResult(
        f"Tool {name!r} failed: {why}",
        ok=False,
        info={
            "exit_reason": exit_reason,
            "server_tool": name,
            INFRA_ERROR_KEY: InfraCause("tool_backend_error", why).to_dict(),
        },
    )


def make_mcp_tools(
    *,
    command: str | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    url: str | None = None,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    name_prefix: str = "",
    call_timeout_s: float = 30.0,
    connect_timeout_s: float = 30.0,
    reconnect_attempts: int = 1,
    max_output_chars: int = 4000,
) -> list[Tool]:
    """The tools of a fresh `MCPToolset`, from plain data (a `register_tool_variant` factory).

    Give `command` (with `args`, `env`, `cwd`) for a stdio server or `url` for streamable
    HTTP. Closing any returned tool closes the toolset (as ``close_tools=True`` does).

    Raises:
        ValueError: Neither or both of `command` and `url`.
        MCPConnectionError: As for `MCPToolset`.
    """
    if (command is None) == (url is None):
        raise ValueError("give exactly one of command (stdio) or url (streamable HTTP)")
    server: dict[str, Any] = (
        {"url": url}
        if url is not None
        else {"command": command, "args": list(args), "env": dict(env or {}), "cwd": cwd}
    )
    toolset = MCPToolset(
        server,
        include=include,
        exclude=exclude,
        name_prefix=name_prefix,
        call_timeout_s=call_timeout_s,
        connect_timeout_s=connect_timeout_s,
        reconnect_attempts=reconnect_attempts,
        max_output_chars=max_output_chars,
    )
    return list(toolset.tools())
