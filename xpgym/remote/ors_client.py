r"""`ORSEnv`: an env of any ORS (Open Reward Standard) server as an xpgym tool env.

``xpgym.make("ors:http://HOST:PORT/<env name>")`` returns one (the URL may carry a path
prefix; the env name is what follows the last ``/``). It speaks ORS over HTTP: a session id
from ``POST /create_session`` (server-sent events), the task from ``POST /create`` (header
``X-Session-ID``), then ``GET /<env>/prompt``, ``GET /<env>/task_tools`` and one ``POST
/<env>/call`` per tool call (its reply is a server-sent event stream ending in ``end``, whose
data is ``{"ok": true, "output": {"blocks", "reward", "finished", "metadata"}}`` or ``{"ok":
false, "error": ...}``), and ``POST /delete`` at the end.

Episodes
--------

`reset` ends the previous session and opens one on a task: ``options={"task_spec": {...}}``
plays that task, ``options={"index": i}`` (with ``"split"``, default the env's first
``train`` split, else its first) plays task ``i`` of the split, and without either the index
is drawn from `np_random` (so ``reset(seed=s)`` picks the same task for the same seed).

* **Observation.** The reset observation is the prompt's text blocks (joined by blank
  lines) followed, unless ``instructions=False``, by the tool list in xpgym's JSON
  function-call format (`xpgym.core.tools.calls.format_function_instructions`). A step's
  observation is the tool output's text blocks. Image blocks go to ``info["images"]`` as
  data URLs, as vision envs hand images over.
* **Tools.** ``info["tools"]`` at reset holds the env's tools as function schemas
  (`xpgym.core.tools.calls.function_schema`, the ORS ``input_schema`` as ``parameters``),
  with ``info["tool_instructions"]`` the text appended, as `ToolEnvWrapper` gives them for
  a chat template's ``tools=``; `metadata` lists them too once a session is open.
* **Action.** The model's text holds a call, ``<tool_call>{"name": ..., "arguments":
  {...}}</tool_call>`` (`xpgym.core.tools.calls.find_function_calls`: the first block
  counts, ``"parameters"`` and string arguments are accepted, an unclosed last block is
  read). The call runs on the server and its output is the next observation.
* **Reward and end.** A step's reward is the output's ``reward`` (``None`` counts as 0.0);
  ``terminated`` is its ``finished``. ``truncated`` is `False`, unless the output's
  ``metadata`` says ``{"terminated": false, "truncated": true}`` for a finished episode (as
  xpgym's own ORS server does when a limit ended it): ORS itself has no limits; turn and
  context limits are xpgym's wrappers' and the collector's.
* **Info** of a step, as `ToolEnvWrapper` writes it: ``tool_calls`` (``[{"name",
  "arguments", "ok", "info"}]``, the output's ``metadata`` in ``info``), ``parsed_action``
  (the call's text) and ``invalid_action``; an object ``metadata["info"]`` (xpgym's own
  ORS server sends the env's info there) is merged over them, since the env's own judgement
  of the call (its ``invalid_action``, ``parsed_action``, ``correct``) is what a local env
  would report.

Whose fault
-----------

* The policy's: text without a ``<tool_call>`` block, a malformed block, an unknown tool,
  arguments that do not match the tool's schema (checked locally first with
  `xpgym.core.tools.calls.validate_arguments`), or a call the server refused (``{"ok":
  false, ...}``). The observation says what was wrong and lists the tools, the reward is
  0.0, ``info["invalid_action"] = True``, and the episode goes on.
* The remote side's: the server is unreachable, drops the connection, times out, answers
  an error status (5xx; 404 once the session is gone), or the tool raised on the server
  (an ``error`` event). The step returns ``(last observation, 0.0, False, True, info)`` with
  `xpgym.remote.transport.remote_failure_info` (the ``infra_error`` marker), so the episode
  is ``outcome="infra_error"`` and kept out of the gradient. The session is abandoned; the
  next `reset` opens another.
* `reset` raises `RemoteEnvError` for any remote failure (a failing reset raises).

Groups: `get_state` is the episode's task spec (and the steps taken); `set_state` of a
snapshot taken at a reset opens a new session on the same task, which is exactly the same
start. A mid-episode snapshot cannot be restored (`ValueError`); `can_fork` is `False`.

Authentication: with ``token=...`` (default ``XPGYM_SERVER_TOKEN``) every request carries
``X-API-Key: <token>`` (ORS's header) and ``Authorization: Bearer <token>`` (xpgym's).

Only the standard library is used (`xpgym.remote.transport.HttpConnection`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import urllib.parse
from typing import Any

from xpgym.core.registry import EnvSpec
from xpgym.core.tools.calls import (
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    find_function_calls,
    format_function_instructions,
    function_schema,
    random_value,
    validate_arguments,
)
from xpgym.remote import ORS_SCHEME
from xpgym.remote.transport import (
    HttpConnection,
    HttpReply,
    RemoteClientEnv,
    RemoteEnvError,
    check_server_url,
    remote_failure_info,
    resolve_token,
)

__all__ = ["ORSEnv", "ors_spec", "parse_ors_id"]

logger = logging.getLogger(__name__)

_PREFIX = f"{ORS_SCHEME}:"
_EXAMPLE = "ors:http://127.0.0.1:8080/mathenv"


def parse_ors_id(env_id: str) -> tuple[str, str]:
    """Split ``"ors:<server url>/<env name>"`` into ``(url, env_name)``.

    Raises:
        ValueError: not an ``ors:`` id, no env name after the URL, or not an
            ``http(s)://HOST`` URL without credentials; the message shows a good id.
    """
    if not env_id.startswith(_PREFIX):
        raise ValueError(f"{env_id!r} is not an ORS id ('ors:<server url>/<env name>')")
    rest = env_id[len(_PREFIX) :]
    url, _, name = rest.rpartition("/")
    if not name or urllib.parse.urlsplit(rest).path in ("", "/"):
        raise ValueError(
            f"ORS id {env_id!r} names no env: write the env's name after the server URL, "
            f"e.g. {_EXAMPLE!r}"
        )
    check_server_url(url, _EXAMPLE)
    return url, name


def ors_spec(env_id: str) -> EnvSpec:
    """The `EnvSpec` of an ``ors:`` id (the scheme's resolver): builds an `ORSEnv`."""
    url, name = parse_ors_id(env_id)
    return EnvSpec(
        id=env_id,
        entry_point="xpgym.remote.ors_client:ORSEnv",
        kwargs={"url": url, "env_name": name},
        description=f"the ORS env {name!r} served by {url}",
    )


def sse_events(body: bytes) -> list[tuple[str, str]]:
    """The ``(event, data)`` pairs of a server-sent event stream (comments skipped; the data
    lines of one event joined by newlines)."""
    events: list[tuple[str, str]] = []
    event = ""
    data: list[str] = []
    for line in body.decode("utf-8", "replace").splitlines():
        if not line:
            if event or data:
                events.append((event or "message", "\n".join(data)))
            event, data = "", []
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
    if event or data:
        events.append((event or "message", "\n".join(data)))
    return events


def _blocks(blocks: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """ORS blocks as ``(text of the text blocks, data URLs of the image blocks)``."""
    texts = [b.get("text", "") for b in blocks if b.get("type", "text") == "text"]
    images = [
        f"data:{b.get('mimeType', 'image/png')};base64,{b.get('data', '')}"
        for b in blocks
        if b.get("type") == "image"
    ]
    return "\n\n".join(texts), images


class ORSEnv(RemoteClientEnv):
    """An env of an ORS server, played through tool calls (see the module docstring).

    Args:
        url: The server's base URL, ``http(s)://HOST:PORT`` (optionally with a path prefix).
        env_name: The env's name on the server (``GET /list_environments``).
        split: The split tasks are drawn from (default: the first ``train`` split, else the
            first split).
        instructions: Append the tool list and call format to the reset observation.
        timeout: Seconds each request may take, a tool call included.
        connect_timeout: Seconds to open a connection.
        max_retries: Retries of refused or dropped requests that are safe to repeat (never
            of a tool call or a session's creation).
        token: API key (default: ``XPGYM_SERVER_TOKEN`` if set, else none).

    Attributes:
        session_id: The ORS session, or `None` between episodes and after a failure.
        task_spec: The task of the current episode.
        tools: The current episode's tools as function schemas.
    """

    def __init__(
        self,
        url: str,
        env_name: str,
        *,
        split: str | None = None,
        instructions: bool = True,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        max_retries: int = 2,
        token: str | None = None,
    ) -> None:
        token = resolve_token(token)
        self._keep_options(
            url=url,
            env_name=env_name,
            split=split,
            instructions=instructions,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_retries=max_retries,
            token=token,
        )
        if not env_name or "/" in env_name:
            raise ValueError(f"env_name must be an ORS env's name, got {env_name!r}")
        self.url = url.rstrip("/")
        check_server_url(self.url, _EXAMPLE)
        self.env_name = env_name
        self.split = split
        self.instructions = instructions
        self._auth = (
            {} if token is None else {"X-API-Key": token, "Authorization": f"Bearer {token}"}
        )
        self._http = HttpConnection(
            self.url, timeout=timeout, connect_timeout=connect_timeout, max_retries=max_retries
        )
        self._env_path = "/" + urllib.parse.quote(env_name, safe="")
        self._lock = threading.Lock()
        self._num_tasks: dict[str, int] = {}
        self.session_id: str | None = None
        self.task_spec: dict[str, Any] | None = None
        self.tools: list[dict[str, Any]] = []
        self._steps = 0
        self._last_obs = ""

    # -- Env API -------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """End the previous session and start one on a task (module docstring).

        Raises:
            RemoteEnvError: any remote failure.
            ValueError: ``options`` with an unknown key.
        """
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - {"task_spec", "split", "index"}
        if unknown:
            raise ValueError(
                f"{self}: unknown reset options {sorted(unknown)}; use task_spec, or split "
                "and index"
            )
        with self._lock:
            self._end_session()
            if "task_spec" in options:
                task_spec = options["task_spec"]
            else:
                task_spec = self._task(options.get("split"), options.get("index"))
            return self._start(task_spec)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Run the first ``<tool_call>`` of `action` on the server (module docstring)."""
        with self._lock:
            calls = find_function_calls(action) if TOOL_CALL_OPEN in action else []
            if not calls:
                return self._invalid(
                    "No tool call found. Call a tool as "
                    f'{TOOL_CALL_OPEN}{{"name": ..., "arguments": {{...}}}}{TOOL_CALL_CLOSE}.',
                    None,
                )
            call = calls[0]
            record = {"name": call.name, "arguments": dict(call.arguments), "ok": False}
            schemas = {t["function"]["name"]: t["function"]["parameters"] for t in self.tools}
            if call.error is not None:
                return self._invalid(f"Invalid tool call: {call.error}.", call.raw, record)
            if call.name not in schemas:
                return self._invalid(f"Unknown tool {call.name!r}.", call.raw, record)
            problem = validate_arguments(call.arguments, schemas[str(call.name)])
            if problem is not None:
                message = f"Invalid call of tool {call.name!r}: {problem}."
                return self._invalid(message, call.raw, record)
            try:
                result = self._call_tool(str(call.name), call.arguments)
            except RemoteEnvError as exc:
                self._abandon_session()
                return self._last_obs, 0.0, False, True, remote_failure_info(exc)
            self._steps += 1
            if not result.get("ok"):
                message = f"Tool {call.name!r} failed: {result.get('error')}."
                return self._invalid(message, call.raw, record)
            output = result.get("output") or {}
            observation, images = _blocks(output.get("blocks") or [])
            metadata = output.get("metadata") or {}
            record.update(ok=True, info={"metadata": metadata})
            remote_info = metadata.get("info")
            info: dict[str, Any] = {
                "tool_calls": [record],
                "parsed_action": call.raw,
                "invalid_action": False,
                **(remote_info if isinstance(remote_info, dict) else {}),
            }
            if images:
                info["images"] = images
            terminated, truncated = bool(output.get("finished")), False
            if terminated and metadata.get("terminated") is False and metadata.get("truncated"):
                terminated, truncated = False, True  # a limit ended it, as the server says
            reward = 0.0 if output.get("reward") is None else float(output["reward"])
            self._last_obs = observation
            return observation, reward, terminated, truncated, info

    def sample_random_action(self) -> str:
        """A call of a random tool of this episode with random arguments from its schema,
        drawn by `np_random` (it may be invalid)."""
        if not self.tools:
            raise RuntimeError(f"{self}: call reset() first; the tools come with the task")
        function = self.tools[int(self.np_random.integers(len(self.tools)))]["function"]
        arguments = random_value(function["parameters"], self.np_random)
        call = json.dumps({"name": function["name"], "arguments": arguments})
        return f"{TOOL_CALL_OPEN}{call}{TOOL_CALL_CLOSE}"

    def get_state(self) -> dict[str, Any]:
        """``{"task_spec": this episode's task, "steps": tool calls run since its start}``."""
        return {"task_spec": self.task_spec, "steps": self._steps}

    def set_state(self, state: dict[str, Any]) -> None:
        """Start a new session on a snapshot's task (a group's start).

        Raises:
            ValueError: the snapshot was taken mid-episode; its state is on the server.
            RemoteEnvError: a remote failure.
        """
        if state["steps"] != 0:
            raise ValueError(
                f"{self}: an ORS env cannot be restored mid-episode (its state lives on the "
                f"server, {state['steps']} tool calls in); only a snapshot taken right after "
                "reset can be replayed"
            )
        with self._lock:
            self._end_session()
            self._start(state["task_spec"])

    def can_fork(self) -> bool:
        """`False`: the episode's state lives on the server (see `set_state`)."""
        return False

    def close(self) -> None:
        """Delete the session (best effort) and close the connection."""
        with self._lock:
            self._end_session()
            self._http.close()

    def __str__(self) -> str:
        return f"<ORSEnv({self.env_name!r} at {self.url})>"

    __repr__ = __str__

    # -- protocol ------------------------------------------------------------------------
    def _start(self, task_spec: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Open a session on `task_spec`; return the reset observation and info."""
        events = sse_events(self._request("POST", "/create_session", {}).body)
        sid = next((data.strip() for event, data in events if event == "task_id"), "")
        if not sid:
            raise RemoteEnvError(
                f"{self.url}/create_session sent no session id: {events!r:.200}",
                status=None,
                error_type="BadResponse",
            )
        self.session_id = sid
        body = {"env_name": self.env_name, "task_spec": task_spec}
        self._request("POST", "/create", body, retries=0)
        self.task_spec = task_spec
        self._steps = 0
        prompt = self._json("GET", f"{self._env_path}/prompt")
        tools = self._json("GET", f"{self._env_path}/task_tools").get("tools") or []
        self.tools = [
            function_schema(
                t["name"],
                t.get("description") or "",
                t.get("input_schema") or {"type": "object", "properties": {}},
            )
            for t in tools
        ]
        text, images = _blocks(prompt if isinstance(prompt, list) else [])
        instructions = format_function_instructions(self.tools) if self.instructions else ""
        observation = f"{text}\n\n{instructions}" if text and instructions else text or instructions
        self._last_obs = observation
        self._metadata = {
            "multi_turn": True,
            "protocol": "ors",
            "url": self.url,
            "env_name": self.env_name,
            "tools": self.tools,
        }
        info: dict[str, Any] = {
            "tools": self.tools,
            "tool_instructions": instructions,
            "task_spec": task_spec,
        }
        if images:
            info["images"] = images
        return observation, info

    def _task(self, split: str | None, index: int | None) -> dict[str, Any]:
        """Task `index` of `split` (defaults: the env's split, an index from `np_random`)."""
        split = split or self.split or self._default_split()
        if index is None:
            if split not in self._num_tasks:
                reply = self._json("POST", f"{self._env_path}/num_tasks", {"split": split})
                self._num_tasks[split] = int(reply["num_tasks"])
            if self._num_tasks[split] < 1:
                raise RemoteEnvError(
                    f"{self}: split {split!r} has no tasks", status=None, error_type="NoTasks"
                )
            index = int(self.np_random.integers(self._num_tasks[split]))
        body = {"split": split, "index": index}
        return dict(self._json("POST", f"{self._env_path}/task", body)["task"])

    def _default_split(self) -> str:
        splits = self._json("GET", f"{self._env_path}/splits")
        names = [s["name"] for s in splits if s.get("type") == "train"] or [
            s["name"] for s in splits
        ]
        if not names:
            raise RemoteEnvError(f"{self}: no splits", status=None, error_type="NoSplits")
        self.split = names[0]
        return self.split

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """POST the call and read its event stream: the ``RunToolOutput`` object.

        Raises:
            RemoteEnvError: a transport or HTTP failure, an ``error`` event (the tool raised
                on the server), or a stream without ``end``.
        """
        path = f"{self._env_path}/call"
        reply = self._request("POST", path, {"name": name, "input": arguments}, retries=0)
        chunks: list[str] = []
        for event, data in sse_events(reply.body):
            if event == "error":
                raise RemoteEnvError(
                    f"{self.env_name} at {self.url}: tool {name!r} raised on the server: {data}",
                    status=None,
                    error_type="ToolRaised",
                )
            if event in ("chunk", "end"):
                chunks.append(data)
            if event == "end":
                try:
                    return dict(json.loads("".join(chunks)))
                except ValueError as exc:
                    raise RemoteEnvError(
                        f"POST {self.url}{path}: the result is not JSON: {''.join(chunks)[:200]!r}",
                        status=reply.status,
                        error_type="BadResponse",
                    ) from exc
        raise RemoteEnvError(
            f"POST {self.url}{path}: the event stream ended without a result",
            status=reply.status,
            error_type="BadResponse",
        )

    def _end_session(self) -> None:
        """Delete the session, if any (best effort: the server reaps idle ones too)."""
        sid, self.session_id = self.session_id, None
        if sid is not None:
            try:
                self._request("POST", "/delete", {}, sid=sid, retries=0)
            except RemoteEnvError as exc:
                logger.debug("deleting the session of %s failed: %s", self, exc)

    def _abandon_session(self) -> None:
        """Forget the session after a failed step; delete it if the server still answers."""
        self._http.close()  # a timed-out reply may still arrive on the old connection
        with contextlib.suppress(RemoteEnvError):
            self._end_session()
        self._http.close()

    def _json(self, method: str, path: str, body: Any = None) -> Any:
        return self._request(method, path, body).json(f"{method} {self.url}{path}")

    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        sid: str | None = None,
        retries: int | None = None,
    ) -> HttpReply:
        """One request with the session header; an error status raises `RemoteEnvError`
        with FastAPI's ``detail``."""
        headers = dict(self._auth)
        sid = sid or self.session_id
        if sid is not None:
            headers["X-Session-ID"] = sid
        reply = self._http.request(method, path, body, headers=headers, retries=retries)
        if reply.status >= 400:
            try:
                detail = json.loads(reply.body).get("detail")
            except (ValueError, AttributeError):
                detail = reply.body[:200].decode("utf-8", "replace")
            raise RemoteEnvError(
                f"{self.env_name} at {self.url}: HTTP {reply.status} from {method} {path}: "
                f"{detail}",
                status=reply.status,
                error_type="HTTPError",
            )
        return reply

    def _invalid(
        self, message: str, raw: str | None, record: dict[str, Any] | None = None
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """The policy's bad action: an error observation naming the tools; the episode goes
        on."""
        names = ", ".join(t["function"]["name"] for t in self.tools) or "none"
        info: dict[str, Any] = {"invalid_action": True}
        if record is not None:
            info["tool_calls"] = [{**record, "info": {"error": message}}]
        if raw is not None:
            info["parsed_action"] = raw
        return f"{message} Available tools: {names}.", 0.0, False, False, info
