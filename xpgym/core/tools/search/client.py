"""`HTTPSearchBackend`: the client of a remote retrieval server.

The server speaks `xpgym.core.tools.search.protocol`. Only the Python standard library is
used (`urllib`); `timeout_s` bounds the connection and each read. Every failure (timeout,
connection refused, an HTTP error status, a malformed or oversized response) raises
`xpgym.core.tools.search.backend.SearchError` with its `reason`.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping

from xpgym.core.tools.search.backend import SearchBackend, SearchError, SearchHit
from xpgym.core.tools.search.protocol import decode_results, encode_request

__all__ = ["HTTPSearchBackend"]


class HTTPSearchBackend(SearchBackend):
    """Client for a retrieval server speaking `xpgym.core.tools.search.protocol`.

    Args:
        url: The endpoint, e.g. ``"http://127.0.0.1:8000/search"``.
        timeout_s: Limit for connecting and for each read from the socket.
        headers: Extra request headers (e.g. ``{"Authorization": "Bearer ..."}``).
        max_response_bytes: A longer response body is a ``bad_response`` error.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 5.0,
        headers: Mapping[str, str] | None = None,
        max_response_bytes: int = 10_000_000,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"search url must start with http:// or https://, got {url!r}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.url = url
        self.timeout_s = float(timeout_s)
        self.headers = dict(headers or {})
        self.max_response_bytes = int(max_response_bytes)

    def search(self, query: str, top_k: int) -> list[SearchHit]:
        """POST ``{"query", "top_k"}`` and read ``{"results": [...]}``; see `SearchError`."""
        request = urllib.request.Request(
            self.url,
            data=encode_request(query, top_k),
            method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json"}
            | self.headers,
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read(self.max_response_bytes + 1)
        except urllib.error.HTTPError as exc:
            detail = exc.read(300).decode("utf-8", "replace").strip()
            exc.close()
            raise SearchError(
                f"search server returned HTTP {exc.code}" + (f": {detail}" if detail else ""),
                reason="http_error",
            ) from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise self._timeout() from exc
            raise SearchError(
                f"cannot reach search server {self.url}: {exc.reason}", reason="connection"
            ) from exc
        except TimeoutError as exc:
            raise self._timeout() from exc
        except OSError as exc:
            raise SearchError(
                f"connection to search server {self.url} failed: {exc}", reason="connection"
            ) from exc
        if len(raw) > self.max_response_bytes:
            raise SearchError(
                f"search response exceeds {self.max_response_bytes} bytes", reason="bad_response"
            )
        return decode_results(raw)

    def _timeout(self) -> SearchError:
        return SearchError(
            f"search server did not answer within {self.timeout_s:g} s", reason="timeout"
        )

    def __repr__(self) -> str:
        return f"HTTPSearchBackend(url={self.url!r}, timeout_s={self.timeout_s:g})"
