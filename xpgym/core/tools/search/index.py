"""`LocalSearchIndex`: a BM25 full-text index built with tantivy, and the shared index over
the shipped corpus (`default_search_index`).

The index is built at construction, in memory or in a given directory, over documents
``{"title": str, "text": str, "id": str}`` (`xpgym.core.tools.search.corpus.load_corpus`
reads them from JSONL). Titles and texts are tokenised on non-alphanumerics, lowercased,
ASCII-folded and stemmed (English); titles get a boost. By default a query is a bag of words
(any word may match, BM25 ranks), so no input can be a syntax error. With
``query_syntax=True`` tantivy's query language (``"exact phrase"``, ``+must``, ``-not``,
``title:word``) is tried first and an unparsable query falls back to the bag of words.

The index is read-only once built and thread-safe: it takes a fresh tantivy searcher for
every query.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xpgym.core.optional import import_optional
from xpgym.core.tools.search.backend import SearchBackend, SearchHit
from xpgym.core.tools.search.corpus import check_document, default_corpus_path, load_corpus

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["LocalSearchIndex", "default_search_index"]

logger = logging.getLogger(__name__)

_TOKENIZER = "xpgym_en"
_MAX_QUERY_TERMS = 64


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
        docs = [check_document(doc, f"document {i}") for i, doc in enumerate(documents)]
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
