"""`OpenEnvEnv`: the env of any OpenEnv server as an xpgym `Env`.

``xpgym.make("openenv:http://HOST:PORT")`` returns one (the URL may carry a path prefix,
``openenv:http://host/openenv/game:X-v0``). It speaks OpenEnv's session protocol: one
WebSocket at ``<url>/ws`` per episode stream (the server makes one env per connection),
JSON messages ``{"type": "reset", "data": {...}}``, ``{"type": "step", "data": <action>}``,
``{"type": "state"}``, ``{"type": "close"}``, answered by ``{"type": "observation", "data":
{"observation": {...}, "reward": ..., "done": ...}}``, ``{"type": "state", "data": {...}}``
or ``{"type": "error", "data": {"message": ..., "code": ...}}``. The env's JSON schemas come
from ``GET <url>/schema`` once, before the first reset.

Text in, text out
-----------------

* **Action.** If the env's action model has a single field besides ``metadata`` and that
  field is a string (a chat env's ``{"message": ...}``), the model's text goes into it as
  is. Otherwise the text must hold the action as JSON: its first JSON object (text around
  it is ignored) is the action, checked locally against the action schema
  (`xpgym.core.tools.calls.validate_arguments`) and by the server's model.
* **Observation.** If the observation model has exactly one string field besides
  ``done``, ``reward`` and ``metadata`` (a chat env's reply, xpgym's ``text``), the
  observation is that string; otherwise it is the JSON of the observation's fields
  (without ``metadata``, keys sorted). The observation's fields are in
  ``info["openenv_observation"]``, the reply's ``metadata`` (when the env sent some) in
  ``info["openenv_metadata"]``, and an object field ``info`` (xpgym's own OpenEnv server
  puts the env's info there) is merged into the step's info.
* **Reward and end.** ``reward`` is the reply's reward (``None`` counts as 0.0);
  ``terminated`` is the reply's ``done``. ``truncated`` is `False`, unless the reply's
  ``metadata`` says ``{"terminated": false, "truncated": true}`` for a done episode (as
  xpgym's own OpenEnv server does when a limit ended it): OpenEnv itself has no limits;
  turn and context limits are xpgym's wrappers' and the collector's.

Whose fault
-----------

* A bad action is the policy's: text that is not the JSON of an action, or an action the
  server's model refused (``VALIDATION_ERROR``), gives an error observation, reward 0.0,
  ``info["invalid_action"] = True`` and ``info["action_error"]``; the episode goes on.
* Everything else that fails in a step is the remote side's: the env's step raised
  (``EXECUTION_ERROR``), the connection dropped or timed out. The step returns ``(last
  observation, 0.0, False, True, info)`` with `remote_failure_info`'s ``error`` and
  ``infra_error`` marker, so the episode is ``outcome="infra_error"`` and kept out of the
  gradient (`xpgym.core.errors`). The connection (and with it the server's session) is
  dropped; the next `reset` opens a new one.
* `reset` raises `RemoteEnvError` for a remote failure: the server is unreachable (after
  ``max_retries`` retries of the connection), full (``CAPACITY_REACHED``), or its env
  failed. A reset on a connection that the server closed since the last episode reconnects
  once.

Groups: `get_state` after a reset is the reset's arguments, and `set_state` of such a
snapshot resets again with them, so a group of episodes starts from the same state when the
remote env's reset is a function of its seed. A snapshot taken mid-episode cannot be
restored (the state lives on the server): `set_state` raises `ValueError`, and `can_fork`
is `False`.

Authentication: with ``token=...`` (default ``XPGYM_SERVER_TOKEN``) the schema request and
the WebSocket handshake carry ``Authorization: Bearer <token>``; OpenEnv's own servers
ignore it, xpgym's check it.

This module imports ``websockets`` (a dependency of ``uvicorn``, in the ``remote`` extra).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from xpgym.core.registry import EnvSpec
from xpgym.core.tools.calls import random_value, validate_arguments
from xpgym.remote import OPENENV_SCHEME
from xpgym.remote.guard import is_loopback
from xpgym.remote.transport import (
    HttpConnection,
    RemoteClientEnv,
    RemoteEnvError,
    check_server_url,
    remote_failure_info,
    resolve_token,
)

__all__ = ["OpenEnvEnv", "openenv_spec", "parse_openenv_id"]

logger = logging.getLogger(__name__)

_PREFIX = f"{OPENENV_SCHEME}:"
_EXAMPLE = "openenv:http://127.0.0.1:8000"
_OBSERVATION_EXTRAS = ("done", "reward", "metadata")
# Error codes after which OpenEnv's server closes the connection (the session is gone).
_SESSION_ENDING_CODES = ("CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR")
_CLOSE_TIMEOUT_S = 2.0  # a closing handshake takes milliseconds; never wait long for a dead one


def parse_openenv_id(env_id: str) -> str:
    """The server URL of an ``"openenv:<base url>"`` id.

    Raises:
        ValueError: not an ``openenv:`` id, no URL after it, or not an ``http(s)://HOST``
            URL without credentials; the message shows a good id.
    """
    if not env_id.startswith(_PREFIX):
        raise ValueError(f"{env_id!r} is not an OpenEnv id ('openenv:<server url>')")
    url = env_id[len(_PREFIX) :].rstrip("/")
    if not url:
        raise ValueError(
            f"OpenEnv id {env_id!r} names no server: write the server's base URL after "
            f"'openenv:', e.g. {_EXAMPLE!r}"
        )
    check_server_url(url, _EXAMPLE)
    return url


def openenv_spec(env_id: str) -> EnvSpec:
    """The `EnvSpec` of an ``openenv:`` id (the scheme's resolver): builds an `OpenEnvEnv`."""
    url = parse_openenv_id(env_id)
    return EnvSpec(
        id=env_id,
        entry_point="xpgym.remote.openenv_client:OpenEnvEnv",
        kwargs={"url": url},
        description=f"the OpenEnv env served by {url}",
    )


def _string_field(schema: dict[str, Any], extras: tuple[str, ...], *, alone: bool) -> str | None:
    """The name of the schema's one string property besides `extras` (with `alone`: its one
    property at all, and a string), or `None`."""
    fields = {k: v for k, v in schema.get("properties", {}).items() if k not in extras}
    strings = [k for k, v in fields.items() if isinstance(v, dict) and v.get("type") == "string"]
    if len(strings) != 1 or (alone and len(fields) != 1):
        return None
    return strings[0]


class OpenEnvEnv(RemoteClientEnv):
    """An OpenEnv server's env (see the module docstring for the mapping and failures).

    Args:
        url: The server's base URL, ``http(s)://HOST:PORT`` (optionally with a path prefix).
        timeout: Seconds to wait for each reply, the env's own step included.
        connect_timeout: Seconds to open a connection (HTTP or WebSocket handshake).
        max_retries: Retries of a refused or dropped connection attempt (never of a sent
            message: a step is not repeated).
        token: Bearer token (default: ``XPGYM_SERVER_TOKEN`` if set, else none).
        max_message_bytes: Largest reply accepted.

    Attributes:
        action_field: The action's single string field the text goes into, or `None` when
            the text is the action's JSON (known after the first reset).
        observation_field: The observation's single string field, or `None` when the
            observation is JSON text.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        max_retries: int = 2,
        token: str | None = None,
        max_message_bytes: int = 100 * 2**20,
    ) -> None:
        token = resolve_token(token)
        self._keep_options(
            url=url,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_retries=max_retries,
            token=token,
            max_message_bytes=max_message_bytes,
        )
        self.url = url.rstrip("/")
        parts = check_server_url(self.url, _EXAMPLE)
        scheme = "wss" if parts.scheme == "https" else "ws"
        self._ws_url = f"{scheme}://{parts.netloc}{parts.path}/ws"
        self._loopback = is_loopback(parts.hostname or "")
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_retries = max_retries
        self.max_message_bytes = max_message_bytes
        self._headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        self._http = HttpConnection(
            self.url, timeout=timeout, connect_timeout=connect_timeout, max_retries=max_retries
        )
        self._ws: ClientConnection | None = None
        self._ws_stack: contextlib.ExitStack | None = None  # closes `_ws`
        self._lock = threading.Lock()
        self.action_field: str | None = None
        self.observation_field: str | None = None
        self._action_schema: dict[str, Any] = {}
        self._reset_data: dict[str, Any] = {}
        self._steps = 0
        self._last_obs = ""

    # -- Env API -------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode: ``{"type": "reset", "data": {**options, "seed": seed}}``.

        `seed` (when given) also reseeds `np_random`, which only `sample_random_action`
        uses; `options` are the remote env's reset keyword arguments.

        Raises:
            RemoteEnvError: the server is unreachable or full, or its env's reset failed.
        """
        super().reset(seed=seed)
        data = dict(options or {})
        if seed is not None:
            data["seed"] = seed
        with self._lock:
            return self._start(data)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Send the action; a bad action is the policy's, a remote failure truncates the
        episode with the infrastructure marker (module docstring)."""
        with self._lock:
            payload, problem = self._action_payload(action)
            if payload is not None:
                try:
                    reply = self._exchange({"type": "step", "data": payload})
                except RemoteEnvError as exc:
                    if exc.error_type != "VALIDATION_ERROR":
                        self._drop()
                        return self._last_obs, 0.0, False, True, remote_failure_info(exc)
                    problem = f"the env refused the action: {exc}"
                else:
                    self._steps += 1
                    return self._result(reply)
            observation = f"Invalid action: {problem}"
            info = {"invalid_action": True, "action_error": problem}
            return observation, 0.0, False, False, info

    def sample_random_action(self) -> str:
        """A random action drawn by `np_random`: a short random text for a single string
        field, else the JSON of a random value of the action schema (it may be invalid)."""
        with self._lock:
            self._load_schema()
            if self.action_field is not None:
                return str(random_value({"type": "string"}, self.np_random))
            fields = {
                k: v
                for k, v in self._action_schema.get("properties", {}).items()
                if k != "metadata"
            }
            value = random_value({"type": "object", "properties": fields}, self.np_random)
            return json.dumps(value)

    def get_state(self) -> dict[str, Any]:
        """``{"reset": the last reset's data, "steps": steps since}``: restorable by
        `set_state` only when taken right after a reset (``steps == 0``)."""
        return {"reset": dict(self._reset_data), "steps": self._steps}

    def set_state(self, state: dict[str, Any]) -> None:
        """Reset the remote env again with a snapshot's reset data (a group's start).

        Raises:
            ValueError: the snapshot was taken mid-episode; its state is on the server.
            RemoteEnvError: the reset failed remotely.
        """
        if state["steps"] != 0:
            raise ValueError(
                f"{self}: an OpenEnv env cannot be restored mid-episode (its state lives on "
                f"the server, {state['steps']} steps in); only a snapshot taken right after "
                "reset can be replayed"
            )
        with self._lock:
            self._start(dict(state["reset"]))

    def can_fork(self) -> bool:
        """`False`: the episode's state lives on the server (see `set_state`)."""
        return False

    def remote_state(self) -> dict[str, Any]:
        """The remote env's ``state`` (``{"episode_id", "step_count", ...}``).

        Raises:
            RemoteEnvError: no episode is running, or the request failed.
        """
        with self._lock:
            if self._ws is None:
                raise RemoteEnvError(
                    f"{self}: no session; call reset() first", status=None, error_type="NoSession"
                )
            return dict(self._exchange({"type": "state"}).get("data") or {})

    def close(self) -> None:
        """End the session (``{"type": "close"}``, best effort) and close the connections."""
        with self._lock:
            ws = self._ws
            if ws is not None:
                try:
                    ws.send(json.dumps({"type": "close"}))
                except (ConnectionClosed, OSError) as exc:
                    logger.debug("closing the session of %s failed: %s", self, exc)
            self._drop()
            self._http.close()

    def __str__(self) -> str:
        return f"<OpenEnvEnv({self.url})>"

    __repr__ = __str__

    # -- protocol ------------------------------------------------------------------------
    def _start(self, data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Reset on the open connection (reconnecting once if the server closed it since)
        or on a new one."""
        self._load_schema()
        reused = self._ws is not None
        message = {"type": "reset", "data": data}
        try:
            reply = self._exchange(message)
        except RemoteEnvError as exc:
            lost = isinstance(exc.__cause__, (ConnectionClosed, OSError)) and not isinstance(
                exc.__cause__, TimeoutError
            )
            if not (reused and lost):
                raise
            logger.info("the connection of %s was closed; opening a new one", self)
            reply = self._exchange(message)
        self._reset_data = data
        self._steps = 0
        observation, _, _, _, info = self._result(reply)
        return observation, info

    def _load_schema(self) -> None:
        if self._action_schema:
            return
        reply = self._http.request("GET", "/schema", headers=self._headers)
        schemas = reply.json(f"GET {self.url}/schema")
        if reply.status >= 400 or not isinstance(schemas, dict) or "action" not in schemas:
            raise RemoteEnvError(
                f"{self.url}/schema: HTTP {reply.status}, no action schema (is this an OpenEnv "
                f"server?): {reply.body[:200]!r}",
                status=reply.status,
                error_type="BadResponse",
            )
        self._action_schema = schemas["action"]
        observation = schemas.get("observation") or {}
        self.action_field = _string_field(self._action_schema, ("metadata",), alone=True)
        self.observation_field = _string_field(observation, _OBSERVATION_EXTRAS, alone=False)
        self._metadata = {
            "multi_turn": True,
            "protocol": "openenv",
            "url": self.url,
            "action_schema": self._action_schema,
            "observation_schema": observation,
            "action_field": self.action_field,
            "observation_field": self.observation_field,
        }

    def _action_payload(self, action: str) -> tuple[dict[str, Any] | None, str | None]:
        """``(action data, None)`` or ``(None, what is wrong with the text)``."""
        if self.action_field is not None:
            return {self.action_field: action}, None
        start = action.find("{")
        if start < 0:
            return None, "no JSON object found: write the action as a JSON object"
        try:
            value, _ = json.JSONDecoder().raw_decode(action, start)
        except (ValueError, RecursionError) as exc:
            return None, f"invalid JSON: {exc}"
        problem = validate_arguments(value, self._action_schema)
        return (value, None) if problem is None else (None, problem)

    def _result(self, reply: dict[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        data = reply.get("data") or {}
        fields = {k: v for k, v in (data.get("observation") or {}).items() if k != "metadata"}
        if self.observation_field is not None and isinstance(
            fields.get(self.observation_field), str
        ):
            observation = fields[self.observation_field]
        else:
            observation = json.dumps(fields, sort_keys=True)
        remote_info = fields.get("info")
        info: dict[str, Any] = {
            **(remote_info if isinstance(remote_info, dict) else {}),
            "openenv_observation": fields,
        }
        ends = data.get("metadata") or {}
        if ends:
            info["openenv_metadata"] = ends
        terminated, truncated = bool(data.get("done")), False
        if terminated and (ends.get("terminated") is False and ends.get("truncated") is True):
            terminated, truncated = False, True  # a limit ended it, as the server says
        reward = data.get("reward")
        self._last_obs = observation
        return observation, 0.0 if reward is None else float(reward), terminated, truncated, info

    def _exchange(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send `message` and read its reply (an error reply raises `RemoteEnvError` with
        its code as `error_type`); a failed connection is dropped."""
        ws = self._socket()
        # A refusal (error frame, then close) may beat the send: its frame is read below.
        with contextlib.suppress(ConnectionClosed, OSError):
            ws.send(json.dumps(message))
        try:
            raw = ws.recv(timeout=self.timeout)
        except TimeoutError as exc:
            self._drop()  # a late reply would pair with the next request
            raise RemoteEnvError(
                f"{message['type']} at {self._ws_url} timed out after {self.timeout:g} s "
                "(raise timeout=... above the env's slowest call)",
                status=None,
                error_type="TimeoutError",
            ) from exc
        except (ConnectionClosed, OSError) as exc:
            self._drop()
            raise RemoteEnvError(
                f"{message['type']} at {self._ws_url}: the connection was lost: "
                f"{type(exc).__name__}: {exc}",
                status=None,
                error_type=type(exc).__name__,
            ) from exc
        try:
            reply = json.loads(raw)
        except ValueError as exc:
            self._drop()
            raise RemoteEnvError(
                f"{self._ws_url} sent a non-JSON reply {str(raw)[:200]!r}",
                status=None,
                error_type="BadResponse",
            ) from exc
        if reply.get("type") == "error":
            data = reply.get("data") or {}
            code = str(data.get("code", "UNKNOWN"))
            if code in _SESSION_ENDING_CODES:
                self._drop()
            details = f" {data['errors']}" if data.get("errors") else ""
            raise RemoteEnvError(
                f"{self.url}: {code}: {data.get('message')}{details}",
                status=None,
                error_type=code,
            )
        return reply

    def _socket(self) -> ClientConnection:
        """The open WebSocket, or a new one (refused attempts retried with a backoff)."""
        if self._ws is not None:
            return self._ws
        for attempt in range(self.max_retries + 1):
            try:
                stack = contextlib.ExitStack()
                self._ws = stack.enter_context(
                    connect(
                        self._ws_url,
                        open_timeout=self.connect_timeout,
                        additional_headers=self._headers,
                        max_size=self.max_message_bytes,
                        close_timeout=_CLOSE_TIMEOUT_S,
                        proxy=None if self._loopback else True,
                    )
                )
                self._ws_stack = stack
                return self._ws
            except InvalidStatus as exc:
                status = exc.response.status_code
                raise RemoteEnvError(
                    f"{self._ws_url} refused the WebSocket: HTTP {status}",
                    status=status,
                    error_type="InvalidStatus",
                ) from exc
            except (OSError, InvalidHandshake) as exc:  # TimeoutError is an OSError
                if attempt == self.max_retries or isinstance(exc, TimeoutError):
                    raise RemoteEnvError(
                        f"cannot connect to {self._ws_url}: {type(exc).__name__}: {exc} "
                        f"(after {attempt + 1} attempts; is the server running?)",
                        status=None,
                        error_type=type(exc).__name__,
                    ) from exc
                time.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _drop(self) -> None:
        """Close and forget the WebSocket (the server ends the session with it)."""
        stack, self._ws, self._ws_stack = self._ws_stack, None, None
        if stack is not None:
            stack.close()
