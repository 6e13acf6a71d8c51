"""Coding problems: the record format, the shipped sample set and a Hugging Face loader.

A `CodeProblem` is a statement plus tests of one of two kinds:

* `IOTest` (standard input / output): the solution is a program; it gets `IOTest.input` on
  stdin and must print `IOTest.output` (compared as described in `xpgym.envs.code.judge`).
* `CallTest` (function call): the problem names a function (`CodeProblem.fn_name`); the
  solution defines it; it is called with `CallTest.args` (JSON values) and must return one of
  `CallTest.accepted` (compared as JSON values, see `xpgym.envs.code.judge`).

Record formats read by `problem_from_record` (keys configurable, see its arguments):

* the shipped format (``xpgym/data/code_problems.jsonl``, one JSON object per line)::

    {"id": "two-sum", "title": "...", "statement": "...", "fn_name": "two_sum",
     "tests": [{"args": [[2, 7], 9], "expected": [0, 1]}, ...], "solution": "def two_sum..."}

  with ``{"input": str, "output": str}`` tests when there is no ``fn_name``;
* the CodeContests / TACO / APPS format used by GEM's hub datasets (``axon-rl/CodeContest``
  and others): ``"tests": {"inputs": [...], "outputs": [...]}``, possibly as a JSON string,
  with an optional ``"fn_name"`` inside it for call tests. An input or output given as a list
  of lines is joined with newlines. For call tests each input is the argument list and each
  output the expected return value; as in APPS, a non-empty list output ``[x]`` also accepts
  ``x`` (APPS wraps return values in a list).

`load_sample_problems()` reads the shipped set (16 problems written for xpgym, each with a
reference solution that `tests/envs/test_code_env.py` runs against its tests in the sandbox).
`DatasetProblems` wraps a Hugging Face `datasets.Dataset` (a hub id or a local
json/jsonl/parquet/csv/arrow file, loaded by `load_dataset_problems` through
`xpgym.envs.common.datasets.load_split`) and converts a row only when it is used, so huge test sets
are not all decoded at start-up.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Protocol

from xpgym.envs.common.datasets import check_table, describe_source, load_split

__all__ = [
    "CallTest",
    "CodeProblem",
    "DatasetProblems",
    "IOTest",
    "ProblemSet",
    "load_dataset_problems",
    "load_sample_problems",
    "problem_from_record",
]

_SAMPLE_FILE = "code_problems.jsonl"


@dataclass(frozen=True)
class IOTest:
    """A standard-input / standard-output test: feed `input`, expect `output`."""

    input: str
    output: str


@dataclass(frozen=True)
class CallTest:
    """A function-call test: call the problem's function with `args`; any of `accepted`
    (JSON values) is a correct return value."""

    args: tuple[Any, ...]
    accepted: tuple[Any, ...]


@dataclass(frozen=True)
class CodeProblem:
    """One problem.

    Attributes:
        id: A name unique within its set.
        statement: The task as shown to the model (without the answer-format instructions,
            which the env adds).
        tests: All `IOTest` when `fn_name` is `None`, else all `CallTest`; at least one.
        fn_name: The function call tests call, or `None` for stdin/stdout problems.
        title: A short title ('' if none).
        solution: A reference solution, when the source has one.
    """

    id: str
    statement: str
    tests: tuple[IOTest, ...] | tuple[CallTest, ...]
    fn_name: str | None = None
    title: str = ""
    solution: str | None = None

    def __post_init__(self) -> None:
        if not self.tests:
            raise ValueError(f"code problem {self.id!r} has no tests")
        kind = IOTest if self.fn_name is None else CallTest
        if not all(isinstance(test, kind) for test in self.tests):
            raise ValueError(
                f"code problem {self.id!r}: every test must be a {kind.__name__} "
                f"(fn_name={self.fn_name!r})"
            )


class ProblemSet(Protocol):
    """What `xpgym.envs.code.env.CodeEnv` draws problems from: a sized, indexable set."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> CodeProblem: ...


def _text(value: Any) -> str:
    """A test input or output as text; a list of lines is joined with newlines."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "\n".join(str(line) for line in value)
    return str(value)


def _call_args(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def _accepted(expected: Any, *, apps_wrapped: bool) -> tuple[Any, ...]:
    if apps_wrapped and isinstance(expected, list) and len(expected) == 1:
        return (expected, expected[0])
    return (expected,)


def _parse_tests(raw: Any, fn_name: str | None, where: str) -> tuple[tuple[Any, ...], str | None]:
    """Tests of a record in any supported format, and the function name they call."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"{where}: the tests are a string but not JSON ({exc})") from None
    if isinstance(raw, Mapping):
        if "inputs" not in raw or "outputs" not in raw:
            raise ValueError(
                f"{where}: a tests mapping needs 'inputs' and 'outputs', got keys {sorted(raw)}"
            )
        inputs, outputs = list(raw["inputs"]), list(raw["outputs"])
        if len(inputs) != len(outputs):
            raise ValueError(
                f"{where}: {len(inputs)} test inputs but {len(outputs)} outputs; they must pair up"
            )
        fn_name = raw.get("fn_name") or fn_name
        if fn_name:
            tests: tuple[Any, ...] = tuple(
                CallTest(_call_args(i), _accepted(o, apps_wrapped=True))
                for i, o in zip(inputs, outputs, strict=True)
            )
        else:
            tests = tuple(IOTest(_text(i), _text(o)) for i, o in zip(inputs, outputs, strict=True))
        return tests, fn_name or None
    if isinstance(raw, Sequence):
        parsed: list[IOTest | CallTest] = []
        for k, test in enumerate(raw):
            if isinstance(test, Mapping) and "input" in test and "output" in test and not fn_name:
                parsed.append(IOTest(_text(test["input"]), _text(test["output"])))
            elif isinstance(test, Mapping) and "args" in test and "expected" in test and fn_name:
                parsed.append(
                    CallTest(
                        _call_args(test["args"]), _accepted(test["expected"], apps_wrapped=False)
                    )
                )
            else:
                want = "{'args', 'expected'}" if fn_name else "{'input', 'output'}"
                raise ValueError(
                    f"{where}: test {k} must be a mapping with keys {want}: {test!r:.200}"
                )
        return tuple(parsed), fn_name
    raise ValueError(
        f"{where}: tests must be a list, a mapping with 'inputs'/'outputs', or a JSON string "
        f"of one, got {type(raw).__name__}"
    )


def problem_from_record(
    record: Mapping[str, Any],
    *,
    index: int = 0,
    statement_key: str = "statement",
    tests_key: str = "tests",
    id_key: str = "id",
    fn_name_key: str = "fn_name",
    solution_key: str = "solution",
    title_key: str = "title",
) -> CodeProblem:
    """Build a `CodeProblem` from one record (see the module docstring for the formats).

    Args:
        record: The record (a dict, a dataset row).
        index: Its position, used as the id when the record has no `id_key`.
        statement_key, tests_key: Keys of the statement and the tests (required).
        id_key, fn_name_key, solution_key, title_key: Keys of optional fields; a missing or
            empty value is fine.

    Raises:
        KeyError: the statement or tests key is missing; the message lists the record's keys.
        ValueError: the tests are malformed or empty.
    """
    where = f"code problem {index}"
    for key in (statement_key, tests_key):
        if key not in record:
            raise KeyError(
                f"{where}: no {key!r} field; the record has {sorted(record)} (pass "
                "statement_key=/tests_key= to name the right ones)"
            )
    fn_name = record.get(fn_name_key) or None
    tests, fn_name = _parse_tests(record[tests_key], fn_name, where)
    problem_id = record.get(id_key)
    return CodeProblem(
        id=str(problem_id) if problem_id not in (None, "") else str(index),
        statement=str(record[statement_key]),
        tests=tests,
        fn_name=fn_name,
        title=str(record.get(title_key) or ""),
        solution=record.get(solution_key) or None,
    )


@cache
def load_sample_problems() -> tuple[CodeProblem, ...]:
    """The shipped problem set (``xpgym/data/code_problems.jsonl``), read once."""
    text = resources.files("xpgym.data").joinpath(_SAMPLE_FILE).read_text(encoding="utf-8")
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    return tuple(problem_from_record(r, index=i) for i, r in enumerate(records))


class DatasetProblems:
    """A `ProblemSet` over a Hugging Face `datasets.Dataset`; rows are converted on access.

    Args:
        dataset: The dataset (one split).
        statement_key, tests_key: The columns of the statement and the tests.
        source: How error messages name the dataset.
        owner: The env's id or class name, put in front of error messages.
        **keys: The other key arguments of `problem_from_record` (optional columns).

    Raises:
        DatasetSchemaError: the statement or tests column is missing (the message lists the
            columns); a `KeyError` and a `ValueError`.
        ValueError: the dataset is empty.
    """

    def __init__(
        self,
        dataset: Any,
        *,
        statement_key: str = "statement",
        tests_key: str = "tests",
        source: str = "the dataset",
        owner: str | None = None,
        **keys: str,
    ) -> None:
        check_table(
            dataset,
            {"statement_key": statement_key, "tests_key": tests_key},
            source=source,
            owner=owner,
        )
        self._dataset = dataset
        self._keys = {"statement_key": statement_key, "tests_key": tests_key, **keys}

    def __len__(self) -> int:
        return len(self._dataset)

    def __getitem__(self, index: int) -> CodeProblem:
        return problem_from_record(self._dataset[int(index)], index=int(index), **self._keys)


def load_dataset_problems(
    path: str,
    *,
    split: str | None = "train",
    name: str | None = None,
    owner: str | None = None,
    **keys: str,
) -> DatasetProblems:
    """Load problems with `xpgym.envs.common.datasets.load_split` from a hub id or a local file.

    Args:
        path: A local ``.json``/``.jsonl``/``.parquet``/``.csv``/``.arrow`` file (its split
            is ``"train"``), else a Hugging Face hub dataset id (``"axon-rl/CodeContest"``:
            downloads on first use, then the local cache answers) or a local dataset
            directory.
        split: The split to use. `None` works when the dataset has a single split.
        name: The dataset configuration (hub datasets with several), else `None`.
        owner: The env's id or class name, put in front of error messages.
        **keys: The key arguments of `problem_from_record` (``statement_key="problem"``...).

    Raises:
        The errors of `load_split`: `ImportError` (no `datasets`; names the extra),
        `FileNotFoundError` (`path` ends like a data file but no such file exists),
        `DatasetLoadError`, `DatasetSchemaError` (a `KeyError`: the split or a key column is
        missing; the message lists what exists), `ValueError` (no rows).
    """
    table = load_split(path, split=split, name=name, owner=owner)
    source = describe_source(path, name=name, split=split)
    return DatasetProblems(table, source=source, owner=owner, **keys)
