"""The protocol of a remote retrieval server (e.g. a dense retriever on a GPU box): JSON over
HTTP, spoken by `xpgym.core.tools.search.client.HTTPSearchBackend` and served by
`xpgym.core.tools.search.server.make_search_server`::

    POST <url>   Content-Type: application/json
    {"query": "capital of Austria", "top_k": 3}

    200 OK       Content-Type: application/json
    {"results": [{"title": "Vienna", "text": "Vienna is ...", "score": 12.3}, ...]}

``top_k`` is optional (default 3). ``results`` is best first, at most ``top_k`` long;
``title`` (default ``""``), ``score`` (default ``0.0``) and ``id`` are optional. Any other
status is an error; the server's errors are ``{"error": message}``.

This module holds the encoding and decoding of both messages; the client and the server
move the bytes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from xpgym.core.tools.search.backend import SearchError, SearchHit

__all__ = [
    "DEFAULT_TOP_K",
    "decode_request",
    "decode_results",
    "encode_request",
    "encode_results",
]

DEFAULT_TOP_K = 3
"""The ``top_k`` of a request that gives none."""


def encode_request(query: str, top_k: int) -> bytes:
    """The request body ``{"query": query, "top_k": top_k}``."""
    return json.dumps({"query": query, "top_k": int(top_k)}).encode()


def decode_request(body: bytes, max_top_k: int) -> tuple[str, int]:
    """``(query, top_k)`` of a request body, `top_k` clamped to ``1..max_top_k``.

    Raises:
        ValueError: the body is not ``{"query": str, "top_k": int}`` (``top_k`` optional).
    """
    try:
        request = json.loads(body)
        query, top_k = request["query"], request.get("top_k", DEFAULT_TOP_K)
        if not isinstance(query, str) or isinstance(top_k, bool):
            raise TypeError
        top_k = max(1, min(int(top_k), max_top_k))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError('expected {"query": str, "top_k": int}') from exc
    return query, top_k


def encode_results(hits: Sequence[SearchHit]) -> dict[str, Any]:
    """The response payload ``{"results": [...]}`` of `hits` (``id`` only where known)."""
    results = [
        {"title": h.title, "text": h.text, "score": h.score}
        | ({"id": h.doc_id} if h.doc_id is not None else {})
        for h in hits
    ]
    return {"results": results}


def decode_results(raw: bytes) -> list[SearchHit]:
    """The hits of a response body, in its order.

    Raises:
        SearchError: ``reason="bad_response"``: not JSON, or not the documented shape.
    """

    def bad(why: str) -> SearchError:
        return SearchError(f"malformed search response: {why}", reason="bad_response")

    try:
        payload = json.loads(raw)
    except ValueError as exc:
        raise bad("not JSON") from exc
    if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
        raise bad('expected an object with a "results" list')
    hits = []
    for i, item in enumerate(payload["results"]):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise bad(f'result {i} must be an object with a string "text"')
        title = item.get("title") or ""
        score = item.get("score", 0.0)
        if not isinstance(title, str):
            raise bad(f'result {i}: "title" must be a string')
        if isinstance(score, bool) or not isinstance(score, (int, float, type(None))):
            raise bad(f'result {i}: "score" must be a number')
        doc_id = item.get("id")
        hits.append(
            SearchHit(
                title=title,
                text=item["text"],
                score=float(score or 0.0),
                doc_id=None if doc_id is None else str(doc_id),
            )
        )
    return hits
