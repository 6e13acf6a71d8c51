"""ORS (the Open Reward Standard) over a `SessionStore`'s sessions, at the server's root.

``xpgym serve`` answers the ORS HTTP API next to its native routes, on the same port, with
the same token, limits and idle reaping, so an ORS client (``ors.client.ORS(url)``, ORS's
Python SDK) plays every env id the server allows. The routes sit at the root because the
SDK joins its absolute paths to the host (a path prefix in its base URL is dropped).

Names, splits and tasks
-----------------------

* An ORS *environment name* is the xpgym env id, exactly (case-sensitive), e.g.
  ``game:GuessTheNumber-v0``. ``GET /list_environments`` lists the registered ids that
  the server's ``--env`` globs allow (multi-agent ids are listed but cannot be played).
* A *split* names a range of seeds and a *task* is one seed (`SPLITS`): ``train`` is seeds
  ``[0, 10^9)``, ``validation`` ``[10^9, 2*10^9)``, ``test`` ``[2*10^9, 3*10^9)``; task
  ``index`` of a split is the seed ``start + index`` (negative indices count from the end),
  and its task spec is ``{"seed": seed}``. ``/{env}/num_tasks`` answers 10^9,
  ``/{env}/task`` one spec, ``/{env}/task_range`` at most `MAX_TASK_RANGE` specs per
  request; ``/{env}/tasks`` (a whole split) is 400, ORS's answer for an env that cannot
  list its tasks. A task spec a client writes itself is ``{"seed": int, "options": {...}}``
  (both optional): the env is reset with that seed and those reset options (a toolgym
  task is ``{"options": {"task": "ClosestToK@{...}"}}``).

Sessions
--------

``POST /create_session`` hands out a session id (``X-Session-ID`` of every later request)
and keeps nothing; ``POST /create {env_name, task_spec | split + index}`` makes the env
(`SessionStore.open_session`: every limit of the server, the ``--env`` globs) and resets it
with the task. ORS's SDK sends no ``env_name`` when a session is made from a split and an
index (``env.session(split="test", index=3)``); such a session gets its env at its first
``/{env}/...`` request (as an ORS server builds its env in the background, errors of the
build come back from that request). One session plays one episode:

* ``GET /{env}/prompt``: the first observation, as blocks ``[{"type": "text", "text"}]``,
  then ``{"type": "image", "data", "mimeType"}`` for each image of a vision env (the base64
  data URLs of ``info["images"]``; results of calls carry theirs the same way).
* ``GET /{env}/task_tools`` (this session's tools) and ``GET /{env}/tools`` (the id's
  tools, learnt once by resetting an env of that id; cached).
* ``POST /{env}/call {name, input, task_id?}``: one ``env.step``, streamed as server-sent
  events: ``task_id`` (the call's id), then the result as ``chunk`` events and a final
  ``end`` event (`CHUNK_CHARS` characters each; ``": ping"`` comments every
  `PING_SECONDS` while the env works). The result is ``{"ok": true, "output": {"blocks":
  [{"type": "text", "text": observation}], "reward": reward, "finished": terminated or
  truncated, "metadata": {"terminated", "truncated", "info"}}}``: ORS knows only
  ``finished``, so both of Gymnasium's flags are in the metadata. ``{"ok": false, "error"}``
  is a call that did not reach the env: an unknown tool, input that does not match the
  tool's schema, or a call after the episode finished. An exception of the env is an
  ``error`` event (the SDK raises it). A request that repeats an earlier call's ``task_id``
  (the SDK does when the stream broke) streams that call's result without stepping again;
  only the session's latest call can be resumed (another id gets an ``error`` event).
* ``POST /ping`` keeps the session alive (the SDK pings every 10 s while it works); a session
  without a request for ``--idle-timeout`` seconds is closed by the server's reaper (a
  created session not yet given its env too) and answers 404 afterwards.
* ``POST /delete`` and ``POST /delete_session`` close the session (``{"sid"}``, also for an
  unknown id).

Tools
-----

Every env has the action tool `ACTION_TOOL`, ``respond``, with input ``{"text": string}``:
the text is the action, what the model's reply would be (a text env's only tool). An env
whose reset info lists ``tools`` (function schemas, as a chat template's ``tools=`` takes
them: toolgym envs, the `ToolEnvWrapper` envs such as the ``-python``, ``-search`` and
``-actions`` variants, MCP tools) exposes each of them first, named as the env names it,
its ``parameters`` schema as ``input_schema``. A call of such a tool is checked against its
schema and sent to the env as the model's tool-call text ``<tool_call>{"name": ...,
"arguments": {...}}</tool_call>``, which the env parses and runs, so the env does the work
and counts the call; ``respond`` then sends a reply without a tool call (a
`ToolEnvWrapper` env's answer). An env tool named ``respond`` hides the action tool.

Errors and access
-----------------

Errors are ORS's (FastAPI's) shape, ``{"detail": "<message>"}``, with the status the native
protocol uses (`ServerError`): 400 no ``X-Session-ID``, an unknown split, an index out of
range, a session id already created, bad reset options; 403 an env id not allowed; 404 an
unknown env id or an unknown, deleted or expired session; 409 a session used under another
env's path; 413 an action over ``--max-action-chars``; 422 a field of the wrong JSON type;
429 and 503 the session limits. The token (`--token`) is checked before any route: ORS
clients send it as ``X-API-Key`` (``ORS(api_key=...)`` or ``ORS_API_KEY``), which the
server accepts next to ``Authorization: Bearer``. Those checks, the rate limit and the body
size limit answer every path with the native error body, which also carries ``detail``
(`xpgym.remote.server`), so the SDK shows their message. Sessions belong to the client
(address) that created them. Secrets (``X-Secrets``) are ignored: xpgym envs take none.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from xpgym.core.registry import list_envs, spec
from xpgym.core.tools.calls import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, validate_arguments
from xpgym.remote.sessions import (
    ServerError,
    Session,
    SessionStore,
    client_of,
    error_from,
    json_field,
    read_json_body,
    to_json,
)

__all__ = ["ACTION_TOOL", "CHUNK_CHARS", "MAX_TASK_RANGE", "PING_SECONDS", "SPLITS", "ors_routes"]

logger = logging.getLogger(__name__)

SPLITS: Mapping[str, range] = {
    "train": range(0, 10**9),
    "validation": range(10**9, 2 * 10**9),
    "test": range(2 * 10**9, 3 * 10**9),
}
"""ORS split name -> its seeds; task ``index`` of a split is seed ``SPLITS[split][index]``."""

MAX_TASK_RANGE = 10_000
"""Most task specs one ``/{env}/task_range`` request returns (400 above)."""

ACTION_TOOL = "respond"
"""The tool every env has: its ``text`` is sent to the env as the action."""

CHUNK_CHARS = 4096
"""Characters of the result per server-sent event (the SDK reads events line by line)."""

PING_SECONDS = 10.0
"""Seconds between keep-alive comments while a call runs (the SDK gives up after 30 s of
silence)."""

_ACTION_TOOL_SPEC: dict[str, Any] = {
    "name": ACTION_TOOL,
    "description": (
        "Send text to the environment as your turn: your answer, move or message, exactly "
        "as you would reply (a reply with no tool call)."
    ),
    "input_schema": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "Your reply."}},
        "required": ["text"],
        "additionalProperties": False,
    },
}

_EVENT_STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@dataclass(eq=False)
class _Call:
    """One ``/{env}/call``: its id (``task_id``) and the task making its result (JSON)."""

    id: str
    result: asyncio.Future[bytes]


@dataclass(eq=False)
class _Episode:
    """What one ORS session id holds: its task, then its env session and episode state."""

    owner: str
    seed: int | None
    options: dict[str, Any] | None
    touched: float = field(default_factory=time.monotonic)
    session: Session | None = None
    prompt: list[dict[str, Any]] = field(default_factory=list)
    env_tools: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False
    last_call: _Call | None = None
    binding: asyncio.Lock = field(default_factory=asyncio.Lock)

    def tools(self) -> list[dict[str, Any]]:
        """This session's tools (`_with_action_tool`)."""
        return _with_action_tool(self.env_tools)


def _with_action_tool(env_tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An env's tools, then the action tool unless an env tool has its name."""
    if any(tool["name"] == ACTION_TOOL for tool in env_tools):
        return list(env_tools)
    return [*env_tools, _ACTION_TOOL_SPEC]


def ors_routes(store: SessionStore) -> list[BaseRoute]:
    """The routes serving the ORS HTTP API at the root (see the module docstring)."""
    return _OrsFrontEnd(store).routes()


def _answering(handler: Callable[[Request], Awaitable[Response]]) -> Callable[..., Any]:
    """`handler` with every exception answered as an ORS error reply."""

    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:
            return _error_response(exc)

    return endpoint


def _error_response(exc: BaseException) -> Response:
    err = error_from(exc)
    if err.status >= 500:
        logger.warning("ORS request failed: %s: %s", err.type_name, err.message)
    return JSONResponse({"detail": err.message}, status_code=err.status, headers=err.headers)


def _event(name: str, data: str) -> bytes:
    return f"event: {name}\ndata: {data}\n\n".encode()


def _result_events(payload: bytes) -> list[bytes]:
    """`payload` (compact ASCII JSON) as ``chunk`` events and a final ``end`` event.

    The SDK strips the whitespace at the start of each event's data, and in compact JSON
    every space is inside a string, so a chunk that would start with a space starts with
    its escape ``\\u0020`` instead.
    """
    text = payload.decode("ascii")
    pieces = [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)] or [""]
    pieces = ["\\u0020" + p[1:] if p.startswith(" ") else p for p in pieces]
    return [_event("chunk", p) for p in pieces[:-1]] + [_event("end", pieces[-1])]


def _tool_failure(message: str) -> bytes:
    return to_json({"ok": False, "error": message}, compact=True)


def _blocks(observation: Any, info: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An observation as ORS blocks: its text (the JSON of a structured one), then an image
    block per base64 data URL in ``info["images"]`` (how vision envs show images)."""
    text = observation if isinstance(observation, str) else to_json(observation).decode()
    blocks: list[dict[str, Any]] = [{"text": text, "detail": None, "type": "text"}]
    for url in info.get("images") or ():
        header, _, data = url.partition(",") if isinstance(url, str) else ("", "", "")
        if header.startswith("data:") and header.endswith(";base64") and data:
            mime = header.removeprefix("data:").removesuffix(";base64")
            blocks.append({"data": data, "mimeType": mime, "detail": None, "type": "image"})
    return blocks


def _env_tools(info: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ORS tool specs of the function schemas in a reset info's ``tools``."""
    specs = []
    for schema in info.get("tools") or ():
        function = schema["function"]
        specs.append(
            {
                "name": function["name"],
                "description": function.get("description", ""),
                "input_schema": function.get("parameters"),
            }
        )
    return specs


def _split_seeds(body: dict[str, Any]) -> range:
    split = json_field(body, "split", str, required=True)
    if split not in SPLITS:
        raise ServerError(400, "InvalidSplit", f"Invalid split {split!r}; splits: {list(SPLITS)}")
    return SPLITS[split]


def _seed_at(seeds: range, index: int) -> int:
    try:
        return seeds[index]
    except IndexError:
        raise ServerError(
            400, "InvalidIndex", f"Invalid index {index}: the split has {len(seeds)} tasks"
        ) from None


def _check_fields(body: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise ServerError(
            422, "InvalidField", f"unknown field(s) {unknown}; the fields are {list(allowed)}"
        )


def _session_id(request: Request) -> str:
    sid = request.headers.get("x-session-id", "").strip()
    if not sid:
        raise ServerError(400, "BadRequest", "X-Session-ID header is required")
    return sid


class _OrsFrontEnd:
    """The ORS routes' state over one store: session ids -> episodes, tools per env id."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.episodes: dict[str, _Episode] = {}
        self.tools_by_env: dict[str, list[dict[str, Any]]] = {}
        self.running: set[asyncio.Future[bytes]] = set()

    def routes(self) -> list[BaseRoute]:
        env = "/{env_id}"
        table: list[tuple[str, Callable[[Request], Awaitable[Response]], str]] = [
            ("/list_environments", self.list_environments, "GET"),
            ("/create_session", self.create_session, "POST"),
            ("/delete_session", self.delete, "POST"),
            ("/create", self.create, "POST"),
            ("/ping", self.ping, "POST"),
            ("/delete", self.delete, "POST"),
            (env + "/tools", self.tools, "GET"),
            (env + "/splits", self.splits, "GET"),
            (env + "/tasks", self.tasks, "POST"),
            (env + "/num_tasks", self.num_tasks, "POST"),
            (env + "/task", self.task, "POST"),
            (env + "/task_range", self.task_range, "POST"),
            (env + "/task_tools", self.task_tools, "GET"),
            (env + "/prompt", self.prompt, "GET"),
            (env + "/call", self.call, "POST"),
        ]
        return [Route(path, _answering(handler), methods=[m]) for path, handler, m in table]

    # -- discovery ---------------------------------------------------------------------
    async def list_environments(self, request: Request) -> Response:
        def allowed_ids() -> list[str]:
            ids = {i for pattern in self.store.env_patterns for i in list_envs(pattern)}
            return sorted(i for i in ids if self.store.allows(i))

        return JSONResponse(await anyio.to_thread.run_sync(allowed_ids))

    async def _known_env(self, request: Request) -> str:
        """The path's env id if clients may create it (403) and it is registered (404)."""
        env_id = str(request.path_params["env_id"])
        self.store.check_allowed(env_id)
        await anyio.to_thread.run_sync(spec, env_id)
        return env_id

    async def tools(self, request: Request) -> Response:
        env_id = await self._known_env(request)
        if env_id not in self.tools_by_env:
            session = await self.store.open_session(env_id, {}, client_of(request.scope))
            try:
                _, info = await self.store.call(session, lambda s: s.env.reset(seed=0))
            finally:
                await self.store.close_session(session)
            self.tools_by_env[env_id] = _env_tools(info)
        return JSONResponse({"tools": _with_action_tool(self.tools_by_env[env_id])})

    async def splits(self, request: Request) -> Response:
        await self._known_env(request)
        return JSONResponse([{"name": name, "type": name} for name in SPLITS])

    async def tasks(self, request: Request) -> Response:
        await self._known_env(request)
        seeds = _split_seeds(await read_json_body(request))
        raise ServerError(
            400,
            "NotSupported",
            f"list_tasks is not supported: the split has {len(seeds)} tasks (one per seed). "
            "Use the index-based API (num_tasks + get_task or get_task_range) instead.",
        )

    async def num_tasks(self, request: Request) -> Response:
        await self._known_env(request)
        return JSONResponse({"num_tasks": len(_split_seeds(await read_json_body(request)))})

    async def task(self, request: Request) -> Response:
        await self._known_env(request)
        body = await read_json_body(request)
        seeds = _split_seeds(body)
        seed = _seed_at(seeds, json_field(body, "index", int, required=True))
        return JSONResponse({"task": {"seed": seed}})

    async def task_range(self, request: Request) -> Response:
        await self._known_env(request)
        body = await read_json_body(request)
        seeds = _split_seeds(body)[json_field(body, "start", int) : json_field(body, "stop", int)]
        if len(seeds) > MAX_TASK_RANGE:
            raise ServerError(
                400,
                "InvalidIndex",
                f"Invalid index range: {len(seeds)} tasks, over {MAX_TASK_RANGE} per request",
            )
        return JSONResponse({"tasks": [{"seed": seed} for seed in seeds]})

    # -- sessions ----------------------------------------------------------------------
    async def create_session(self, request: Request) -> Response:
        stream = _event("task_id", str(uuid.uuid4())) + _event("end", "")
        return Response(stream, media_type="text/event-stream", headers=_EVENT_STREAM_HEADERS)

    async def create(self, request: Request) -> Response:
        sid = _session_id(request)
        if sid in self.episodes:
            raise ServerError(400, "SessionExists", f"Session already exists: {sid!r}")
        body = await read_json_body(request)
        _check_fields(body, ("env_name", "task_spec", "split", "index", "secrets"))
        env_id = json_field(body, "env_name", str)
        task_spec = json_field(body, "task_spec", dict)
        index = json_field(body, "index", int)
        by_index = body.get("split") is not None
        if (task_spec is None) != (by_index and index is not None) or by_index != (
            index is not None
        ):
            raise ServerError(
                422,
                "InvalidField",
                "Provide either task_spec or both split and index, not both/neither",
            )
        if task_spec is not None:
            _check_fields(task_spec, ("seed", "options"))
            seed = json_field(task_spec, "seed", int)
            options = json_field(task_spec, "options", dict)
        else:
            seed, options = _seed_at(_split_seeds(body), index), None
        client = client_of(request.scope)
        self._forget_stale()
        if env_id is None:
            self._check_unbound_limits(client)
        episode = self.episodes[sid] = _Episode(client, seed, options)
        if env_id is not None:
            try:
                await self._bind(episode, env_id)
            except BaseException:
                self.episodes.pop(sid, None)
                raise
        return JSONResponse({"sid": sid})

    def _check_unbound_limits(self, client: str) -> None:
        """Sessions waiting for their env count against the server's session limits."""
        unbound = [e.owner for e in self.episodes.values() if e.session is None]
        if len(unbound) >= self.store.max_sessions:
            raise ServerError(
                503,
                "TooManySessions",
                f"{len(unbound)} ORS sessions wait for their env (their first /{{env}}/ "
                "request); use or delete them, or start the server with a larger "
                "--max-sessions",
            )
        if unbound.count(client) >= self.store.max_sessions_per_client:
            raise ServerError(
                429,
                "TooManyClientSessions",
                f"client {client} has {unbound.count(client)} ORS sessions waiting for their "
                "env; use or delete them",
            )

    def _is_stale(self, episode: _Episode) -> bool:
        if episode.session is not None:
            return episode.session.closed
        return time.monotonic() - episode.touched > self.store.idle_timeout

    def _forget_stale(self) -> None:
        for sid in [sid for sid, e in self.episodes.items() if self._is_stale(e)]:
            del self.episodes[sid]

    def _episode(self, request: Request) -> _Episode:
        """The request's session (``X-Session-ID``) if it is open and the client's."""
        sid = _session_id(request)
        episode = self.episodes.get(sid)
        if episode is not None and self._is_stale(episode):
            del self.episodes[sid]
            episode = None
        if episode is None or episode.owner != client_of(request.scope):
            raise ServerError(
                404,
                "SessionNotFound",
                f"Active environment not found: no session {sid!r} (never created with "
                f"/create, deleted, or closed after {self.store.idle_timeout:g} s idle); "
                "create a new one",
            )
        episode.touched = time.monotonic()
        if episode.session is not None:  # any request on a session keeps it from the reaper
            episode.session.last_used = episode.touched
        return episode

    async def _bind(self, episode: _Episode, env_id: str) -> Session:
        """`episode`'s env session: made and reset on first use, under `env_id`.

        Raises:
            ServerError: 409 when the session plays another env id; `open_session`'s errors;
                400 reset options the env refuses.
        """
        async with episode.binding:
            if episode.session is None:
                session = await self.store.open_session(env_id, {}, episode.owner)
                try:
                    obs, info = await self.store.call(
                        session, lambda s: _reset(s, episode.seed, episode.options)
                    )
                except BaseException:
                    await self.store.close_session(session)
                    raise
                episode.session, episode.prompt = session, _blocks(obs, info)
                episode.env_tools = _env_tools(info)
        if episode.session.env_id != env_id:
            raise ServerError(
                409,
                "WrongEnv",
                f"this session plays {episode.session.env_id!r}; use /{episode.session.env_id}/"
                f"... (not /{env_id}/...)",
            )
        return episode.session

    async def ping(self, request: Request) -> Response:
        self._episode(request)  # not idle now
        return JSONResponse({"status": "ok"})

    async def delete(self, request: Request) -> Response:
        sid = _session_id(request)
        episode = self.episodes.get(sid)
        if episode is not None and episode.owner == client_of(request.scope):
            del self.episodes[sid]
            if episode.session is not None:  # closes once a call in flight returns
                self.store.close_soon(episode.session)
        return JSONResponse({"sid": sid})

    # -- one episode -------------------------------------------------------------------
    async def prompt(self, request: Request) -> Response:
        episode = self._episode(request)
        await self._bind(episode, str(request.path_params["env_id"]))
        return Response(to_json(episode.prompt), media_type="application/json")

    async def task_tools(self, request: Request) -> Response:
        episode = self._episode(request)
        await self._bind(episode, str(request.path_params["env_id"]))
        return JSONResponse({"tools": episode.tools()})

    async def call(self, request: Request) -> Response:
        episode = self._episode(request)
        body = await read_json_body(request)
        _check_fields(body, ("name", "input", "task_id"))
        name = json_field(body, "name", str, required=True)
        arguments = json_field(body, "input", dict, required=True)
        task_id = json_field(body, "task_id", str)
        session = await self._bind(episode, str(request.path_params["env_id"]))
        if task_id is None:
            call: _Call | None = self._start_call(episode, session, name, arguments)
        elif episode.last_call is not None and episode.last_call.id == task_id:
            call = episode.last_call
        else:
            call = None
        return StreamingResponse(
            _call_events(call), media_type="text/event-stream", headers=_EVENT_STREAM_HEADERS
        )

    def _start_call(
        self, episode: _Episode, session: Session, name: str, arguments: dict[str, Any]
    ) -> _Call:
        """Check the call, then step the env with its action on a worker thread."""
        tools = {tool["name"]: tool for tool in episode.tools()}
        problem = None
        if name not in tools:
            problem = f"{name!r} is not a valid tool; the tools are {list(tools)}"
        elif error := validate_arguments(arguments, tools[name]["input_schema"]):
            problem = f"Tool input validation error: {error}"
        if problem is not None:
            result = asyncio.get_running_loop().create_future()
            result.set_result(_tool_failure(problem))
            return self._track(episode, result)
        if any(tool["name"] == name for tool in episode.env_tools):
            call_text = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
            action = f"{TOOL_CALL_OPEN}{call_text}{TOOL_CALL_CLOSE}"
        else:
            action = arguments["text"]
        self.store.check_action(action)

        def step(s: Session) -> bytes:
            if episode.finished:
                return _tool_failure(
                    "the episode is over (finished); create a new session for the next task"
                )
            obs, reward, terminated, truncated, info = s.env.step(action)
            episode.finished = bool(terminated or truncated)
            output = {
                "blocks": _blocks(obs, info),
                "metadata": {
                    "terminated": bool(terminated),
                    "truncated": bool(truncated),
                    "info": info,
                },
                "reward": float(reward),
                "finished": episode.finished,
            }
            return to_json({"ok": True, "output": output}, compact=True)

        return self._track(episode, asyncio.ensure_future(self.store.call(session, step)))

    def _track(self, episode: _Episode, result: asyncio.Future[bytes]) -> _Call:
        """Keep `result` until it is done (a client may drop the stream and resume it)."""
        self.running.add(result)
        result.add_done_callback(self._done)
        episode.last_call = _Call(uuid.uuid4().hex, result)
        return episode.last_call

    def _done(self, result: asyncio.Future[bytes]) -> None:
        self.running.discard(result)
        exc = None if result.cancelled() else result.exception()
        if exc is not None:  # retrieved here; streamed as an `error` event
            err = error_from(exc)
            logger.info("ORS call failed: %s: %s", err.type_name, err.message)


def _reset(session: Session, seed: int | None, options: dict[str, Any] | None) -> Any:
    try:
        return session.env.reset(seed=seed, options=options)
    except (TypeError, ValueError) as exc:  # the task's seed or options
        raise ServerError(400, type(exc).__name__, f"reset refused the task: {exc}") from exc


async def _call_events(call: _Call | None) -> AsyncIterator[bytes]:
    """The events of one call's stream (see the module docstring)."""
    if call is None:
        yield _event("error", "unknown task_id")
        return
    yield _event("task_id", call.id)
    while not call.result.done():
        await asyncio.wait({call.result}, timeout=PING_SECONDS)
        if not call.result.done():
            yield b": ping\n\n"
    try:
        payload = call.result.result()
    except Exception as exc:
        err = error_from(exc)
        yield _event("error", f"{err.type_name}: {err.message}".replace("\n", " "))
        return
    for event in _result_events(payload):
        yield event
