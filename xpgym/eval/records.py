"""Episode records: one JSON object per line of ``episodes.jsonl``, appended as episodes end.

An evaluation plans episodes keyed by ``(env_id, seed, sample)``. Each finished episode
appends one record; on a re-run the file is read back and keys that already have a record are
skipped (failed ones too, unless ``retry_failed``), so an interrupted run resumes where it
stopped. When a key has several records (a failed one, then a retried one) the last wins.

A record::

    {"env_id": "game:GuessTheNumber-v0-easy", "seed": 0, "sample": 0,
     "status": "ok",                 # or "failed", or "infra_error"
     "error": null,                  # "failed": "<ExceptionType>: <message>";
                                     # "infra_error": "<kind>: <message>"
     "infra_error": {...},           # only "infra_error": {"kind", "message"}
     "started_at": "2025-01-01T12:00:00Z", "seconds": 1.25,   # wall-clock time
     "results": [                    # one entry per agent (one, agent null, single-agent)
        {"agent": null, "model": "<model spec>", "return": 1.0, "turns": 3,
         "success": true, "invalid_actions": 0, "tokens": 42,   # tokens: null if unknown
         "metrics": {"f1": 0.5},                                 # Episode.info["metrics"]
         "generation_seconds": [0.21, 0.19, 0.2]}],              # per policy request
     "episode": {...},               # single-agent: `Episode.to_dict()` (token ids dropped)
     "transcript": null}             # multi-agent: {"reset_seed": int, "truncated_reason":
                                     #   "max_turns" | null, "steps": [...]} (the steps of
                                     #   `xpgym.eval.multiagent`)

``episode`` holds every turn's observation, action, reward, flags and info (tool calls are in
``info["tool_calls"]``), and loads back with `xpgym.core.trajectory.Episode.from_dict`. A failed
record has ``results == []`` and no episode or transcript. An ``"infra_error"`` record (the
episode ended on an infrastructure failure, `xpgym.core.errors`) has ``results == []`` and
keeps its ``episode``.

A line that does not parse (the tail of a run killed while writing) is skipped with a warning;
the next append starts on a new line.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

__all__ = [
    "EpisodeKey",
    "RecordWriter",
    "load_records",
    "record_key",
    "to_line",
    "without_transcript",
]

logger = logging.getLogger(__name__)

EpisodeKey = tuple[str, int, int]
"""``(env_id, seed, sample)``: one planned episode."""

_TRANSCRIPTS = ("episode", "transcript")


def record_key(record: dict[str, Any]) -> EpisodeKey:
    """The `EpisodeKey` of a record."""
    return (record["env_id"], record["seed"], record["sample"])


def to_line(record: dict[str, Any]) -> str:
    """The record as one line of JSON (with its newline).

    Raises:
        TypeError, ValueError: the record holds a value JSON cannot store (an object, NaN).
    """
    return json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n"


def without_transcript(record: dict[str, Any]) -> dict[str, Any]:
    """A shallow copy of `record` without its ``episode`` and ``transcript``."""
    return {name: value for name, value in record.items() if name not in _TRANSCRIPTS}


def load_records(path: str | Path, *, transcripts: bool = True) -> dict[EpisodeKey, dict[str, Any]]:
    """The records of `path` by key, the last one of each key; ``{}`` if there is no file.

    With ``transcripts=False`` the ``episode`` and ``transcript`` fields are dropped (what a
    summary needs fits in memory for any number of episodes).
    """
    path = Path(path)
    if not path.exists():
        return {}
    records: dict[EpisodeKey, dict[str, Any]] = {}
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                records[record_key(record)] = record if transcripts else without_transcript(record)
            except (ValueError, KeyError, TypeError) as exc:
                logger.warning("%s:%d: skipping an unreadable record (%s)", path, number, exc)
    return records


class RecordWriter:
    """Appends record lines to a JSONL file, flushing each one (use as a context manager)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: TextIO | None = None

    def __enter__(self) -> RecordWriter:
        torn = (
            self.path.exists()
            and self.path.stat().st_size > 0
            and not _ends_with_newline(self.path)
        )
        self._file = self.path.open("a", encoding="utf-8")
        if torn:  # a killed run left half a line: never glue a new record onto it
            self._file.write("\n")
        return self

    def write(self, line: str) -> None:
        """Append one line from `to_line` and flush it to the OS."""
        assert self._file is not None, "use RecordWriter as a context manager"
        self._file.write(line)
        self._file.flush()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, 2)
        return f.read(1) == b"\n"
