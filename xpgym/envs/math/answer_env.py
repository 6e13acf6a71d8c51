r"""`MathAnswerEnv`: a `BoxedAnswerEnv` whose answers math-verify grades, the base of the
math envs.

The episode rules, rewards and ``info`` keys are `xpgym.envs.common.answer_env`'s. What
this adds is the grading: the last closed ``\boxed{}`` of a reply is compared with the gold
answers by `xpgym.envs.math.grading.default_grader()`, within `grading_timeout_s` seconds; a
grading that times out or fails counts as a wrong answer (``info["grading"]`` says which).
"""

from __future__ import annotations

from typing import Any

from xpgym.envs.common.answer_env import BoxedAnswerEnv, GradeResult
from xpgym.envs.math.grading import DEFAULT_TIMEOUT_S, default_grader

__all__ = ["MathAnswerEnv"]


class MathAnswerEnv(BoxedAnswerEnv):
    """One question per episode, the boxed answer graded by math-verify.

    Subclasses implement `_draw_problem`.

    Args:
        grading_timeout_s: Wall-clock limit of one grading, in seconds.
        max_turns, instruction, no_answer_reward: See `BoxedAnswerEnv`.

    Raises:
        ValueError: a non-positive timeout (and `BoxedAnswerEnv`'s errors).
    """

    def __init__(self, *, grading_timeout_s: float = DEFAULT_TIMEOUT_S, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not grading_timeout_s > 0:
            raise ValueError(
                f"{type(self).__name__}: grading_timeout_s must be > 0, got {grading_timeout_s!r}"
            )
        self.grading_timeout_s = float(grading_timeout_s)

    def _check(self, action: str) -> GradeResult:
        """Grade `action` against `self.problem.answers` with math-verify."""
        return default_grader().grade(
            action, self.problem.answers, timeout_s=self.grading_timeout_s
        )
