r"""`BoxedAnswerEnv`: the episode logic shared by envs that ask one question per episode and
read the answer from the last ``\boxed{}`` of the reply (math datasets, generated
arithmetic, vision counting), and `GradeResult`, what grading one reply gives.

Episode rules:

* `reset()` asks the subclass for a `Problem` (`_draw_problem`, which draws from
  `np_random`) and shows its question, followed by a blank line and the `instruction`
  (default: reason step by step and put the final answer in ``\boxed{}``; ``""`` for none).
* Every `step()` is one attempt, graded by the subclass's `_check`: the answer is the
  content of the last closed ``\boxed{...}`` (rule in `xpgym.envs.common.answers`), compared
  with the gold answers (math-verify for the math envs, see `xpgym.envs.math.grading`; an
  exact integer for vision counting).
* A correct answer terminates the episode. Otherwise, with attempts left (``max_turns > 1``)
  the observation says the answer was wrong (or missing) and how many attempts are left,
  and the episode goes on; after the last attempt it terminates (running out of attempts
  is the task's own rule, so the episode is terminated, not truncated). Single-turn
  (``max_turns=1``, the default): the first step always terminates it, with observation
  ``""``. The gold answer is never shown.

Rewards, per step:

=========================================  ======================  =======================
Attempt                                    reward                  ``info``
=========================================  ======================  =======================
correct answer                             ``1.0``                 ``correct=True``
wrong answer (or the grading timed out)    ``0.0``                 ``correct=False``
no closed ``\boxed{}`` in the reply        ``no_answer_reward``    ``invalid_action=True``
=========================================  ======================  =======================

``no_answer_reward`` defaults to ``0.0``, as in GEM, whose optional format penalty
(``use_format_error_reward``) is ``-0.1``; pass ``no_answer_reward=-0.1`` for it.
A grading that times out or fails counts as a wrong answer; ``info["grading"]`` says so, and
``info["infra_error"]`` marks it as the grader's failure (an infrastructure failure,
`xpgym.core.errors`).

``info`` after every step: ``correct`` and ``invalid_action`` (bools), ``parsed_action`` (the
boxed answer, or `None`), ``grading`` (``"graded"``, ``"no_answer"``, ``"timeout"`` or
``"error"``, as in `GRADE_STATUSES`) and ``turn`` (attempts made).
`reset()` info: ``max_turns`` and what the subclass adds (`Problem.info`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, ClassVar

from xpgym.core.env import Env
from xpgym.core.errors import INFRA_ERROR_KEY, InfraCause
from xpgym.envs.common.arguments import is_int, is_number

__all__ = [
    "CORRECT_REWARD",
    "DEFAULT_INSTRUCTION",
    "GRADE_STATUSES",
    "WRONG_REWARD",
    "BoxedAnswerEnv",
    "GradeResult",
    "Problem",
]

CORRECT_REWARD = 1.0
WRONG_REWARD = 0.0
DEFAULT_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
GRADE_STATUSES = ("graded", "no_answer", "timeout", "error")
"""How a grading went: compared, nothing to compare, ran past its time limit, or failed."""
_GRADER_FAILURES = {"timeout": "grader_timeout", "error": "grader_error"}


@dataclass(frozen=True)
class GradeResult:
    r"""The outcome of grading one action.

    Attributes:
        correct: The answer equals a gold answer (always `False` unless `status` is
            ``"graded"``).
        status: One of `GRADE_STATUSES`.
        answer: The stripped content of the last ``\boxed{}``, or `None` if there is none.
        detail: Why grading did not finish (``"timeout"``, ``"error"``), else ``""``.
    """

    correct: bool
    status: str
    answer: str | None
    detail: str = ""


@dataclass(frozen=True)
class Problem:
    """One question with its gold answers.

    Attributes:
        question: The text shown to the model (before the instruction).
        answers: Gold answers as text; an answer equal to any one of them is correct.
        info: Extra JSON-compatible facts for the `reset()` info (e.g. the dataset row).
    """

    question: str
    answers: tuple[str, ...]
    info: dict[str, Any] = field(default_factory=dict)


def _attempts(n: int) -> str:
    return "1 attempt" if n == 1 else f"{n} attempts"


class BoxedAnswerEnv(Env[str]):
    r"""Base class: one question per episode, answered in ``\boxed{}``; see the module docstring.

    Subclasses implement `_draw_problem` and `_check`. State lives in `problem` and `turn`,
    which `get_state` and `set_state` capture with the RNG; a subclass with more state
    extends both.

    Args:
        max_turns: Attempts per episode (1: single-turn).
        instruction: Appended to every question after a blank line; ``""`` for none.
        no_answer_reward: Reward of a reply without a closed ``\boxed{}``.

    Raises:
        ValueError: ``max_turns < 1``.
        TypeError: `max_turns` is not an int, or `no_answer_reward` not a number.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": "optional"}

    def __init__(
        self,
        *,
        max_turns: int = 1,
        instruction: str = DEFAULT_INSTRUCTION,
        no_answer_reward: float = 0.0,
    ) -> None:
        name = type(self).__name__
        if not is_int(max_turns):
            raise TypeError(f"{name}: max_turns must be an int, got {max_turns!r}")
        if max_turns < 1:
            raise ValueError(f"{name}: max_turns must be >= 1, got {max_turns}")
        if not is_number(no_answer_reward):
            raise TypeError(f"{name}: no_answer_reward must be a number, got {no_answer_reward!r}")
        self.max_turns = int(max_turns)
        self.instruction = str(instruction)
        self.no_answer_reward = float(no_answer_reward)
        self.problem = Problem("", ())
        self.turn = 0

    # ------------------------------------------------------------------ subclass hooks

    def _draw_problem(self, options: dict[str, Any] | None) -> Problem:
        """A new problem, drawn with `np_random` (`options` are the `reset` options)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _draw_problem()")

    def _check(self, action: str) -> GradeResult:
        """Grade `action` against `self.problem.answers`; ``"no_answer"`` without a box."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _check()")

    def _reset_info(self) -> dict[str, Any]:
        """The `reset()` info: ``max_turns`` plus `Problem.info`."""
        return {"max_turns": self.max_turns, **self.problem.info}

    # --------------------------------------------------------------------- Env API

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Draw a problem; return its question with the instruction, and the reset info."""
        super().reset(seed=seed)
        self.problem = self._draw_problem(options)
        self.turn = 0
        return self.prompt(), self._reset_info()

    def prompt(self) -> str:
        """The first observation of the current episode: question and instruction."""
        if not self.instruction:
            return self.problem.question
        return f"{self.problem.question}\n\n{self.instruction}"

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Grade one attempt; see the module docstring for the rules and rewards."""
        self.turn += 1
        result = self._check(action)
        no_answer = result.status == "no_answer"
        if result.correct:
            reward = CORRECT_REWARD
        elif no_answer:
            reward = self.no_answer_reward
        else:
            reward = WRONG_REWARD
        terminated = result.correct or self.turn >= self.max_turns
        info: dict[str, Any] = {
            "correct": result.correct,
            "invalid_action": no_answer,
            "parsed_action": result.answer,
            "grading": result.status,
            "turn": self.turn,
        }
        if result.status in _GRADER_FAILURES:  # the grader's failure, not the policy's
            cause = InfraCause(_GRADER_FAILURES[result.status], result.detail or result.status)
            info[INFRA_ERROR_KEY] = cause.to_dict()
        return self._feedback(result, terminated), reward, terminated, False, info

    def _feedback(self, result: GradeResult, terminated: bool) -> str:
        if self.max_turns == 1:
            return ""
        if result.correct:
            return f"Attempt {self.turn}/{self.max_turns}: correct!"
        if result.status == "no_answer":
            what = "no \\boxed{} answer found; put your final answer within \\boxed{}."
        elif result.status == "graded":
            what = f"{result.answer:.200} is not correct."
        else:
            what = f"{result.answer:.200} could not be checked ({result.status}); counted as wrong."
        left = self.max_turns - self.turn
        tail = "No attempts left." if terminated else f"{_attempts(left)} left; try again."
        return f"Attempt {self.turn}/{self.max_turns}: {what} {tail}"

    def sample_random_action(self) -> str:
        r"""``\boxed{k}`` with `k` an integer in 0..20 drawn from `np_random`."""
        return f"\\boxed{{{int(self.np_random.integers(0, 21))}}}"

    def get_state(self) -> dict[str, Any]:
        """Snapshot: the problem, the attempts made and the RNG state (a fresh dict)."""
        return {
            "question": self.problem.question,
            "answers": self.problem.answers,
            "problem_info": copy.deepcopy(self.problem.info),
            "turn": self.turn,
            "rng": self.np_random.bit_generator.state,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a `get_state()` snapshot."""
        self.problem = Problem(
            state["question"], tuple(state["answers"]), copy.deepcopy(state["problem_info"])
        )
        self.turn = state["turn"]
        self.np_random.bit_generator.state = state["rng"]
