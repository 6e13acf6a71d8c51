"""The contract of a search backend: `SearchBackend`, the `SearchHit` it returns and the
`SearchError` it raises.

A backend answers ``search(query, top_k) -> list[SearchHit]``, best first. Backend failures
(timeout, connection refused, an HTTP error status, a malformed response) raise `SearchError`
inside the backend; `xpgym.core.tools.search.tool.SearchTool` turns them into a failed call
with the infrastructure marker (`xpgym.core.errors`).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

__all__ = ["SearchBackend", "SearchError", "SearchHit"]


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
