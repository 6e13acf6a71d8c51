r"""MathDatasetEnv: answer a math question drawn from a dataset; graded by math-verify.

The episode rules, rewards and ``info`` keys are those of
`xpgym.envs.common.answer_env.BoxedAnswerEnv` (single-turn by default: one reply, reward 1.0 if
its last ``\boxed{}`` equals the gold answer, else 0.0; ``max_turns > 1`` for retries with
feedback). What this module adds is where the questions come from:

* `reset()` draws a row uniformly at random with `np_random` (rows repeat across episodes:
  sampling is with replacement), or takes ``options={"index": i}`` (to sweep an eval set in
  order). Its info adds ``index``, the row.
* The rows are read with Hugging Face `datasets.load_dataset` the first time they are
  needed (the first `reset()`), never at import or construction, then kept in memory as
  plain strings and shared by every env that reads the same source in this process.
* `path` is a hub dataset id (``"axon-rl/math-eval"``; downloads on first use, then the local
  cache), a `datasets` builder name with `data_files` (``"json"``), or a local
  ``.json``/``.jsonl``/``.parquet``/``.csv``/``.arrow`` file. `None` is the shipped sample,
  ``xpgym/data/math_sample.jsonl`` (20 problems with checked answers; keys ``problem`` and
  ``answer``).
* The question is the `question_key` column. The gold answer is the `answer_key` column: a
  string, a number, or a list of acceptable answers (``axon-rl/math-eval`` stores lists).
  With `answer_regex`, each gold answer is the regex's first group (or whole match) in that
  text: GSM8K's solutions end with ``#### 42``, so ``answer_regex=r"####\s*(.+?)\s*$"``.

Loading (where the data comes from, the split and column checks, the errors) is
`xpgym.envs.common.datasets.load_split`'s; its errors name the env id, the dataset source and what
exists (the splits, the columns). This module adds a `ValueError` for a missing gold answer
or one that `answer_regex` does not match, naming the row.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from importlib import resources
from typing import Any

from xpgym.envs.common.answer_env import Problem
from xpgym.envs.common.datasets import (
    DataFiles,
    DatasetLoadError,
    describe_source,
    load_records,
    pick_index,
)
from xpgym.envs.math.answer_env import MathAnswerEnv

__all__ = [
    "DatasetLoadError",
    "MathDatasetEnv",
    "QuestionSet",
    "load_questions",
    "sample_path",
]

_SAMPLE_FILE = "math_sample.jsonl"
_CACHE_SIZE = 32


@dataclass(frozen=True)
class QuestionSet:
    """Questions and their gold answers, row by row (immutable, shared between envs).

    Attributes:
        questions: One question per row.
        answers: One tuple of acceptable gold answers per row.
        source: A description of where the rows came from, for messages.
    """

    questions: tuple[str, ...]
    answers: tuple[tuple[str, ...], ...]
    source: str

    def __len__(self) -> int:
        return len(self.questions)


_cache: dict[str, QuestionSet] = {}  # load_questions' results by its arguments, oldest first
_cache_lock = threading.Lock()


def sample_path() -> str:
    """The path of the shipped sample, ``xpgym/data/math_sample.jsonl``."""
    return str(resources.files("xpgym.data").joinpath(_SAMPLE_FILE))


def load_questions(
    path: str,
    *,
    name: str | None = None,
    split: str | None = None,
    data_files: DataFiles = None,
    question_key: str = "problem",
    answer_key: str = "answer",
    answer_regex: str | None = None,
    owner: str | None = None,
) -> QuestionSet:
    """Read questions and gold answers with `xpgym.envs.common.datasets.load_records`.

    The result is cached in this process per arguments (the last `_CACHE_SIZE` sources; not
    per `owner`, which only names the env in errors), so many envs over one dataset load
    it once. Errors are not cached.

    Args:
        path: Hub id, builder name or local file; see the module docstring.
        name: The dataset configuration (e.g. ``"main"`` for ``openai/gsm8k``).
        split: The split; `None` works when the dataset has a single one.
        data_files: Passed to `load_dataset` (with a builder name such as ``"json"``): a
            file, a list of files, or a dict from split name to file(s).
        question_key, answer_key: The columns of the question and the gold answer.
        answer_regex: Extracts each gold answer from the answer text (first group, or the
            whole match).
        owner: The env's id or class name, put in front of error messages.

    Raises:
        The errors of `xpgym.envs.common.datasets.load_split` (`ImportError`, `FileNotFoundError`,
        `DatasetLoadError`, `ValueError` and its subclass `DatasetSchemaError`), and
        `ValueError` for a gold answer that is missing or does not match `answer_regex`.
    """
    args = (path, name, split, data_files, question_key, answer_key, answer_regex)
    key = json.dumps(args, sort_keys=True)
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    rows = _load(*args, owner)  # outside the lock: two threads may both load, one is kept
    with _cache_lock:
        rows = _cache.setdefault(key, rows)
        while len(_cache) > _CACHE_SIZE:
            del _cache[next(iter(_cache))]  # the oldest entry
    return rows


def _load(
    path: str,
    name: str | None,
    split: str | None,
    data_files: DataFiles,
    question_key: str,
    answer_key: str,
    answer_regex: str | None,
    owner: str | None,
) -> QuestionSet:
    records = load_records(
        path,
        split=split,
        name=name,
        data_files=data_files,
        question_key=question_key,
        answer_key=answer_key,
        owner=owner,
    )
    source = describe_source(path, name=name, split=split, data_files=data_files)
    where = f"{owner}: {source}" if owner else source
    pattern = re.compile(answer_regex) if answer_regex is not None else None
    questions = tuple(str(record["question"]) for record in records)
    answers = tuple(
        _gold_answers(record["answer"], pattern, f"{where}, row {i}, column {answer_key!r}")
        for i, record in enumerate(records)
    )
    return QuestionSet(questions, answers, source)


def _gold_answers(value: Any, pattern: re.Pattern[str] | None, where: str) -> tuple[str, ...]:
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items or any(item is None for item in items):
        raise ValueError(f"{where}: no gold answer ({value!r:.80})")
    texts = [str(item) for item in items]
    if pattern is None:
        return tuple(texts)
    golds = []
    for text in texts:
        match = pattern.search(text)
        if match is None:
            raise ValueError(
                f"{where}: answer_regex {pattern.pattern!r} does not match {text[-120:]!r}"
            )
        golds.append((match.group(1) if pattern.groups else match.group(0)).strip())
    return tuple(golds)


class MathDatasetEnv(MathAnswerEnv):
    r"""Answer a question drawn from a dataset; see the module docstring.

    Args:
        path: Hub dataset id, `datasets` builder name or local file; `None` for the shipped
            sample (`sample_path()`).
        name: Dataset configuration (hub datasets with several).
        split: Split to read; `None` when there is a single one.
        data_files: Files for a builder name (``path="json", data_files=[...]``).
        question_key, answer_key: Columns of the question and the gold answer.
        answer_regex: Extracts the gold answer from the answer column (see the module
            docstring).
        max_turns, instruction, no_answer_reward, grading_timeout_s: See `MathAnswerEnv`.

    Raises:
        ValueError, TypeError: bad `MathAnswerEnv` arguments, or an invalid `answer_regex`.
        Loading errors come from the first `reset()`; see `load_questions`.
    """

    def __init__(
        self,
        path: str | None = None,
        *,
        name: str | None = None,
        split: str | None = None,
        data_files: DataFiles = None,
        question_key: str = "problem",
        answer_key: str = "answer",
        answer_regex: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if answer_regex is not None:
            re.compile(answer_regex)  # fail now, not at the first reset
        self.path = sample_path() if path is None else str(path)
        self._load_args: dict[str, Any] = {
            "name": name,
            "split": split,
            "data_files": data_files,
            "question_key": question_key,
            "answer_key": answer_key,
            "answer_regex": answer_regex,
        }
        self._rows: QuestionSet | None = None

    @property
    def rows(self) -> QuestionSet:
        """The dataset's questions and answers, loaded on first access (see `load_questions`;
        its error messages start with this env's id)."""
        if self._rows is None:
            self._rows = load_questions(self.path, owner=self._owner(), **self._load_args)
        return self._rows

    def _owner(self) -> str:
        """How messages name this env: its id, or its class before `xpgym.make` sets one."""
        return repr(self.spec.id) if self.spec is not None else type(self).__name__

    def _draw_problem(self, options: dict[str, Any] | None) -> Problem:
        rows = self.rows
        index = pick_index(options, len(rows), self.np_random, f"{self._owner()} ({rows.source})")
        return Problem(rows.questions[index], rows.answers[index], {"index": index})
