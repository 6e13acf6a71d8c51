"""`make_search_server`: any `SearchBackend` served over HTTP with
`xpgym.core.tools.search.protocol` (standard library `http.server`, one thread a request).

``python -m xpgym.core.tools.search`` runs one over a local index.
"""

from __future__ import annotations

import http.server
import json
import logging
from collections.abc import Mapping
from typing import Any

from xpgym.core.tools.search.backend import SearchBackend
from xpgym.core.tools.search.protocol import decode_request, encode_results

__all__ = ["make_search_server"]

logger = logging.getLogger(__name__)

_MAX_REQUEST_BYTES = 1_000_000


def make_search_server(
    backend: SearchBackend,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    max_top_k: int = 100,
) -> http.server.ThreadingHTTPServer:
    """An HTTP server answering the JSON protocol (any path) from `backend`.

    The server is bound but not started: run ``server.serve_forever()`` (e.g. in a thread),
    stop with ``server.shutdown(); server.server_close()``. ``server.server_address[1]`` is
    the port (useful with ``port=0``). A malformed request gets 400, a backend failure 500,
    both with ``{"error": message}``. A request's ``top_k`` is clamped to ``1..max_top_k``.
    """

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _reply(self, status: int, payload: Mapping[str, Any]) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if not 0 < length <= _MAX_REQUEST_BYTES:
                self._reply(400, {"error": "a JSON body of at most 1 MB is required"})
                return
            try:
                query, top_k = decode_request(self.rfile.read(length), max_top_k)
            except ValueError as exc:
                self._reply(400, {"error": str(exc)})
                return
            try:
                hits = backend.search(query, top_k)
            except Exception as exc:
                logger.warning("search backend failed on %r", query, exc_info=True)
                self._reply(500, {"error": f"{type(exc).__name__}: {exc}"})
                return
            self._reply(200, encode_results(hits))

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("search server: " + format, *args)

    server = http.server.ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server
