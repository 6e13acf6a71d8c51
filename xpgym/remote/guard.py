"""Who may use an env server and how much: bearer tokens, the loopback rule, rate limits.

No web framework here: `xpgym.remote.server` turns these decisions into HTTP answers.

* A server either has a bearer token (`--token` / ``XPGYM_SERVER_TOKEN``), compared in
  constant time, or listens on loopback only (`check_bind`). A request carries it as
  ``Authorization: Bearer <token>`` or, as ORS clients send their API key, as
  ``X-API-Key: <token>``.
* A *client* is the remote address of a request that passed the token check. With one
  server token every authorised caller holds the same token, so the address is what tells
  clients apart (token + address = address). Sessions, the per-client session limit and the
  rate limit are per client. Behind a reverse proxy every request comes from the proxy's
  address (forwarded headers are not trusted), so all its clients share one budget.
"""

from __future__ import annotations

import hmac
import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "MAX_ACTION_CHARS",
    "MAX_BODY_BYTES",
    "RATE_LIMIT",
    "RateLimiter",
    "api_key_matches",
    "bearer_token_matches",
    "check_bind",
    "is_loopback",
]

MAX_BODY_BYTES = 8 * 2**20
"""Default largest request body (8 MiB; 413 above)."""
MAX_ACTION_CHARS = 2**20
"""Default longest step action in characters (413 above). `MAX_BODY_BYTES` holds an action
this long even if every character is sent as a 6-byte ``\\uXXXX`` escape (characters outside
the Basic Multilingual Plane take 12 bytes)."""
RATE_LIMIT = 1000.0
"""Default requests per second per client (bursts of twice that); 429 above."""


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address (``127.0.0.0/8``, ``::1``) or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # another host name: it may resolve to anything


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve on a non-loopback `host` without a token.

    Raises:
        ValueError: `token` is empty and `host` is not loopback; the message names the fix.
    """
    if not token and not is_loopback(host):
        raise ValueError(
            f"refusing to serve on {host!r} without a token: anyone who can reach it could "
            "run envs. Set a bearer token (export XPGYM_SERVER_TOKEN=\"$(python -c 'import "
            "secrets; print(secrets.token_urlsafe(32))')\", or --token) and give clients the "
            "same XPGYM_SERVER_TOKEN, or bind to loopback (--host 127.0.0.1)"
        )


def bearer_token_matches(authorization: bytes | None, token: str) -> bool:
    """Whether an ``Authorization`` header value is ``Bearer <token>`` (constant-time compare).

    The scheme name is case-insensitive (RFC 7235); the token is compared byte for byte
    with `hmac.compare_digest`, so the time taken does not tell how much of it matched.
    """
    if not authorization:
        return False
    scheme, _, credentials = authorization.strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return False
    return hmac.compare_digest(credentials.strip(), token.encode())


def api_key_matches(api_key: bytes | None, token: str) -> bool:
    """Whether an ``X-API-Key`` header value (how ORS clients send their key) is `token`,
    compared in constant time like `bearer_token_matches`."""
    if not api_key:
        return False
    return hmac.compare_digest(api_key.strip(), token.encode())


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """A token bucket per client: `rate` requests per second on average, bursts of `burst`.

    Args:
        rate: Requests per second each client may make on average (> 0).
        burst: Requests a client may make at once after being idle (>= 1).
        clock: Seconds from a monotonic clock; tests inject a fake one.
    """

    def __init__(
        self, rate: float, burst: int, *, clock: Callable[[], float] | None = None
    ) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive requests per second, got {rate}")
        if burst < 1:
            raise ValueError(f"burst must be >= 1 request, got {burst}")
        self.rate = rate
        self.burst = burst
        self.clock = clock or time.monotonic
        self._buckets: dict[str, _Bucket] = {}

    def acquire(self, client: str) -> float:
        """Take one request from `client`'s bucket.

        Returns:
            0.0 if the request may go ahead, else the seconds until the client's next
            request would be allowed (the request is refused and takes nothing).
        """
        now = self.clock()
        bucket = self._buckets.get(client)
        if bucket is None:
            bucket = self._buckets[client] = _Bucket(float(self.burst), now)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.rate)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.rate

    def prune(self) -> None:
        """Forget clients whose bucket has refilled (a new bucket starts full: same answer)."""
        now = self.clock()
        full = [
            client
            for client, bucket in self._buckets.items()
            if bucket.tokens + (now - bucket.updated) * self.rate >= self.burst
        ]
        for client in full:
            del self._buckets[client]
