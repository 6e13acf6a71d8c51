"""Where parity results go and how they are written: the JSON report every CPU layer adds its
keys to (`REPORT_PATH`, `merge_into_report`), plain JSON files (`write_json`), markdown tables
(`markdown_table`) and the generated blocks of the docs pages (`replace_block`), and PNG
figures (`pyplot`, `save_figure`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

__all__ = [
    "DOCS_DIR",
    "REPORT_PATH",
    "markdown_table",
    "merge_into_report",
    "pyplot",
    "replace_block",
    "save_figure",
    "write_json",
]

_PARITY_DIR = Path(__file__).resolve().parents[1]

REPORT_PATH = _PARITY_DIR / "report.json"
"""The CPU layers' report: layer 1 writes its keys, layer 3 (`parity.update`) ``layer3``."""

DOCS_DIR = _PARITY_DIR.parent / "docs"
"""The docs pages whose tables are generated from the reports."""


def merge_into_report(path: Path, entries: dict[str, Any]) -> None:
    """Write `entries` as top-level keys of the JSON report at `path`, keeping its other
    keys; a non-finite float is written as its string (``"nan"``, ``"inf"``)."""
    report = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    report.update(_jsonable(entries))
    path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def write_json(path: Path, data: Any) -> None:
    """`data` as indented JSON at `path` (parent folders created; values JSON does not know,
    such as paths, written as their string)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A GitHub markdown table: the header, its rule, one line per row. A ``|`` inside a
    cell becomes ``/``; a row shorter than the header gets empty cells."""
    lines = [_markdown_row(header), "|" + "---|" * len(header)]
    lines += [_markdown_row([*row, *[""] * (len(header) - len(row))]) for row in rows]
    return "\n".join(lines) + "\n"


def _markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(str(cell).replace("|", "/") for cell in cells) + " |"


def replace_block(text: str, start_marker: str, end_marker: str, body: str) -> str:
    """`text` with `body` between `start_marker` and `end_marker` (a generated block of a
    docs page); raises `ValueError` when the markers are missing."""
    start, end = text.find(start_marker), text.find(end_marker)
    if start < 0 or end < start:
        raise ValueError(f"no {start_marker} ... {end_marker} block in the docs text")
    return text[: start + len(start_marker)] + "\n" + body + text[end:]


def pyplot(needed_by: str) -> ModuleType:
    """``matplotlib.pyplot`` on a file-only backend; a missing matplotlib is an error that
    names `needed_by` and the extra that installs it."""
    from xpgym.core.optional import headless_pyplot

    return headless_pyplot(needed_by=needed_by, install='pip install "xpgym[torch]"')


def save_figure(fig: Any, path: Path) -> None:
    """Lay out `fig`, write it to `path` as a PNG (110 dpi; parent folders created) and close
    it."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    pyplot("parity figures").close(fig)
