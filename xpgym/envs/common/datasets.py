"""Load the data of dataset-backed envs with Hugging Face `datasets`, from the hub or a file.

Also `pick_index`, how a dataset-backed env chooses its item at `reset`.

`load_split` is the one loader of the dataset-backed envs (math, QA and code); the envs keep
only their own conversion of a row (gold-answer extraction, test parsing). Where the data
comes from (`path`):

* a local **data file** ``.json``, ``.jsonl``, ``.csv``, ``.parquet`` or ``.arrow``
  (recognised by its suffix, see `DATA_FILE_BUILDERS`; read with the `datasets` builder of
  that format; its one split is ``"train"``). Such a path that does not exist raises
  `FileNotFoundError`: it is never sent to the hub as a dataset id.
* anything else: a **hub id** (``"owner/name"``: downloads on first use, then the local
  Hugging Face cache answers), a local dataset **directory**, or a `datasets` **builder
  name** with `data_files` (``path="json", data_files=[...]``), all passed to
  ``datasets.load_dataset(path, name, data_files=data_files)``.

Nothing here downloads at import; `datasets` is imported on the first load. While a load
runs, the `datasets` progress bars are off (they are put back as they were afterwards,
unless ``HF_DATASETS_DISABLE_PROGRESS_BARS`` is set, which always wins); a download from the
hub still shows `huggingface_hub`'s own progress bars.

Error contract (every message starts with ``"<owner>: "`` when an `owner`, the env's id or
class name, is given, then names the source as `describe_source` writes it):

* `FileNotFoundError`: a local data file does not exist;
* `ValueError`: an empty local data file, or a split with no rows;
* `DatasetLoadError`: ``datasets.load_dataset`` itself failed (no network, unknown hub id or
  configuration, unreadable or torn file, no room left for its cache); the original
  exception is its ``__cause__``, and the message ends with the root of that exception's
  chain (``"(caused by OSError: [Errno 27] File too large)"``) when there is one;
* `DatasetSchemaError` (a `ValueError` and a `KeyError`): no such split, several splits and
  none chosen, or a missing column; the message lists the splits or columns there are.

There is no row cache here: each call loads (`datasets` keeps its own on-disk cache of
prepared hub datasets). `xpgym.envs.math.dataset.load_questions` keeps converted rows in
memory for the math envs; the QA and code envs load once, when they are made.

Faults (`tests/faults/test_dataset_loader_faults.py`): a process killed while `datasets`
writes its cache leaves an ``.incomplete`` directory that the next load replaces (it reads
every row); a load that runs out of disk (or file-size quota) raises `DatasetLoadError`
naming the root cause, and leaves nothing a later load would trust.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from xpgym.core.optional import import_optional
from xpgym.envs.common.arguments import is_int

__all__ = [
    "DATA_FILE_BUILDERS",
    "DataFiles",
    "DatasetLoadError",
    "DatasetSchemaError",
    "check_table",
    "describe_source",
    "load_records",
    "load_split",
    "pick_index",
]

logger = logging.getLogger(__name__)

DATA_FILE_BUILDERS = {
    ".json": "json",
    ".jsonl": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".arrow": "arrow",
}
"""The `datasets` builder for each local file suffix `load_split` reads."""

DataFiles = str | Sequence[str] | Mapping[str, str | Sequence[str]] | None
"""What ``datasets.load_dataset(data_files=...)`` takes: a file, files, or split -> file(s)."""


class DatasetLoadError(RuntimeError):
    """``datasets.load_dataset`` failed (no network, unknown dataset or configuration, ...)."""


class DatasetSchemaError(ValueError, KeyError):
    """A split or column that was asked for is not in the dataset, or the dataset has several
    splits and none was chosen. Both a `ValueError` and a `KeyError` (callers catch either)."""

    def __str__(self) -> str:
        return ValueError.__str__(self)  # not KeyError's quoted repr of the message


def describe_source(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    split: str | None = None,
    data_files: DataFiles = None,
) -> str:
    """How error messages name a dataset: ``dataset 'path' (name=..., data_files=...,
    split=...)``, with only the arguments that were given."""
    extras = [
        f"{key}={value!r}" for key, value in (("name", name), ("data_files", data_files)) if value
    ]
    if split is not None:
        extras.append(f"split={split!r}")
    return f"dataset {os.fspath(path)!r}" + (f" ({', '.join(extras)})" if extras else "")


def load_split(
    path: str | os.PathLike[str],
    *,
    split: str | None = None,
    name: str | None = None,
    data_files: DataFiles = None,
    columns: Mapping[str, str] | None = None,
    owner: str | None = None,
) -> Any:
    """Load one split of a dataset with ``datasets.load_dataset`` (see the module docstring).

    Args:
        path: A local data file, a local dataset directory, a hub id or a builder name.
        split: The split to read; `None` takes the only split (an error if there are more).
        name: The dataset configuration (hub datasets with several).
        data_files: Passed to ``load_dataset`` with a hub id, a directory or a builder name;
            not allowed with a local data file (the file is the data).
        columns: The columns the caller needs, by the argument that names each (e.g.
            ``{"question_key": "problem"}``), checked as `check_table` does.
        owner: The env's id or class name, put in front of every error message.

    Returns:
        The split, a ``datasets.Dataset`` with at least one row.

    Raises:
        ImportError: `datasets` is not installed (the message names the extra).
        FileNotFoundError, ValueError, DatasetLoadError, DatasetSchemaError: see the module
            docstring.
    """
    datasets = import_optional(
        "datasets", needed_by="dataset-backed envs", install='pip install "xpgym[envs]"'
    )
    prefix = f"{owner}: " if owner else ""
    source = os.fspath(path)
    builder = DATA_FILE_BUILDERS.get(Path(source).suffix.lower())
    if builder is not None:
        if data_files is not None:
            raise ValueError(
                f"{prefix}data_files is for a hub id, a directory or a builder name; "
                f"{source!r} is a data file already"
            )
        if not os.path.isfile(source):
            raise FileNotFoundError(f"{prefix}dataset file {source!r} does not exist")
        if os.path.getsize(source) == 0:  # the json builder fails obscurely on these
            raise ValueError(f"{prefix}dataset file {source!r} is empty")
        target: str = builder
        files: DataFiles = source
    else:
        target, files = source, data_files
    described = describe_source(source, name=name, split=split, data_files=data_files)
    logger.debug("loading %s with datasets.load_dataset(%r, %r)", described, target, name)
    try:
        with _progress_bars_off(datasets):
            loaded = datasets.load_dataset(target, name, data_files=files)
    except Exception as exc:
        raise DatasetLoadError(
            f"{prefix}datasets.load_dataset failed for {described}: {_describe_failure(exc)}"
        ) from exc
    table = _pick_split(loaded, split, f"{prefix}{described}")
    check_table(table, columns or {}, source=described, owner=owner)
    return table


def _describe_failure(exc: BaseException) -> str:
    """``"<type>: <message>"`` of `exc`, followed by its root cause when `datasets` wrapped
    one (its `DatasetGenerationError` says only that generating failed; the disk being full
    or a torn data file is the part the user can act on)."""
    text = f"{type(exc).__name__}: {exc}"
    root, seen = exc, {id(exc)}
    while (inner := root.__cause__ or root.__context__) is not None and id(inner) not in seen:
        root = inner
        seen.add(id(root))
    if root is not exc:
        text += f" (caused by {type(root).__name__}: {root})"
    return text


def _pick_split(loaded: Mapping[str, Any], split: str | None, where: str) -> Any:
    """The requested split of a ``DatasetDict`` (or its only one)."""
    splits = list(loaded)
    if split is None:
        if len(splits) != 1:
            raise DatasetSchemaError(f"{where} has splits {splits}; pass split= to choose one")
        split = splits[0]
    if split not in loaded:
        raise DatasetSchemaError(f"{where} has no split {split!r}; its splits are {splits}")
    return loaded[split]


def check_table(
    table: Any, columns: Mapping[str, str], *, source: str, owner: str | None = None
) -> None:
    """Check that `table` (a ``datasets.Dataset``) has the `columns` and at least one row.

    Args:
        table: The dataset split.
        columns: The needed columns, by the argument that names each
            (``{"statement_key": "statement"}``): the message says which argument to change.
        source: How messages name the dataset (`describe_source`, or e.g. ``"the dataset"``).
        owner: The env's id or class name, put in front of the message.

    Raises:
        DatasetSchemaError: a column is missing (the message lists the columns there are).
        ValueError: the table has no rows.
    """
    prefix = f"{owner}: " if owner else ""
    present = list(table.column_names)
    for role, column in columns.items():
        if column not in present:
            raise DatasetSchemaError(
                f"{prefix}{source} has no column {column!r} ({role}); it has columns "
                f"{present}: pass {role}= with one of them"
            )
    if len(table) == 0:
        raise ValueError(f"{prefix}{source} has no rows")


class _ProgressBarsOff:
    """Keeps the `datasets` progress bars off while any load runs (loads may overlap in
    threads), then puts them back as they were. ``HF_DATASETS_DISABLE_PROGRESS_BARS``, when
    set, is left to decide."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._restore = False

    @contextlib.contextmanager
    def __call__(self, datasets: ModuleType) -> Iterator[None]:
        with self._lock:
            if self._active == 0:
                forced = getattr(datasets.config, "HF_DATASETS_DISABLE_PROGRESS_BARS", None)
                self._restore = forced is None and datasets.is_progress_bar_enabled()
                if self._restore:
                    datasets.disable_progress_bars()
            self._active += 1
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if self._active == 0 and self._restore:
                    datasets.enable_progress_bars()


_progress_bars_off = _ProgressBarsOff()


def load_records(
    path: str | os.PathLike[str],
    *,
    split: str | None = None,
    name: str | None = None,
    data_files: DataFiles = None,
    question_key: str = "question",
    answer_key: str = "answer",
    owner: str | None = None,
) -> list[dict[str, Any]]:
    """Read ``{"question": ..., "answer": ...}`` records with `load_split`.

    Args:
        path, split, name, data_files, owner: As for `load_split`.
        question_key: The column holding the question.
        answer_key: The column holding the answer (any type: a string, a number, a list).

    Returns:
        One dict per row, in dataset order, with exactly the keys ``"question"`` and
        ``"answer"`` holding the row's values of `question_key` and `answer_key`.

    Raises:
        The errors of `load_split`.
    """
    table = load_split(
        path,
        split=split,
        name=name,
        data_files=data_files,
        columns={"question_key": question_key, "answer_key": answer_key},
        owner=owner,
    )
    rows = table.select_columns(list(dict.fromkeys((question_key, answer_key)))).to_list()
    return [{"question": row[question_key], "answer": row[answer_key]} for row in rows]


def pick_index(
    options: Mapping[str, Any] | None, size: int, np_random: np.random.Generator, owner: str
) -> int:
    """The item a reset uses: ``options["index"]`` if given, else uniform from `np_random`.

    Args:
        options: The `reset` options (may be `None`).
        size: How many items there are (at least 1).
        np_random: The env's generator (one draw when no index is given).
        owner: The env's name, for the error message.

    Raises:
        ValueError: ``options["index"]`` is not an integer (a `bool` is not) in ``[0, size)``.
    """
    if options and options.get("index") is not None:
        index = options["index"]
        if not is_int(index) or not 0 <= index < size:
            raise ValueError(
                f"{owner}: options['index'] must be an int in [0, {size}), got {index!r}"
            )
        return int(index)
    return int(np_random.integers(size))
