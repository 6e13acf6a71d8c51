"""What every remote-env client shares: its error, its HTTP connection, its step-failure info.

The clients (`xpgym.remote.client.RemoteEnv` for xpgym's own servers,
`xpgym.remote.openenv_client.OpenEnvEnv` and `xpgym.remote.ors_client.ORSEnv` for other
projects' servers) speak different protocols but fail the same way:

* `RemoteEnvError` is the one error a client raises (reset, state calls) for a remote
  failure: HTTP status (or `None` for a transport failure), the remote error's type, its
  traceback when the server sent one.
* `remote_failure_info` is the info of a step that failed remotely: ``{"error":
  "RemoteEnvError: ...", "infra_error": {"kind": "remote_error", ...}}``. A remote failure
  is never the policy's doing, so the recorder marks the episode ``outcome="infra_error"``
  (`xpgym.core.errors`) and trainers keep it out of the gradient.
* `HttpConnection` is one keep-alive HTTP/1.1 connection with socket timeouts, retries of
  transport errors and jittered re-sends of requests refused for now (429 or 503 with
  ``Retry-After``).
* `RemoteClientEnv` is their base: it pickles as its constructor's arguments (a copy opens
  its own connection and session lazily, so a client works in `ProcessVectorEnv`), shows
  the remote env's metadata, and masks a token in its spec.

Only the standard library is imported here.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import logging
import os
import random
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

from xpgym.core.env import Env
from xpgym.core.errors import INFRA_ERROR_KEY, InfraCause
from xpgym.core.registry import EnvSpec
from xpgym.remote import TOKEN_ENV

__all__ = [
    "HttpConnection",
    "HttpReply",
    "RemoteClientEnv",
    "RemoteEnvError",
    "SecretStr",
    "check_server_url",
    "remote_failure_info",
    "resolve_token",
]

logger = logging.getLogger(__name__)

_TRANSPORT_ERRORS = (ConnectionError, http.client.HTTPException, OSError)


class SecretStr(str):
    """A string whose repr is masked (``'***'``), for tokens in specs and state.

    It is still the token wherever a string is used (headers, comparisons, pickling).
    """

    def __repr__(self) -> str:
        return "'***'"


def resolve_token(token: str | None) -> SecretStr | None:
    """The bearer token a client sends: `token`, else ``XPGYM_SERVER_TOKEN`` from the
    environment, else none; masked in reprs (`SecretStr`)."""
    token = token or os.environ.get(TOKEN_ENV) or None
    return None if token is None else SecretStr(token)


class RemoteEnvError(RuntimeError):
    """A remote env call failed.

    Attributes:
        status: HTTP status, or `None` for a transport failure (refused, timeout, dropped)
            or a failure the protocol reports without one (a WebSocket error frame).
        error_type: The server-side exception type or error code (e.g. ``"ValueError"``,
            ``"TooManySessions"``, ``"CAPACITY_REACHED"``), or the local transport
            exception's type.
        remote_traceback: The server-side traceback, if the server sent one.
    """

    def __init__(
        self, message: str, *, status: int | None, error_type: str, remote_traceback: str = ""
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.remote_traceback = remote_traceback


class RemoteClientEnv(Env[str]):
    """Base of the remote-env clients: pickling, `metadata` and `spec` (see the module
    docstring).

    A subclass's ``__init__`` calls `_keep_options` with its own arguments (all of them,
    env kwargs included) and sets ``self._metadata`` when it learns the remote env's.
    """

    _options: dict[str, Any]
    _metadata: dict[str, Any]

    def _keep_options(self, **options: Any) -> None:
        """Record the constructor's arguments: a pickled copy is rebuilt from them."""
        self._options = options
        self._metadata = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self._options, "spec": self.__dict__.get("_spec")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # The pickled options are __init__'s arguments: running it again rebuilds the rest.
        self.__init__(**state["options"])  # type: ignore[misc]  # __init__ on an instance
        if state["spec"] is not None:
            self.spec = state["spec"]

    @property
    def metadata(self) -> dict[str, Any]:  # type: ignore[override]  # read-only on purpose
        """The remote env's metadata as this client knows it (empty before a session).

        A read-only property over `Env.metadata` (a class attribute): each client shows its
        own remote env's.
        """
        return self._metadata

    @property
    def spec(self) -> EnvSpec | None:
        """The spec `make` built this env from; a ``token`` in its kwargs is a `SecretStr`."""
        return self.__dict__.get("_spec")

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        if value is not None and isinstance(value.kwargs.get("token"), str):
            kwargs = {**value.kwargs, "token": SecretStr(value.kwargs["token"])}
            value = dataclasses.replace(value, kwargs=kwargs)
        self._spec = value


def remote_failure_info(exc: RemoteEnvError) -> dict[str, Any]:
    """The info of a step that failed remotely: ``error``, the ``infra_error`` marker
    (kind ``"remote_error"``) and ``traceback`` when the server sent one."""
    message = str(exc) if exc.status is None else f"HTTP {exc.status}: {exc}"
    info: dict[str, Any] = {
        "error": f"RemoteEnvError: {exc}",
        INFRA_ERROR_KEY: InfraCause("remote_error", message).to_dict(),
    }
    if exc.remote_traceback:
        info["traceback"] = exc.remote_traceback
    return info


def check_server_url(url: str, example: str) -> urllib.parse.SplitResult:
    """`url` split, checked to be ``http(s)://HOST[:PORT][/prefix]`` without credentials.

    Args:
        url: The server's base URL.
        example: A well-formed id or URL for the error message.

    Raises:
        ValueError: another scheme, no host, or ``user:password@`` in the URL (it would
            show up in logs and reprs).
    """
    parts = urllib.parse.urlsplit(url)
    if "@" in parts.netloc:
        raise ValueError(
            "server URLs must not carry credentials (they show up in logs and reprs): pass "
            "token=... to the client instead"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s)://HOST:PORT URL; e.g. {example!r}")
    return parts


@dataclass(frozen=True)
class HttpReply:
    """One HTTP response: status, headers (lower-case names) and the whole body."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self, what: str) -> Any:
        """The body decoded as JSON (``{}`` when empty).

        Raises:
            RemoteEnvError: the body is not JSON (``error_type="BadResponse"``); `what`
                names the request in the message.
        """
        try:
            return json.loads(self.body) if self.body else {}
        except ValueError as exc:
            raise RemoteEnvError(
                f"{what}: HTTP {self.status} with a non-JSON body {self.body[:200]!r}",
                status=self.status,
                error_type="BadResponse",
            ) from exc


class HttpConnection:
    """One keep-alive HTTP/1.1 connection to a server; not thread-safe (callers lock).

    Args:
        url: Base URL ``http(s)://HOST:PORT[/prefix]``; request paths are appended to it.
        timeout: Socket timeout of each request, in seconds (the whole reply must arrive).
        connect_timeout: Seconds to open a connection.
        max_retries: Default retries after transport errors (never after timeouts).

    A request refused for now (429 or 503 with ``Retry-After``; it never reached the env) is
    sent again after ``Retry-After`` seconds times a random factor in [1, 1.5) (clients
    refused together come back apart), as often as it takes, until the waits of that one
    request would pass `timeout` seconds in total; then the refusal is returned. These
    re-sends do not count against the retries. Without ``Retry-After`` (a session limit)
    the refusal is returned at once.

    Attributes:
        keep_alive: Seconds the server keeps an idle connection open (uvicorn's default 5
            until a protocol learns better); an older one is reopened before use.
    """

    def __init__(
        self, url: str, *, timeout: float, connect_timeout: float, max_retries: int
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_retries = max_retries
        self.keep_alive = 5.0
        self._parts = check_server_url(self.url, "http://127.0.0.1:8000")
        self._conn: http.client.HTTPConnection | None = None
        self._used = 0.0
        self._jitter = random.Random()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        retries: int | None = None,
    ) -> HttpReply:
        """Send one request (`body` as JSON unless `None`) and read the whole reply.

        Any status comes back as an `HttpReply`; the caller reads its protocol's errors.

        Raises:
            RemoteEnvError: a timeout (``error_type="TimeoutError"``, never retried) or a
                transport error after ``retries + 1`` attempts (``status=None``).
        """
        retries = self.max_retries if retries is None else retries
        data = None if body is None else json.dumps(body).encode()
        sent = dict(headers or {})
        if data is not None:
            sent["Content-Type"] = "application/json"
        full_path = self._parts.path + path
        attempt = 0  # transport failures so far
        waited = 0.0  # seconds slept on the server's Retry-After so far
        while True:
            try:
                conn = self._connection()
                conn.request(method, full_path, body=data, headers=sent)
                response = conn.getresponse()
                raw = response.read()
                self._used = time.monotonic()
                reply = HttpReply(
                    response.status, {k.lower(): v for k, v in response.getheaders()}, raw
                )
                if response.will_close:
                    self.close()
            except TimeoutError as exc:
                self.close()
                raise RemoteEnvError(
                    f"{method} {self.url}{path} timed out after {self.timeout:g} s "
                    "(raise the client's timeout=... above the env's slowest call)",
                    status=None,
                    error_type="TimeoutError",
                ) from exc
            except _TRANSPORT_ERRORS as exc:
                self.close()
                if attempt == retries:
                    raise RemoteEnvError(
                        f"{method} {self.url}{path} failed: {type(exc).__name__}: {exc} "
                        f"(after {retries + 1} attempts; is the server running?)",
                        status=None,
                        error_type=type(exc).__name__,
                    ) from exc
                time.sleep(0.05 * 2**attempt)
                attempt += 1
                continue
            wait = _retry_after(reply.status, reply.headers.get("retry-after"))
            if wait is None or waited + wait > self.timeout:
                return reply
            wait *= 1.0 + 0.5 * self._jitter.random()  # refused together, back apart
            logger.info("%s answered %d; retrying in %.2f s", self.url, reply.status, wait)
            time.sleep(wait)
            waited += wait

    def close(self) -> None:
        """Close the connection (the next request opens a new one)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is not None and time.monotonic() - self._used > self.keep_alive - 1.0:
            self.close()  # the server may have closed it: never send on a stale one
        if self._conn is None:
            cls = (
                http.client.HTTPSConnection
                if self._parts.scheme == "https"
                else http.client.HTTPConnection
            )
            conn = cls(self._parts.hostname or "", self._parts.port, timeout=self.connect_timeout)
            conn.connect()
            conn.sock.settimeout(self.timeout)
            self._conn = conn
        return self._conn


def _retry_after(status: int, header: str | None) -> float | None:
    """Seconds to wait before re-sending a request the server refused for now: a 429 or 503
    with ``Retry-After`` (in seconds); `None` for anything else."""
    if status not in (429, 503) or header is None:
        return None  # without Retry-After (the session limits) it is not about time
    try:
        return max(0.0, float(header))
    except ValueError:
        return None
