"""`RemoteEnv`: an `Env` whose episodes run in a session on an xpgym env server.

``xpgym.make("remote:http://HOST:PORT/game:GuessTheNumber-v0")`` returns one. It has the
whole `Env` API (reset, step, sample_random_action, get_state, set_state, close) and the
same lifecycle checks, which run locally before any request is sent.

Failure contract (never a hang; every request has a socket timeout):

* `reset`, `get_state`, `set_state`, `sample_random_action` raise `RemoteEnvError` (with the
  server's exception type, message and traceback, or the transport error). A `reset` whose
  session is gone (server restarted, idle timeout) creates a new session and resets it.
* `step` never raises for remote failures: an exception in the env, a timeout, a dropped
  connection or an expired session return ``(last observation, 0.0, False, True,
  {"error": "RemoteEnvError: ...", "infra_error": {"kind": "remote_error", ...}, ...})``,
  as a failed sub-env does in a vector env (an infrastructure failure, `xpgym.core.errors`). The
  session is then abandoned (deleted if the server still answers) and the next `reset`
  creates a new one.
* Retries: transport errors (refused, reset, closed connection) are retried up to
  ``max_retries`` times with a short backoff for every operation. That is safe for `step`
  because each step carries a sequence number and the server answers a repeated number
  with the cached result instead of stepping twice. Timeouts are never retried.
* Back-off: a request the server refused for now (429 or 503 with ``Retry-After``: its rate
  limit; the request never reached the env) is sent again after ``Retry-After`` seconds
  times a random factor in [1, 1.5) (clients refused together come back apart), as often as
  it takes, until the waits of that one request would pass ``timeout`` seconds in total;
  then the refusal is raised (`RemoteEnvError` with its status; an infra error in `step`).
  These re-sends do not count against ``max_retries``. A 429 or 503 without ``Retry-After``
  (the session limits: ``TooManyClientSessions``, ``TooManySessions``) is raised at once.
  Both are `xpgym.remote.transport.HttpConnection`'s, which every HTTP client shares.

Authentication: with ``token=...`` (or ``XPGYM_SERVER_TOKEN`` in the environment when
``token`` is not given) every request carries ``Authorization: Bearer <token>``. The token
never appears in reprs, logs or error messages: ``env.spec.kwargs["token"]`` (set by
``make("remote:...", token=...)``) is a `SecretStr` whose repr is masked. A server that
refuses the token answers 401: `RemoteEnvError` with ``status == 401``.

Pickling keeps only the URL, env id, options (the token included) and env kwargs: the copy
opens its own connection and session lazily and must be `reset` before stepping (so a
`RemoteEnv` works in `ProcessVectorEnv`). One `RemoteEnv` holds one connection and is safe
to call from any thread, one call at a time (calls are serialised by a lock).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any

from xpgym.core.registry import EnvSpec
from xpgym.remote import SCHEME
from xpgym.remote.transport import (
    HttpConnection,
    RemoteClientEnv,
    RemoteEnvError,
    check_server_url,
    remote_failure_info,
    resolve_token,
)

__all__ = [
    "CLIENT_OPTIONS",
    "RemoteEnv",
    "parse_remote_id",
    "remote_spec",
]

logger = logging.getLogger(__name__)

REMOTE_PREFIX = f"{SCHEME}:"
CLIENT_OPTIONS = ("timeout", "connect_timeout", "max_retries", "token")
"""Keyword arguments of ``make("remote:...")`` that configure the client, not the env."""


def parse_remote_id(remote_id: str) -> tuple[str, str]:
    """Split ``"remote:<url>/<env id>"`` into ``(url, env_id)``.

    Env ids never contain ``/``, so the id is what follows the last ``/``; the URL may carry
    a path prefix (``remote:http://host/xpgym/game:X-v0``).

    Raises:
        ValueError: not a ``remote:http(s)://...`` id, or no env id after the URL.
    """
    if not remote_id.startswith(REMOTE_PREFIX):
        raise ValueError(f"{remote_id!r} is not a remote id ('remote:<url>/<env id>')")
    url, _, env_id = remote_id[len(REMOTE_PREFIX) :].rpartition("/")
    example = "remote:http://127.0.0.1:8000/game:GuessTheNumber-v0"
    check_server_url(url, example)
    if not env_id:
        raise ValueError(f"remote id {remote_id!r} names no env after the URL; e.g. {example!r}")
    return url, env_id


def remote_spec(remote_id: str) -> EnvSpec:
    """The `EnvSpec` for a ``remote:`` id: its entry point builds a `RemoteEnv`.

    The resolver of the ``remote:`` id scheme (`xpgym.remote.register_remote_scheme`), so
    that `make`, `spec` and `make_vec` accept remote ids. The spec pickles (string entry
    point), so it works in worker processes.
    """
    url, env_id = parse_remote_id(remote_id)
    return EnvSpec(
        id=remote_id,
        entry_point="xpgym.remote.client:RemoteEnv",
        kwargs={"url": url, "env_id": env_id},
        description=f"{env_id} served by {url}",
    )


class RemoteEnv(RemoteClientEnv):
    """Client for one session on an env server (see the module docstring for failures).

    Args:
        url: Server base URL, ``http://HOST:PORT`` (optionally with a path prefix).
        env_id: Env id to create on the server (must match the server's ``--env``).
        timeout: Seconds each request may wait for the server (socket timeout), including
            the env call itself: set it above your env's slowest step.
        connect_timeout: Seconds to open a connection.
        max_retries: Retries after transport errors (not after timeouts); re-sends after
            the server's ``Retry-After`` are bounded by `timeout` instead (module docstring).
        token: The server's bearer token (default: ``XPGYM_SERVER_TOKEN`` if set, else none).
        **env_kwargs: Keyword arguments for the env on the server (must be JSON).

    Attributes:
        session_id: The server session, or `None` before the first call / after a failure.
    """

    def __init__(
        self,
        url: str,
        env_id: str,
        *,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        max_retries: int = 2,
        token: str | None = None,
        **env_kwargs: Any,
    ) -> None:
        token = resolve_token(token)
        self._keep_options(
            url=url,
            env_id=env_id,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_retries=max_retries,
            token=token,
            **env_kwargs,
        )
        self.url = url.rstrip("/")
        self.env_id = env_id
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_retries = max_retries
        self.token = token
        self.env_kwargs = env_kwargs
        self.session_id: str | None = None
        self._http = HttpConnection(
            self.url, timeout=timeout, connect_timeout=connect_timeout, max_retries=max_retries
        )
        self._lock = threading.Lock()
        self._steps = 0
        self._last_obs = ""  # set by every reset, which a step needs first

    # -- Env API -------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Reset the remote env (creating a session first if needed).

        Raises:
            RemoteEnvError: the server or the env failed, or the server is unreachable.
        """
        # No super().reset(): the seed is checked and used by the remote env, not locally.
        body = {"seed": seed, "options": options}
        with self._lock:
            try:
                reply = self._session_call("reset", body)
            except RemoteEnvError as exc:
                if exc.error_type != "SessionNotFound":
                    raise
                logger.info("session of %s is gone; creating a new one", self)
                self.session_id = None
                reply = self._session_call("reset", body)
            self._steps = 0
            self._last_obs = reply["observation"]
        return reply["observation"], reply["info"]

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Step the remote env; remote failures return a truncation with ``info["error"]``."""
        with self._lock:
            try:
                reply = self._session_call("step", {"action": action, "seq": self._steps + 1})
            except RemoteEnvError as exc:  # isolation: report it, never raise from a step
                self._abandon_session()
                return self._last_obs, 0.0, False, True, remote_failure_info(exc)
            self._steps += 1
            self._last_obs = reply["observation"]
        return (
            reply["observation"],
            reply["reward"],
            reply["terminated"],
            reply["truncated"],
            reply["info"],
        )

    def sample_random_action(self) -> str:
        """A random action drawn by the remote env's `np_random`."""
        with self._lock:
            return self._session_call("sample_random_action", {})["action"]

    def get_state(self) -> dict[str, Any]:
        """The remote env's `get_state()`, decoded from JSON (tuples come back as lists)."""
        with self._lock:
            return self._session_call("get_state", {})["state"]

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a `get_state()` snapshot in the current session (created if needed)."""
        with self._lock:
            self._session_call("set_state", {"state": state})
            self._steps = 0

    def can_fork(self) -> bool:
        """`False`: the episode lives in the server's session, and its `get_state` snapshot
        comes back through JSON (tuples as lists), which is not known to restore every env
        exactly mid-episode; fork the env on the server's side instead."""
        return False

    def close(self) -> None:
        """Delete the session (best effort, short timeout) and close the connection."""
        with self._lock:
            if self.session_id is not None:
                try:
                    self._request("DELETE", f"/sessions/{self.session_id}", None, retries=0)
                except RemoteEnvError as exc:
                    logger.debug("deleting session of %s failed: %s", self, exc)
                self.session_id = None
            self._http.close()

    def health(self) -> dict[str, Any]:
        """The server's ``GET /health`` reply: ``{status, sessions, max_sessions, ...}``."""
        with self._lock:
            return self._request("GET", "/health", None)

    def __str__(self) -> str:
        return f"<RemoteEnv({self.env_id!r} at {self.url})>"

    __repr__ = __str__

    # -- protocol ------------------------------------------------------------------------
    def _session_call(self, op: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.session_id is None:
            reply = self._request(
                "POST", "/sessions", {"env_id": self.env_id, "kwargs": self.env_kwargs}
            )
            self.session_id = reply["session_id"]
            self._metadata = reply.get("metadata") or {}
            self._http.keep_alive = float(reply.get("keep_alive", self._http.keep_alive))
        return self._request("POST", f"/sessions/{self.session_id}/{op}", body)

    def _abandon_session(self) -> None:
        """Forget the session after a failed step; delete it if the server still answers."""
        session, self.session_id = self.session_id, None
        self._http.close()  # a timed-out response may still arrive on the old connection
        if session is not None:
            with contextlib.suppress(RemoteEnvError):
                self._request("DELETE", f"/sessions/{session}", None, retries=0)
            self._http.close()

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None, *, retries: int | None = None
    ) -> dict[str, Any]:
        """Send one request (`HttpConnection.request`); raise `RemoteEnvError` for an error
        reply, with the server's ``{"error": {type, message, traceback}}``."""
        headers = {} if self.token is None else {"Authorization": f"Bearer {self.token}"}
        reply = self._http.request(method, path, body, headers=headers, retries=retries)
        decoded = reply.json(f"{method} {self.url}{path}")
        if reply.status >= 400:
            err = decoded.get("error") if isinstance(decoded, dict) else None
            err = err if isinstance(err, dict) else {"type": "HTTPError", "message": str(decoded)}
            raise RemoteEnvError(
                f"{self.env_id} at {self.url}: {err.get('type')}: {err.get('message')} "
                f"(HTTP {reply.status} from {method} {path})",
                status=reply.status,
                error_type=str(err.get("type")),
                remote_traceback=str(err.get("traceback") or ""),
            )
        return decoded
