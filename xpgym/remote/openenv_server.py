"""OpenEnv's protocol over a `SessionStore`: every allowed env id at ``/openenv/<env id>``.

An OpenEnv client pointed at ``http://HOST:PORT/openenv/<env id>`` (OpenEnv's own
``GenericEnvClient(base_url=...)``, unchanged) plays that xpgym env. The routes are OpenEnv's
(``openenv.core.env_server.http_server``, v0.10) under that prefix; they share the store's
sessions, token, limits and idle reaping with the native protocol (`xpgym.remote.server`).

==========================================  =============================================
Request                                     Response
==========================================  =============================================
``WS /ws``                                  one session per connection (below)
``GET /health``                             ``{"status": "healthy"}``
``GET /metadata``                           ``{name: <env id>, description, readme_content,
                                            version, author, documentation_url}`` (from
                                            the env's spec; the last four are null)
``GET /schema``                             ``{action, observation, state}`` JSON schemas
``GET /state``                              a fresh env's state (see HTTP below)
``POST /reset {seed, episode_id, ...}``     ``{observation, reward: null, done: false,
                                            metadata}``
``POST /step {action: {message}}``          409: a fresh env has no episode (HTTP below)
==========================================  =============================================

Mapping (`Env` to OpenEnv; ``Observation``, ``Action`` and ``State`` are OpenEnv's types):

* Action: ``{"message": "<the model's text>"}`` (OpenEnv's text-game action shape; an
  optional ``"metadata"`` object, which OpenEnv's ``Action`` base has, is accepted and
  ignored). ``message`` is passed to `Env.step` as is.
* Observation: ``{"observation": {"text": <obs>, "info": <info>, "metadata": M}, "reward",
  "done", "metadata": M}`` where ``M = {"terminated": bool, "truncated": bool}``. ``done``
  is ``terminated or truncated``; OpenEnv has no place for the two apart, so they go in the
  observation's ``metadata`` (OpenEnv's ``Observation.metadata``; its serializer also puts
  it beside ``observation``, which is where ``GenericEnvClient`` reads
  ``StepResult.metadata``). ``reward`` is ``null`` after a reset, the step's float after a
  step. ``info`` crosses as JSON as in the native protocol (NumPy values become numbers
  and lists, other values their ``repr()``); tool envs list their tools there at reset.
* Reset: ``data`` is OpenEnv's reset kwargs: ``seed`` (int >= 0 or null) and ``options``
  (object or null) go to `Env.reset`; any other key is an episode option too (OpenEnv
  passes env-specific reset arguments as top-level kwargs; xpgym's place for them is
  ``options``; a key given both ways is an error); ``episode_id`` (string) only names the
  episode in ``state``.
* State: ``{"episode_id", "step_count", "env_id"}`` (OpenEnv's ``State`` plus the env id);
  ``episode_id`` is the one reset was given, or a random hex id.

WebSocket session (``/ws``): the connection is accepted, then the session is opened (as
OpenEnv's server does); if that fails the client gets one error frame and the socket closes.
Messages are ``{"type": "reset", "data": {...}}``, ``{"type": "step", "data": {action}}``,
``{"type": "state"}`` and ``{"type": "close"}``; replies are ``{"type": "observation",
"data"}``, ``{"type": "state", "data"}`` or ``{"type": "error", "data": {"message", "code",
"type", "status"}}`` (``type`` and ``status``: the native protocol's error type and HTTP
status, e.g. ``ResetNeededError``, 409). ``close`` and a dropped connection close the
session; after an error frame the connection stays open, except when the session is gone
(reaped after ``idle_timeout`` seconds without a message). Error codes (OpenEnv's
``WSErrorCode``):

=====================  =============================================================
``INVALID_JSON``       the frame is not JSON (or not UTF-8)
``UNKNOWN_TYPE``       ``type`` is not reset, step, state or close
``VALIDATION_ERROR``   a malformed message or field (422), an action over
                       ``max_action_chars`` or a frame over ``max_body_bytes`` (413)
``EXECUTION_ERROR``    the env raised: step before reset, step after the episode ended
                       (409), any other exception (500)
``CAPACITY_REACHED``   the store's 503 (``max_sessions``) or 429 (the client's sessions,
                       or its rate limit; ``retry_after`` in seconds then)
``FACTORY_ERROR``      the session could not be opened: env id not allowed (403, also
                       every ``remote:`` id), unknown (404), or its constructor raised
``SESSION_ERROR``      the session was closed (idle reaping); the socket closes too
=====================  =============================================================

Access and limits: the handshake passes the same gate as an HTTP request (token, rate
limit; refused handshakes get the HTTP error, e.g. 401, and are never accepted). Each frame
received then counts as one request against the client's rate limit, must be at most
``max_body_bytes`` bytes, and a step's ``message`` at most ``max_action_chars`` characters.
The session counts against ``max_sessions`` and ``max_sessions_per_client`` while the
connection is open. OpenEnv's client sends the token as a header:
``GenericEnvClient(base_url=..., headers={"Authorization": "Bearer <token>"})``.

HTTP ``/reset`` and ``/step``: OpenEnv's server answers each with a fresh env that it
closes after the request (no state between requests). Here ``POST /reset`` does the same
(a session opened for the request, under the same limits, and closed after it), so it shows
the first observation of a seed; ``POST /step`` validates the action and answers 409
``ResetNeededError``, since a fresh xpgym env has no episode to step (OpenEnv's would run
the step on its fresh env): play episodes over ``/ws``. ``GET /state`` is a fresh env's
state. HTTP errors are ``{"detail": "<message>", "type": "<ErrorType>"}`` with the native
protocol's status codes (FastAPI's shape, which OpenEnv's server uses).

Not served: OpenEnv's MCP parts (``/mcp``, the ``mcp`` message, which is an unknown type
here, attaching a socket to an HTTP session with ``?session_id=``, which is ignored), its
harness socket and its task routes (xpgym's tasks are seeds; ORS serves them:
`xpgym.remote.ors_server`). Env kwargs cannot be passed (OpenEnv has no place for them):
each id is made with its registered kwargs; variants are their own ids. uvicorn closes a
socket whose frame is over its ``ws_max_size`` (16 MiB by default) with code 1009, before
the ``max_body_bytes`` check sees it.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import Message
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from xpgym.core.env import EnvSpec
from xpgym.core.registry import spec
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

__all__ = ["ErrorCode", "openenv_routes"]

logger = logging.getLogger(__name__)

PREFIX = "/openenv/{env_id:path}"
"""Where each env id is served (the id may contain ``/``: the route's suffix ends it)."""


class ErrorCode(str, enum.Enum):
    """OpenEnv's WebSocket error codes (``WSErrorCode``), sent in error frames' ``code``."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"


_RESET_FIELDS = frozenset({"seed", "episode_id", "options"})
_ACTION_FIELDS = frozenset({"message", "metadata"})
_ENVELOPE_FIELDS = {  # message type -> the fields its envelope may have
    "reset": frozenset({"type", "data"}),
    "step": frozenset({"type", "data"}),
    "state": frozenset({"type"}),
    "close": frozenset({"type"}),
}


def _schemas(max_action_chars: int) -> dict[str, Any]:
    """``GET /schema``: the JSON schemas of the action, the observation and the state."""
    flags = {
        "type": "object",
        "properties": {"terminated": {"type": "boolean"}, "truncated": {"type": "boolean"}},
    }
    return {
        "action": {
            "title": "TextAction",
            "type": "object",
            "properties": {
                "message": {
                    "type": "string",
                    "maxLength": max_action_chars,
                    "description": "The model's text, passed to the env's step() as is.",
                },
                "metadata": {"type": "object", "description": "Accepted and ignored."},
            },
            "required": ["message"],
            "additionalProperties": False,
        },
        "observation": {
            "title": "TextObservation",
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The env's observation."},
                "info": {"type": "object", "description": "The env's info dict, as JSON."},
                "metadata": flags,
                "done": {"type": "boolean", "description": "terminated or truncated"},
                "reward": {"type": ["number", "null"]},
            },
        },
        "state": {
            "title": "EpisodeState",
            "type": "object",
            "properties": {
                "episode_id": {"type": ["string", "null"]},
                "step_count": {"type": "integer", "minimum": 0},
                "env_id": {"type": "string"},
            },
        },
    }


def _observation(
    obs: str, reward: float | None, terminated: bool, truncated: bool, info: dict[str, Any]
) -> dict[str, Any]:
    """An OpenEnv observation reply's ``data`` (the layout of OpenEnv's
    ``serialize_observation``), with `terminated` and `truncated` in its metadata."""
    metadata = {"terminated": terminated, "truncated": truncated}
    return {
        "observation": {"text": obs, "info": info, "metadata": metadata},
        "reward": reward,
        "done": terminated or truncated,
        "metadata": metadata,
    }


def _reset(session: Session, seed: int | None, options: dict | None) -> dict[str, Any]:
    obs, info = session.env.reset(seed=seed, options=options)
    return _observation(obs, None, False, False, info)


def _step(session: Session, text: str) -> dict[str, Any]:
    obs, reward, terminated, truncated, info = session.env.step(text)
    return _observation(obs, float(reward), bool(terminated), bool(truncated), info)


def _frame(kind: str, data: dict[str, Any]) -> str:
    """A WebSocket reply frame ``{"type": kind, "data": data}`` as text."""
    return to_json({"type": kind, "data": data}).decode()


def _reset_args(data: dict[str, Any]) -> tuple[int | None, dict[str, Any] | None, str | None]:
    """``(seed, options, episode_id)`` from OpenEnv's reset kwargs (see the module doc).

    Raises:
        ServerError: 422 ``InvalidField`` for a field of the wrong type, a negative seed, or
            an option given both at the top level and in ``options``.
    """
    seed = json_field(data, "seed", int)
    if seed is not None and seed < 0:
        raise ServerError(422, "InvalidField", f"field 'seed' must be >= 0, got {seed}")
    options = json_field(data, "options", dict)
    episode_id = json_field(data, "episode_id", str)
    extra = {k: v for k, v in data.items() if k not in _RESET_FIELDS}
    if extra:
        both = sorted(extra.keys() & (options or {}).keys())
        if both:
            raise ServerError(
                422, "InvalidField", f"reset options {both} given both as kwargs and in 'options'"
            )
        options = {**(options or {}), **extra}
    return seed, options, episode_id


def _action_text(store: SessionStore, action: dict[str, Any]) -> str:
    """The model's text in an OpenEnv action ``{"message": ...}``.

    Raises:
        ServerError: 422 ``InvalidAction`` (other fields) or ``InvalidField``; 413
            ``ActionTooLong``.
    """
    unknown = sorted(action.keys() - _ACTION_FIELDS)
    if unknown:
        raise ServerError(
            422,
            "InvalidAction",
            f'unknown action fields {unknown}: an action is {{"message": "<the model\'s '
            'text>"}} (GET .../schema)',
        )
    text = json_field(action, "message", str, required=True)
    json_field(action, "metadata", dict)
    store.check_action(text)
    return text


def _parse_message(raw: str) -> tuple[str, dict[str, Any]]:
    """``(type, data)`` of a WebSocket message (``data`` is ``{}`` when absent).

    Raises:
        ServerError: 400 ``InvalidJSON`` or ``UnknownMessageType``; 422 ``InvalidMessage``
            or ``InvalidField`` for a malformed envelope.
    """
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise ServerError(400, "InvalidJSON", f"Invalid JSON: {exc}") from exc
    if not isinstance(message, dict):
        raise ServerError(
            422, "InvalidMessage", 'a message is a JSON object {"type": ..., "data": {...}}'
        )
    kind = message.get("type")
    if not isinstance(kind, str) or kind not in _ENVELOPE_FIELDS:
        raise ServerError(
            400,
            "UnknownMessageType",
            f"Unknown message type: {kind!r:.80}; send one of {sorted(_ENVELOPE_FIELDS)}",
        )
    unknown = sorted(message.keys() - _ENVELOPE_FIELDS[kind])
    if unknown:
        raise ServerError(422, "InvalidMessage", f"{kind} message with unknown fields {unknown}")
    return kind, json_field(message, "data", dict, required=kind == "step") or {}


def _failure(exc: BaseException) -> ServerError:
    """`exc` as a `ServerError`; env failures (5xx) are logged, as the native server does."""
    err = error_from(exc)
    if err.status >= 500:
        logger.warning("env call failed: %s: %s", err.type_name, err.message)
    return err


def _ws_code(err: ServerError, *, opening: bool) -> ErrorCode:
    """The OpenEnv error code of `err` (see the module docstring's table)."""
    if err.status in (429, 503):
        return ErrorCode.CAPACITY_REACHED
    if opening:
        return ErrorCode.FACTORY_ERROR
    if err.type_name == "InvalidJSON":
        return ErrorCode.INVALID_JSON
    if err.type_name == "UnknownMessageType":
        return ErrorCode.UNKNOWN_TYPE
    if err.type_name == "SessionNotFound":
        return ErrorCode.SESSION_ERROR
    if err.status in (413, 422):
        return ErrorCode.VALIDATION_ERROR
    return ErrorCode.EXECUTION_ERROR


def _error_frame(err: ServerError, *, opening: bool) -> str:
    data: dict[str, Any] = {
        "message": err.message,
        "code": _ws_code(err, opening=opening).value,
        "type": err.type_name,
        "status": err.status,
    }
    if err.headers and "Retry-After" in err.headers:
        data["retry_after"] = int(err.headers["Retry-After"])
    return _frame("error", data)


_Handler = Callable[[Request, EnvSpec], Awaitable[Response]]


@dataclass
class _Episode:
    """OpenEnv's state of one WebSocket session's current episode."""

    env_id: str
    id: str | None = None
    step_count: int = 0

    def state(self) -> dict[str, Any]:
        return {"episode_id": self.id, "step_count": self.step_count, "env_id": self.env_id}


class _OpenEnvFrontEnd:
    """The handlers of the OpenEnv routes over one store (see the module docstring)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    # -- WebSocket sessions ---------------------------------------------------------------
    async def session(self, websocket: WebSocket) -> None:
        """One WebSocket connection: one session, until ``close`` or a disconnect."""
        env_id = websocket.path_params["env_id"]
        client = client_of(websocket.scope)
        await websocket.accept()
        try:
            session = await self.store.open_session(env_id, {}, client)
        except Exception as exc:
            with contextlib.suppress(WebSocketDisconnect):
                await websocket.send_text(_error_frame(_failure(exc), opening=True))
                await websocket.close()
            return
        episode = _Episode(env_id)
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                try:
                    reply = await self._answer(session, episode, client, message)
                except Exception as exc:  # every failure is an error frame, as in OpenEnv
                    err = _failure(exc)
                    await websocket.send_text(_error_frame(err, opening=False))
                    if err.type_name == "SessionNotFound":
                        break
                    continue
                if reply is None:  # a close message
                    break
                await websocket.send_text(reply)
        except WebSocketDisconnect:
            pass
        finally:
            await self.store.close_session(session)
        if WebSocketState.DISCONNECTED not in (websocket.client_state, websocket.application_state):
            with contextlib.suppress(WebSocketDisconnect):  # the client may close first
                await websocket.close()

    async def _answer(
        self, session: Session, episode: _Episode, client: str, message: Message
    ) -> str | None:
        """The reply frame to one received ASGI message (`None` for ``close``)."""
        self.store.check_rate(client)
        raw = message.get("text")
        if raw is None:
            data = message.get("bytes") or b""
            self.store.check_body_size(len(data))
            try:
                raw = data.decode()
            except UnicodeDecodeError as exc:
                raise ServerError(400, "InvalidJSON", f"Invalid JSON: {exc}") from exc
        else:
            self.store.check_body_size(len(raw.encode()))
        kind, data = _parse_message(raw)
        if kind == "close":
            return None
        if kind == "reset":
            seed, options, episode_id = _reset_args(data)
            frame = await self.store.call(
                session, lambda s: _frame("observation", _reset(s, seed, options))
            )
            episode.id, episode.step_count = episode_id or uuid.uuid4().hex, 0
            return frame
        if kind == "step":
            text = _action_text(self.store, data)
            frame = await self.store.call(session, lambda s: _frame("observation", _step(s, text)))
            episode.step_count += 1
            return frame
        return await self.store.call(session, lambda s: _frame("state", episode.state()))

    # -- HTTP -----------------------------------------------------------------------------
    def endpoint(self, handler: _Handler) -> Callable[[Request], Awaitable[Response]]:
        """A route for `handler`, called with the request and its env's spec once the env id
        is allowed and known; every error becomes ``{"detail", "type"}`` with its status."""

        async def answer(request: Request) -> Response:
            try:
                env_id = request.path_params["env_id"]
                self.store.check_allowed(env_id)
                env_spec = await anyio.to_thread.run_sync(spec, env_id)  # a family may import
                return await handler(request, env_spec)
            except Exception as exc:
                err = _failure(exc)
                body = {"detail": err.message, "type": err.type_name}
                return JSONResponse(body, status_code=err.status, headers=err.headers)

        return answer

    async def health(self, request: Request, env_spec: EnvSpec) -> Response:
        return JSONResponse({"status": "healthy"})

    async def metadata(self, request: Request, env_spec: EnvSpec) -> Response:
        return JSONResponse(
            {
                "name": request.path_params["env_id"],
                "description": env_spec.description,
                "readme_content": None,
                "version": None,
                "author": None,
                "documentation_url": None,
            }
        )

    async def schema(self, request: Request, env_spec: EnvSpec) -> Response:
        return JSONResponse(_schemas(self.store.max_action_chars))

    async def state(self, request: Request, env_spec: EnvSpec) -> Response:
        return JSONResponse(_Episode(request.path_params["env_id"]).state())

    async def reset(self, request: Request, env_spec: EnvSpec) -> Response:
        seed, options, _ = _reset_args(await read_json_body(request))
        session = await self.store.open_session(
            request.path_params["env_id"], {}, client_of(request.scope)
        )
        try:
            payload = await self.store.call(session, lambda s: to_json(_reset(s, seed, options)))
        finally:
            await self.store.close_session(session)
        return Response(payload, media_type="application/json")

    async def step(self, request: Request, env_spec: EnvSpec) -> Response:
        body = await read_json_body(request)
        _action_text(self.store, json_field(body, "action", dict, required=True))
        raise ServerError(
            409,
            "ResetNeededError",
            "HTTP /step runs on a fresh env, as in OpenEnv, and a fresh xpgym env has no "
            "episode to step: play episodes over the WebSocket session at .../ws",
        )


def openenv_routes(store: SessionStore) -> list[BaseRoute]:
    """The routes serving every allowed env id at ``/openenv/<env id>`` (module docstring)."""
    front = _OpenEnvFrontEnd(store)
    return [
        WebSocketRoute(PREFIX + "/ws", front.session),
        Route(PREFIX + "/health", front.endpoint(front.health), methods=["GET"]),
        Route(PREFIX + "/metadata", front.endpoint(front.metadata), methods=["GET"]),
        Route(PREFIX + "/schema", front.endpoint(front.schema), methods=["GET"]),
        Route(PREFIX + "/state", front.endpoint(front.state), methods=["GET"]),
        Route(PREFIX + "/reset", front.endpoint(front.reset), methods=["POST"]),
        Route(PREFIX + "/step", front.endpoint(front.step), methods=["POST"]),
    ]
