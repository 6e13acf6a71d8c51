"""Document collections: JSONL corpora (`load_corpus`) and the shipped one.

A document is ``{"title": str, "text": str, "id": str}``; ``title`` and ``id`` are optional.
The default corpus (`default_corpus_path`, ``xpgym/data/search_corpus.jsonl``) is a small
hand-written encyclopedia for the QA envs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["check_document", "default_corpus_path", "load_corpus"]


def default_corpus_path() -> Traversable:
    """The shipped corpus, ``xpgym/data/search_corpus.jsonl`` (see `xpgym.data`)."""
    return resources.files("xpgym.data").joinpath("search_corpus.jsonl")


def check_document(doc: Any, where: str) -> dict[str, str]:
    """`doc` as ``{"title", "text", "id"}`` strings (``""`` for a missing title or id).

    Raises:
        ValueError: `doc` is not a mapping with a non-empty string ``text``, a string
            ``title`` and a string or integer ``id``; the message starts with `where`.
    """
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
            docs.append(check_document(value, where))
    return docs
