r"""`SearchTool`: the model searches a document collection and reads the top-k passages.

Calls
-----

Tag style ``<search>capital of Austria</search>`` or a JSON function call
``<tool_call>{"name": "search", "arguments": {"query": "capital of Austria"}}</tool_call>``
(parsed by `xpgym.core.tools.calls.parse_call`). The observation lists the top-k documents,
best first, one per line, as GEM and Search-R1 format them::

    Doc 1 (Title: Vienna) Vienna is the capital and largest city of Austria. ...
    Doc 2 (Title: Austria) Austria is a landlocked country in Central Europe. ...

cut to `max_output_chars` (the cut ends with ``" ... [truncated]"``).

Backends (`xpgym.core.tools.search.backend.SearchBackend`): the local tantivy index
(`xpgym.core.tools.search.index`) or a retrieval server over HTTP
(`xpgym.core.tools.search.client`). A backend failure (`SearchError`) or any exception a
backend raises becomes ``ToolResult(ok=False)`` with ``info["exit_reason"]`` (the error's
`reason`, or ``"error"``) and the infrastructure marker ``info["infra_error"]``
(`xpgym.core.errors`).

Caching and threads
-------------------

`SearchTool` keeps an in-memory LRU cache of results (`xpgym.core.tools.search.cache`) keyed
by the whitespace-normalised query and `top_k` (`cache_size` entries; ``0`` disables it;
errors are never cached). The tool, the cache and both backends are thread-safe.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from xpgym.core.errors import INFRA_ERROR_KEY, InfraCause
from xpgym.core.tools.base import Tool, ToolCall, ToolResult
from xpgym.core.tools.calls import function_schema, parse_call
from xpgym.core.tools.search.backend import SearchBackend, SearchError, SearchHit
from xpgym.core.tools.search.cache import ResultCache
from xpgym.core.tools.search.client import HTTPSearchBackend
from xpgym.core.tools.search.corpus import default_corpus_path
from xpgym.core.tools.search.index import LocalSearchIndex, default_search_index

__all__ = ["SearchTool", "format_hits", "make_search_tool"]

logger = logging.getLogger(__name__)

_TRUNCATED = " ... [truncated]"


def format_hits(hits: Sequence[SearchHit], max_chars: int | None = None) -> str:
    """``Doc i (Title: t) text`` lines, best first, cut to `max_chars` (marker included)."""
    text = "\n".join(f"Doc {i} (Title: {h.title}) {h.text}" for i, h in enumerate(hits, 1))
    if max_chars is not None and len(text) > max_chars:
        keep = max(0, max_chars - len(_TRUNCATED))
        text = (text[:keep].rstrip() + _TRUNCATED)[:max_chars]
    return text


class SearchTool(Tool):
    """Search a document collection: ``<search>query</search>`` or a JSON ``search`` call.

    Args:
        backend: Where queries go; `None` uses `default_search_index()` (the shipped corpus,
            shared by the process).
        top_k: Documents per observation.
        max_output_chars: Cap on the observation length.
        cache_size: Entries of the LRU result cache; ``0`` disables caching.
        close_backend: `close()` also closes `backend` (for a backend made for this tool).

    Info of a call: ``exit_reason`` (``"ok"``, ``"empty_query"``, or a `SearchError` reason),
    ``num_results``, ``cached`` (bool), ``duration_s``.
    """

    name = "search"
    description = (
        "Search a knowledge base and return the most relevant documents, best first. Use "
        "short keyword queries; search again with other words if the answer is not there."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search for, in a few words."}
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    def __init__(
        self,
        backend: SearchBackend | None = None,
        *,
        top_k: int = 3,
        max_output_chars: int = 3000,
        cache_size: int = 1024,
        close_backend: bool = False,
    ) -> None:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k must be a positive int, got {top_k!r}")
        if max_output_chars < len(_TRUNCATED) + 1:
            raise ValueError(
                f"max_output_chars must be > {len(_TRUNCATED)}, got {max_output_chars}"
            )
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        self.backend = backend if backend is not None else default_search_index()
        self.top_k = top_k
        self.max_output_chars = int(max_output_chars)
        self.close_backend = close_backend and backend is not None
        self._cache = ResultCache(cache_size)
        self._closed = False

    def instructions(self) -> str:
        return (
            "Search the knowledge base with <search>your query</search>. The top "
            f"{self.top_k} documents are returned as 'Doc i (Title: ...) text'. Use short "
            "keyword queries; search again with other words if the answer is not there."
        )

    def function_schema(self) -> dict[str, Any]:
        return function_schema(self.name, self.description, self.parameters)

    def parse(self, action: str) -> ToolCall | None:
        return parse_call(
            action, self.name, parameters=self.parameters, tag="search", tag_argument="query"
        )

    @property
    def cache_stats(self) -> dict[str, int]:
        """``{"hits", "misses", "size", "capacity"}`` of the result cache."""
        return self._cache.stats()

    def clear_cache(self) -> None:
        """Empty the result cache and reset its counters."""
        self._cache.clear()

    def search(self, query: str) -> tuple[tuple[SearchHit, ...], bool]:
        """``(hits, cached)`` for `query`, through the cache.

        Raises:
            SearchError: The backend failed.
        """
        key = (" ".join(query.split()), self.top_k)
        cached = self._cache.get(key)
        if cached is not None:
            return cached, True
        hits = tuple(self.backend.search(key[0], self.top_k))
        self._cache.put(key, hits)
        return hits, False

    def execute(self, call: ToolCall) -> ToolResult:
        """Run the search; see the class docstring for the info keys.

        Raises:
            ValueError: `call` is malformed (``call.error`` set) - a programming error.
        """
        if call.error is not None:
            raise ValueError(f"cannot execute a malformed call: {call.error}")
        query = str(call.arguments.get("query", "")).strip()
        if not query:
            return ToolResult(
                "Search failed: the query is empty; write what to search for.",
                ok=False,
                info={"exit_reason": "empty_query", "num_results": 0, "cached": False},
            )
        start = time.perf_counter()
        try:
            hits, cached = self.search(query)
        except SearchError as exc:
            return ToolResult(
                f"Search failed: {exc}",
                ok=False,
                info={
                    "exit_reason": exc.reason,
                    "num_results": 0,
                    "cached": False,
                    "duration_s": time.perf_counter() - start,
                    INFRA_ERROR_KEY: InfraCause("tool_backend_error", str(exc)).to_dict(),
                },
            )
        except Exception as exc:
            logger.warning("search backend %r raised on %r", self.backend, query, exc_info=True)
            return ToolResult(
                f"Search failed: {type(exc).__name__}: {exc}",
                ok=False,
                info={
                    "exit_reason": "error",
                    "num_results": 0,
                    "cached": False,
                    INFRA_ERROR_KEY: InfraCause(
                        "tool_backend_error", f"{type(exc).__name__}: {exc}"
                    ).to_dict(),
                },
            )
        info = {
            "exit_reason": "ok",
            "num_results": len(hits),
            "cached": cached,
            "duration_s": time.perf_counter() - start,
        }
        if not hits:
            observation = f"No documents found for the query {query!r}. Try other words."
            return ToolResult(observation[: self.max_output_chars], info=info)
        return ToolResult(format_hits(hits, self.max_output_chars), info=info)

    def close(self) -> None:
        """Close the backend when `close_backend` is set. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        if self.close_backend:
            self.backend.close()

    def __repr__(self) -> str:
        return f"SearchTool(backend={self.backend!r}, top_k={self.top_k})"


def make_search_tool(
    *,
    corpus: str | os.PathLike[str] | None = None,
    url: str | None = None,
    index_dir: str | os.PathLike[str] | None = None,
    top_k: int = 3,
    timeout_s: float = 5.0,
    max_output_chars: int = 3000,
    cache_size: int = 1024,
    query_syntax: bool = False,
) -> SearchTool:
    """A fresh `SearchTool` from plain data (a tools factory for `register_tool_variant`).

    Args:
        corpus: A JSONL corpus to index locally; with neither `corpus` nor `url`, the shipped
            corpus's shared index is used.
        url: A retrieval server (`xpgym.core.tools.search.protocol`); excludes `corpus`.
        index_dir: Where to build the index of `corpus` (default: in memory).
        top_k, max_output_chars, cache_size: As for `SearchTool`.
        timeout_s: HTTP timeout (with `url`).
        query_syntax: As for `LocalSearchIndex`.

    Raises:
        ValueError: Both `corpus` and `url` are given.
    """
    backend: SearchBackend | None = None
    if corpus is not None and url is not None:
        raise ValueError("give a corpus or a url, not both")
    if url is not None:
        backend = HTTPSearchBackend(url, timeout_s=timeout_s)
    elif corpus is not None:
        backend = LocalSearchIndex.from_jsonl(
            corpus, index_dir=index_dir, query_syntax=query_syntax
        )
    elif query_syntax or index_dir is not None:
        backend = LocalSearchIndex.from_jsonl(
            default_corpus_path(), index_dir=index_dir, query_syntax=query_syntax
        )
    return SearchTool(
        backend,
        top_k=top_k,
        max_output_chars=max_output_chars,
        cache_size=cache_size,
        close_backend=backend is not None,
    )
