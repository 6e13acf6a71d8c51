"""QAEnv: answer a question from a question/answer dataset; graded by SQuAD-style matching.

Episode rules:

* `reset()` picks a question uniformly at random with `np_random` (with replacement: the
  same question can come again), or the one at ``options={"index": i}``. The observation
  is the question with the answer-format instruction.
* The episode is **single-turn**: the first `step()` grades the action and terminates
  (``terminated=True, truncated=False``). Tool turns of a tool variant (e.g. ``-search``)
  are handled by `xpgym.core.wrappers.tools.ToolEnvWrapper` and never reach this env.
* The answer is the content of the **last complete** ``<answer>...</answer>`` block of the
  action (`xpgym.envs.common.answers.last_tagged`); everything else (reasoning, ``<think>``
  blocks) is ignored.

Grading (`xpgym.envs.qa.grading`): the answer and every gold answer are normalised the
SQuAD way (lowercase, no punctuation, no articles a/an/the, single spaces); exact match
(EM) and token F1 take the best gold answer.

Rewards:

========================================  ==============================  =====================
Action                                    reward                          ``info``
========================================  ==============================  =====================
``<answer>`` matching a gold answer       ``1.0``                         ``correct=True``
``<answer>`` not matching                 ``0.0`` (``reward="f1"``:       ``correct=False``
                                          the token F1 in ``[0, 1]``)
no complete ``<answer>...</answer>``      ``0.0`` (`FORMAT_ERROR_REWARD`) ``invalid_action=True``
block, or a blank one
========================================  ==============================  =====================

A missing answer gets 0.0, not a penalty, so that rewards stay in ``[0, 1]`` and compare
with GEM's QA envs; `info["invalid_action"]` tells it apart from a wrong answer (add a
penalty with a reward wrapper if training needs one).

``info`` after the step: ``correct`` (bool, exact match), ``em`` and ``f1`` (floats),
``invalid_action`` (bool), ``parsed_action`` (the stripped answer, or `None` when there is
no block), ``gold_answers`` (list of str) and ``metrics`` (``{"em", "f1"}``). After
`reset`: ``index`` (the question's row) and ``num_questions``.

Data: `load_records` (Hugging Face `datasets`, a hub id or a local file) reads the
`question_key` and `answer_key` columns when the env is made; an answer is a string, a
number or a list of them (`xpgym.envs.qa.grading.gold_answers`). Without `dataset` the env
uses the shipped ``xpgym/data/qa_sample.jsonl``: questions, many of them multi-hop, whose
answers are in the default search corpus (`xpgym.core.tools.search.corpus.default_corpus_path`).
"""

from __future__ import annotations

import os
from importlib import resources
from typing import Any, ClassVar

from xpgym.core.env import Env
from xpgym.envs.common.answers import last_tagged
from xpgym.envs.common.datasets import load_records, pick_index
from xpgym.envs.qa.grading import exact_match, gold_answers, token_f1

__all__ = ["FORMAT_ERROR_REWARD", "REWARDS", "QAEnv", "sample_path"]

FORMAT_ERROR_REWARD = 0.0
REWARDS = ("em", "f1")
"""Values of `QAEnv(reward=...)`: exact match (1.0 or 0.0) or token F1."""

_INSTRUCTIONS = (
    "Answer the question below. You may think first; then give your final answer, a short "
    "phrase, inside <answer> and </answer>, e.g. <answer>Paris</answer>. Only the last "
    "<answer> block counts."
)


def sample_path() -> Any:
    """The shipped sample questions, ``xpgym/data/qa_sample.jsonl`` (a `Traversable`)."""
    return resources.files("xpgym.data").joinpath("qa_sample.jsonl")


class QAEnv(Env[str]):
    """Answer a question in ``<answer>...</answer>``; see the module docstring.

    Args:
        dataset: A hub id or a local file/directory for `load_records`; `None` for the
            shipped sample (`sample_path`).
        split, name, data_files: As for `load_records`.
        question_key, answer_key: The dataset's question and answer columns.
        reward: ``"em"`` (1.0 for an exact match, else 0.0) or ``"f1"`` (token F1).

    Attributes:
        records: The questions as ``{"question": str, "answers": list[str]}``.
        index: The current question's position in `records` (`None` before `reset`).

    Raises:
        ValueError: unknown `reward`; a row with a blank question or with no usable gold
            answer (the row is named); plus `load_records`'s errors (an empty file, ...).
        TypeError: an answer field of an unsupported type.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": False}

    def __init__(
        self,
        dataset: str | os.PathLike[str] | None = None,
        *,
        split: str | None = None,
        name: str | None = None,
        data_files: Any = None,
        question_key: str = "question",
        answer_key: str = "answer",
        reward: str = "em",
    ) -> None:
        if reward not in REWARDS:
            raise ValueError(f"QAEnv: reward must be one of {REWARDS}, got {reward!r}")
        self.reward = reward
        options = {
            "split": split,
            "name": name,
            "data_files": data_files,
            "question_key": question_key,
            "answer_key": answer_key,
            "owner": "QAEnv",
        }
        if dataset is None:
            with resources.as_file(sample_path()) as path:
                rows = load_records(path, **options)
            dataset = "qa_sample.jsonl"
        else:
            rows = load_records(dataset, **options)
        self.records = _checked(rows, os.fspath(dataset))
        self.index: int | None = None

    @property
    def question(self) -> str:
        """The current question (after `reset`)."""
        return self.records[self._current()]["question"]

    @property
    def answers(self) -> list[str]:
        """The current question's gold answers (after `reset`)."""
        return list(self.records[self._current()]["answers"])

    def _current(self) -> int:
        if self.index is None:
            raise RuntimeError("QAEnv: call reset() first")
        return self.index

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Pick a question: ``options["index"]`` if given, else uniformly with `np_random`.

        Raises:
            ValueError: ``options["index"]`` is not a valid row number.
        """
        super().reset(seed=seed)
        count = len(self.records)
        self.index = pick_index(options, count, self.np_random, "QAEnv")
        obs = f"{_INSTRUCTIONS}\n\nQuestion: {self.question}"
        return obs, {"index": self.index, "num_questions": count}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Grade the answer and end the episode; see the module docstring."""
        golds = self.answers
        answer = last_tagged(action, "answer")
        invalid = not answer
        em = exact_match(answer, golds) if answer else 0.0
        f1 = token_f1(answer, golds) if answer else 0.0
        if invalid:
            reward = FORMAT_ERROR_REWARD
            feedback = (
                "No answer found: put your final answer inside <answer> and </answer>. "
                f"The expected answer was: {golds[0]}."
            )
        else:
            reward = em if self.reward == "em" else f1
            verdict = "Correct." if em == 1.0 else "Incorrect."
            feedback = f"{verdict} The expected answer was: {golds[0]}."
        info = {
            "correct": em == 1.0,
            "em": em,
            "f1": f1,
            "invalid_action": invalid,
            "parsed_action": answer,
            "gold_answers": golds,
            "metrics": {"em": em, "f1": f1},
        }
        return feedback, reward, True, False, info

    def sample_random_action(self) -> str:
        """``<answer>g</answer>`` with `g` a gold answer of a question drawn from `np_random`
        (the current question's now and then, so random play is sometimes right)."""
        row = self.records[int(self.np_random.integers(len(self.records)))]
        answers = row["answers"]
        return f"<answer>{answers[int(self.np_random.integers(len(answers)))]}</answer>"

    def get_state(self) -> dict[str, Any]:
        """Snapshot: the question's index and the RNG state (a fresh dict)."""
        return {"index": self.index, "rng": self.np_random.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a `get_state()` snapshot taken from an env over the same dataset."""
        self.index = state["index"]
        self.np_random.bit_generator.state = state["rng"]


def _checked(rows: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    """Rows as ``{"question", "answers"}``; raise naming the first bad row."""
    records = []
    for i, row in enumerate(rows):
        question = row["question"]
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"QAEnv: row {i} of {source!r} has no question: {question!r:.80}")
        try:
            answers = gold_answers(row["answer"])
        except TypeError as exc:
            raise TypeError(f"QAEnv: row {i} of {source!r}: {exc}") from None
        if not answers:
            raise ValueError(f"QAEnv: row {i} of {source!r} has no gold answer")
        records.append({"question": question.strip(), "answers": answers})
    return records
