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

Backends
--------

A `SearchBackend` answers ``search(query, top_k) -> list[SearchHit]``:

* `LocalSearchIndex`: a BM25 full-text index built with `tantivy` at construction, in memory
  or in a given directory, over documents ``{"title": str, "text": str, "id": str}``
  (`load_corpus` reads them from JSONL, one object per line; ``title`` and ``id`` are
  optional). Titles and texts are tokenised on non-alphanumerics, lowercased, ASCII-folded
  and stemmed (English); titles get a boost. By default a query is a bag of words (any word
  may match, BM25 ranks), so no input can be a syntax error. With ``query_syntax=True``
  tantivy's query language (``"exact phrase"``, ``+must``, ``-not``, ``title:word``) is tried
  first and an unparsable query falls back to the bag of words.
* `HTTPSearchBackend`: a client for a remote retrieval server (e.g. a dense retriever on a
  GPU box). Protocol, JSON over HTTP::

      POST <url>   Content-Type: application/json
      {"query": "capital of Austria", "top_k": 3}

      200 OK       Content-Type: application/json
      {"results": [{"title": "Vienna", "text": "Vienna is ...", "score": 12.3}, ...]}

  ``results`` is best first, at most ``top_k`` long; ``title`` (default ``""``), ``score``
  (default ``0.0``) and ``id`` are optional. Any other status is an error. Only the Python
  standard library is used (`urllib`); `timeout_s` bounds the connection and each read.
  `make_search_server` serves any backend with this protocol (``python -m
  xpgym.core.tools.search --corpus docs.jsonl --port 8000`` serves a local index).

Backend failures (timeout, connection refused, an HTTP error status, a malformed response)
raise `SearchError` inside the backend; `SearchTool.execute` turns them into
``ToolResult(ok=False)`` with ``info["exit_reason"]`` set to the error's `reason` and the
infrastructure marker ``info["infra_error"]`` (`xpgym.core.errors`: not the policy's fault).

Caching and threads
-------------------

`SearchTool` keeps an in-memory LRU cache of results keyed by the whitespace-normalised
query and `top_k` (`cache_size` entries; ``0`` disables it; errors are never cached). The
tool, the cache and both backends are thread-safe: `LocalSearchIndex` takes a fresh tantivy
searcher for every query, and the cache is guarded by a lock.

The default corpus (`default_corpus_path`, ``xpgym/data/search_corpus.jsonl``) is a small
hand-written encyclopedia for the QA envs; `default_search_index` builds its index once per
process and shares it.
"""

from __future__ import annotations

import abc
import argparse
import http.server
import json
import logging
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xpgym.core.errors import INFRA_ERROR_KEY, InfraCause
from xpgym.core.optional import import_optional
from xpgym.core.tools.base import Tool, ToolCall, ToolResult
from xpgym.core.tools.calls import function_schema, parse_call

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = [
    "HTTPSearchBackend",
    "LocalSearchIndex",
    "SearchBackend",
    "SearchError",
    "SearchHit",
    "SearchTool",
    "default_corpus_path",
    "default_search_index",
    "format_hits",
    "load_corpus",
    "make_search_server",
    "make_search_tool",
]

logger = logging.getLogger(__name__)

_TOKENIZER = "xpgym_en"
_TRUNCATED = " ... [truncated]"
_MAX_QUERY_TERMS = 64


@dataclass(frozen=True)
class SearchHit:
    """One retrieved document.

    Attributes:
        title: The document's title (``""`` when it has none).
        text: The document's text.
        score: The backend's relevance score (higher is better; BM25 for the local index).
        doc_id: The document's id, when the backend knows it.
    """

    title: str
    text: str
    score: float = 0.0
    doc_id: str | None = None


class SearchError(Exception):
    """A backend could not answer a query.

    Attributes:
        reason: ``"timeout"``, ``"connection"`` (refused, reset, DNS), ``"http_error"`` (a
            non-2xx status) or ``"bad_response"`` (not the documented JSON).
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class SearchBackend(abc.ABC):
    """Answers queries with ranked documents. Implementations must be thread-safe."""

    @abc.abstractmethod
    def search(self, query: str, top_k: int) -> list[SearchHit]:
        """The best `top_k` documents for `query`, best first (fewer if fewer match).

        Raises:
            SearchError: The backend failed (never for a merely odd query).
        """

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release resources. Safe to call more than once."""


# ------------------------------------------------------------------------------ corpus


def default_corpus_path() -> Traversable:
    """The shipped corpus, ``xpgym/data/search_corpus.jsonl`` (see `xpgym.data`)."""
    return resources.files("xpgym.data").joinpath("search_corpus.jsonl")


def _check_document(doc: Any, where: str) -> dict[str, str]:
    if not isinstance(doc, Mapping):
        raise ValueError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    text = doc.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f'{where}: "text" must be a non-empty string, got {text!r:.60}')
    title = doc.get("title", "")
    if title is None:
        title = ""
    if not isinstance(title, str):
        raise ValueError(f'{where}: "title" must be a string, got {title!r:.60}')
    doc_id = doc.get("id")
    if doc_id is not None and not isinstance(doc_id, (str, int)):
        raise ValueError(f'{where}: "id" must be a string or an integer, got {doc_id!r:.60}')
    return {"title": title, "text": text, "id": "" if doc_id is None else str(doc_id)}


def load_corpus(source: str | os.PathLike[str] | Traversable) -> list[dict[str, str]]:
    """Read a JSONL corpus: one ``{"title": str, "text": str, "id": str}`` object per line.

    Blank lines are skipped; ``title`` defaults to ``""`` and ``id`` to ``""`` (the local
    index then reports no id).

    Returns:
        The documents, in file order, each with exactly the keys ``title``, ``text``, ``id``.

    Raises:
        ValueError: A line is not JSON or not a valid document (the message names the line).
        OSError: The file cannot be read.
    """
    path = Path(source) if isinstance(source, (str, os.PathLike)) else source
    docs: list[dict[str, str]] = []
    with path.open("r", encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{source}:{number}"
            try:
                value = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{where}: invalid JSON ({exc})") from exc
            docs.append(_check_document(value, where))
    return docs


# ------------------------------------------------------------------------- local index


def _analyzer() -> Any:
    import tantivy

    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


class LocalSearchIndex(SearchBackend):
    """A BM25 index over documents, built with tantivy when constructed.

    Args:
        documents: Mappings with ``text`` (required), ``title`` and ``id`` (optional), e.g.
            from `load_corpus`.
        index_dir: Build the index in this directory (created if missing; an index already
            there is replaced) instead of in memory. `open` reopens it.
        query_syntax: Try tantivy's query language first (see the module docstring); the
            default reads every query as a bag of words.
        title_boost: Weight of a title match relative to a text match.

    Raises:
        ValueError: A document is invalid, or there are none.
        ImportError: tantivy is not installed.
    """

    def __init__(
        self,
        documents: Iterable[Mapping[str, Any]],
        *,
        index_dir: str | os.PathLike[str] | None = None,
        query_syntax: bool = False,
        title_boost: float = 2.0,
    ) -> None:
        tantivy = import_optional(
            "tantivy", needed_by="LocalSearchIndex", install='pip install "xpgym[tools]"'
        )
        docs = [_check_document(doc, f"document {i}") for i, doc in enumerate(documents)]
        if not docs:
            raise ValueError("LocalSearchIndex needs at least one document")
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("title", stored=True, tokenizer_name=_TOKENIZER)
        builder.add_text_field("text", stored=True, tokenizer_name=_TOKENIZER)
        builder.add_text_field("doc_id", stored=True, tokenizer_name="raw")
        schema = builder.build()
        path = None
        if index_dir is not None:
            Path(index_dir).mkdir(parents=True, exist_ok=True)
            path = str(index_dir)
        index = tantivy.Index(schema, path=path, reuse=False)
        index.register_tokenizer(_TOKENIZER, _analyzer())
        writer = index.writer(heap_size=50_000_000, num_threads=1)
        for doc in docs:
            writer.add_document(
                tantivy.Document(title=doc["title"], text=doc["text"], doc_id=doc["id"])
            )
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        self._setup(index, query_syntax=query_syntax, title_boost=title_boost)

    def __deepcopy__(self, memo: dict[int, Any]) -> LocalSearchIndex:
        """The index is read-only once built, so copies (of an env holding it) share it."""
        return self

    def _setup(self, index: Any, *, query_syntax: bool, title_boost: float) -> None:
        self._tantivy = import_optional(
            "tantivy", needed_by="LocalSearchIndex", install='pip install "xpgym[tools]"'
        )
        self._index = index
        self._schema = index.schema
        self._analyzer = _analyzer()
        self.query_syntax = query_syntax
        self.title_boost = float(title_boost)

    @classmethod
    def open(
        cls,
        index_dir: str | os.PathLike[str],
        *,
        query_syntax: bool = False,
        title_boost: float = 2.0,
    ) -> LocalSearchIndex:
        """Open an index that `LocalSearchIndex(..., index_dir=...)` built.

        Raises:
            ValueError: `index_dir` holds no index.
        """
        tantivy = import_optional(
            "tantivy", needed_by="LocalSearchIndex", install='pip install "xpgym[tools]"'
        )
        if not Path(index_dir).is_dir() or not tantivy.Index.exists(str(index_dir)):
            raise ValueError(f"no tantivy index in {str(index_dir)!r}; build one first")
        index = tantivy.Index.open(str(index_dir))
        index.register_tokenizer(_TOKENIZER, _analyzer())
        self = cls.__new__(cls)
        self._setup(index, query_syntax=query_syntax, title_boost=title_boost)
        return self

    @classmethod
    def from_jsonl(
        cls, path: str | os.PathLike[str] | Traversable, **kwargs: Any
    ) -> LocalSearchIndex:
        """Build an index over `load_corpus(path)`; `kwargs` go to the constructor."""
        return cls(load_corpus(path), **kwargs)

    @property
    def num_docs(self) -> int:
        """How many documents the index holds."""
        return int(self._index.searcher().num_docs)

    def analyze(self, text: str) -> list[str]:
        """The index terms of `text` (what the bag-of-words query searches for)."""
        return list(self._analyzer.analyze(text))

    def _terms_query(self, query: str) -> Any | None:
        tantivy = self._tantivy
        terms = list(dict.fromkeys(self._analyzer.analyze(query)))[:_MAX_QUERY_TERMS]
        if not terms:
            return None
        subqueries = []
        for term in terms:
            title = tantivy.Query.term_query(self._schema, "title", term)
            subqueries.append(
                (tantivy.Occur.Should, tantivy.Query.boost_query(title, self.title_boost))
            )
            subqueries.append(
                (tantivy.Occur.Should, tantivy.Query.term_query(self._schema, "text", term))
            )
        return tantivy.Query.boolean_query(subqueries)

    def _query(self, query: str) -> Any | None:
        if self.query_syntax:
            try:
                return self._index.parse_query(
                    query, ["title", "text"], field_boosts={"title": self.title_boost}
                )
            except ValueError as exc:
                logger.debug("query %r is not valid query syntax (%s); using its words", query, exc)
        return self._terms_query(query)

    def search(self, query: str, top_k: int) -> list[SearchHit]:
        """The `top_k` best documents by BM25; ``[]`` when no word of the query is indexed."""
        if top_k < 1:
            return []
        parsed = self._query(query)
        if parsed is None:
            return []
        searcher = self._index.searcher()
        hits = []
        for score, address in searcher.search(parsed, limit=top_k).hits:
            doc = searcher.doc(address)
            hits.append(
                SearchHit(
                    title=doc.get_first("title") or "",
                    text=doc.get_first("text") or "",
                    score=float(score),
                    doc_id=doc.get_first("doc_id") or None,
                )
            )
        return hits

    def __repr__(self) -> str:
        return f"LocalSearchIndex(num_docs={self.num_docs})"


_default_index: LocalSearchIndex | None = None
_default_lock = threading.Lock()


def default_search_index() -> LocalSearchIndex:
    """The index over the shipped corpus, built on first use and shared by the process."""
    global _default_index
    with _default_lock:
        if _default_index is None:
            _default_index = LocalSearchIndex.from_jsonl(default_corpus_path())
        return _default_index


# ------------------------------------------------------------------------------ HTTP


class HTTPSearchBackend(SearchBackend):
    """Client for a retrieval server speaking the JSON protocol in the module docstring.

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
        body = json.dumps({"query": query, "top_k": int(top_k)}).encode()
        request = urllib.request.Request(
            self.url,
            data=body,
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
                raise SearchError(
                    f"search server did not answer within {self.timeout_s:g} s", reason="timeout"
                ) from exc
            raise SearchError(
                f"cannot reach search server {self.url}: {exc.reason}", reason="connection"
            ) from exc
        except TimeoutError as exc:
            raise SearchError(
                f"search server did not answer within {self.timeout_s:g} s", reason="timeout"
            ) from exc
        except OSError as exc:
            raise SearchError(
                f"connection to search server {self.url} failed: {exc}", reason="connection"
            ) from exc
        if len(raw) > self.max_response_bytes:
            raise SearchError(
                f"search response exceeds {self.max_response_bytes} bytes", reason="bad_response"
            )
        return self._decode(raw)

    @staticmethod
    def _decode(raw: bytes) -> list[SearchHit]:
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

    def __repr__(self) -> str:
        return f"HTTPSearchBackend(url={self.url!r}, timeout_s={self.timeout_s:g})"


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
    both with ``{"error": message}``.
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
            if not 0 < length <= 1_000_000:
                self._reply(400, {"error": "a JSON body of at most 1 MB is required"})
                return
            try:
                request = json.loads(self.rfile.read(length))
                query, top_k = request["query"], request.get("top_k", 3)
                if not isinstance(query, str) or isinstance(top_k, bool):
                    raise TypeError
                top_k = max(1, min(int(top_k), max_top_k))
            except (ValueError, KeyError, TypeError):
                self._reply(400, {"error": 'expected {"query": str, "top_k": int}'})
                return
            try:
                hits = backend.search(query, top_k)
            except Exception as exc:
                logger.warning("search backend failed on %r", query, exc_info=True)
                self._reply(500, {"error": f"{type(exc).__name__}: {exc}"})
                return
            results = [
                {"title": h.title, "text": h.text, "score": h.score}
                | ({"id": h.doc_id} if h.doc_id is not None else {})
                for h in hits
            ]
            self._reply(200, {"results": results})

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("search server: " + format, *args)

    server = http.server.ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


# -------------------------------------------------------------------------------- tool


def format_hits(hits: Sequence[SearchHit], max_chars: int | None = None) -> str:
    """``Doc i (Title: t) text`` lines, best first, cut to `max_chars` (marker included)."""
    text = "\n".join(f"Doc {i} (Title: {h.title}) {h.text}" for i, h in enumerate(hits, 1))
    if max_chars is not None and len(text) > max_chars:
        keep = max(0, max_chars - len(_TRUNCATED))
        text = (text[:keep].rstrip() + _TRUNCATED)[:max_chars]
    return text


class _LRUCache:
    """A thread-safe LRU map with hit/miss counters."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._data: OrderedDict[Any, tuple[SearchHit, ...]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Any) -> tuple[SearchHit, ...] | None:
        with self._lock:
            value = self._data.get(key)
            if value is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: Any, value: tuple[SearchHit, ...]) -> None:
        if self.capacity <= 0:
            return
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.capacity:
                self._data.popitem(last=False)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "hits": self.hits,
                "misses": self.misses,
                "size": len(self._data),
                "capacity": self.capacity,
            }

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0


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
        self._cache = _LRUCache(cache_size)
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
        url: A retrieval server (see the module docstring); excludes `corpus`.
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


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m xpgym.core.tools.search``: serve a local index over HTTP (Ctrl-C stops)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--corpus", help="JSONL corpus (default: the shipped one)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    backend = LocalSearchIndex.from_jsonl(args.corpus) if args.corpus else default_search_index()
    server = make_search_server(backend, args.host, args.port)
    host, port = server.server_address[:2]
    sys.stderr.write(f"serving {backend!r} at http://{host}:{port}/search\n")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
