r"""ArithmeticEnv: evaluate a generated expression or solve a linear equation; no data needed.

Every problem is generated from `np_random` at `reset()`, and its answer is computed exactly
with `fractions.Fraction`. Episode rules, rewards and ``info`` keys are those of
`xpgym.envs.common.answer_env.BoxedAnswerEnv` (single-turn by default: reward 1.0 if the last
``\boxed{}`` equals the answer, else 0.0), graded by math-verify like the dataset envs, so
``\boxed{7/2}``, ``\boxed{\frac{7}{2}}`` and ``\boxed{3.5}`` are all correct for 7/2.

Problem kinds (each reset picks an equation with probability `equation_probability`):

* **expression**: integers joined by ``+ - * /`` in a random binary tree, written with the
  fewest parentheses that keep its meaning (``*`` and ``/`` bind tighter; ``-`` and ``/``
  are left-associative), e.g. ``Compute (7 - 2) * 3 + 8 / 4.`` Divisions by a
  subexpression equal to zero are never generated. The answer is the exact rational value.
* **equation**: a linear equation in `x`. In the easy preset ``a x + b = c`` with an integer
  solution; otherwise ``a x + b = c x + d`` with ``a != c``, whose solution is
  ``(d - b) / (a - c)``, an integer or a fraction.

Difficulty presets (`DIFFICULTIES`): ``"easy"``: 2-3 numbers from 1..10, equations with an
integer solution in -10..10; ``"hard"``: 4-6 numbers from 1..50, equations with `x` on both
sides. Without a difficulty: 3-4 numbers from 1..20, equations with `x` on both sides;
``"random"`` draws easy or hard at every reset. Reset info adds ``difficulty``, ``kind``
(``"expression"`` or ``"equation"``) and ``answer`` (the exact value as text, e.g.
``"-7/2"``).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from xpgym.envs.common.answer_env import Problem
from xpgym.envs.common.arguments import is_number
from xpgym.envs.common.presets import resolve_presets
from xpgym.envs.math.answer_env import MathAnswerEnv

__all__ = ["DIFFICULTIES", "ArithmeticEnv", "Expression", "Settings", "random_expression"]

_OPERATORS = ("+", "-", "*", "/")
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}
_APPLY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


class Settings(NamedTuple):
    """One difficulty: operand count range, largest operand, equation kind and frequency."""

    min_operands: int
    max_operands: int
    max_value: int
    two_sided_equations: bool
    equation_probability: float


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(2, 3, 10, two_sided_equations=False, equation_probability=0.5),
    "hard": Settings(4, 6, 50, two_sided_equations=True, equation_probability=0.5),
}
"""Presets selected by `ArithmeticEnv(difficulty=...)`."""

_DEFAULT = Settings(3, 4, 20, two_sided_equations=True, equation_probability=0.5)


@dataclass(frozen=True)
class Expression:
    """An expression's exact value, its text, and the precedence of its outermost operator
    (1 for ``+ -``, 2 for ``* /``, 3 for a lone number, which never needs parentheses)."""

    value: Fraction
    text: str
    precedence: int


def _leaf(number: int) -> Expression:
    return Expression(Fraction(number), str(number), 3)


def _combine(op: str, left: Expression, right: Expression) -> Expression | None:
    """``left op right`` with minimal parentheses, or `None` for a division by zero."""
    if op == "/" and right.value == 0:
        return None
    value = _APPLY[op](left.value, right.value)
    precedence = _PRECEDENCE[op]
    left_text = f"({left.text})" if left.precedence < precedence else left.text
    # The right side also needs them at equal precedence under - and /: a - (b - c).
    right_paren = right.precedence < precedence or (right.precedence == precedence and op in "-/")
    right_text = f"({right.text})" if right_paren else right.text
    return Expression(value, f"{left_text} {op} {right_text}", precedence)


def random_expression(rng: np.random.Generator, operands: int, max_value: int) -> Expression:
    """A random expression over `operands` integers in ``1..max_value`` (see the module
    docstring); never divides by zero."""
    if operands == 1:
        return _leaf(int(rng.integers(1, max_value + 1)))
    left_size = int(rng.integers(1, operands))
    left = random_expression(rng, left_size, max_value)
    right = random_expression(rng, operands - left_size, max_value)
    order = rng.permutation(len(_OPERATORS))
    for index in order:  # the first operator that is defined here ("/" by 0 is not)
        combined = _combine(_OPERATORS[int(index)], left, right)
        if combined is not None:
            return combined
    raise AssertionError("unreachable: + is always defined")


def _linear_side(coefficient: int, constant: int) -> str:
    """``3x - 5``, ``-x + 2``, ``x``, ``4`` (no zero terms, unless both are zero)."""
    if coefficient == 0:
        return str(constant)
    x_term = {1: "x", -1: "-x"}.get(coefficient, f"{coefficient}x")
    if constant == 0:
        return x_term
    sign = "+" if constant > 0 else "-"
    return f"{x_term} {sign} {abs(constant)}"


class ArithmeticEnv(MathAnswerEnv):
    """Generated arithmetic and linear equations with exact answers; see the module docstring.

    Args:
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"`` (see `DIFFICULTIES`).
        equation_probability: Chance that a problem is an equation rather than an
            expression; default: the preset's (0.5).
        max_turns, instruction, no_answer_reward, grading_timeout_s: See `MathAnswerEnv`.

    Raises:
        ValueError: unknown difficulty, or `equation_probability` outside [0, 1].
    """

    def __init__(
        self,
        difficulty: str | None = None,
        *,
        equation_probability: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        presets = resolve_presets(difficulty, DIFFICULTIES, _DEFAULT)
        if equation_probability is not None:
            if not is_number(equation_probability):
                raise TypeError(
                    f"ArithmeticEnv: equation_probability must be a number, got "
                    f"{equation_probability!r}"
                )
            if not 0.0 <= equation_probability <= 1.0:
                raise ValueError(
                    f"ArithmeticEnv: equation_probability must be in [0, 1], got "
                    f"{equation_probability!r}"
                )
            presets = {
                name: s._replace(equation_probability=float(equation_probability))
                for name, s in presets.items()
            }
        self.difficulty = difficulty
        self._presets = list(presets.items())

    def _draw_problem(self, options: dict[str, Any] | None) -> Problem:
        rng = self.np_random
        name, settings = self._presets[int(rng.integers(len(self._presets)))]
        if rng.random() < settings.equation_probability:
            kind = "equation"
            question, answer = self._equation(settings)
        else:
            kind = "expression"
            operands = int(rng.integers(settings.min_operands, settings.max_operands + 1))
            expression = random_expression(rng, operands, settings.max_value)
            question, answer = f"Compute {expression.text}.", expression.value
            question += " Give the exact value (an integer or a fraction)."
        answer_text = str(answer)  # "7", "-7/2"
        info = {"difficulty": name, "kind": kind, "answer": answer_text}
        return Problem(question, (answer_text,), info)

    def _equation(self, settings: Settings) -> tuple[str, Fraction]:
        rng = self.np_random
        limit = settings.max_value

        def nonzero() -> int:
            magnitude = int(rng.integers(1, limit + 1))
            return magnitude if rng.random() < 0.5 else -magnitude

        if not settings.two_sided_equations:
            a, x = nonzero(), int(rng.integers(-10, 11))
            b = int(rng.integers(-limit, limit + 1))
            left, right, solution = _linear_side(a, b), str(a * x + b), Fraction(x)
        else:
            a, c = nonzero(), nonzero()
            while c == a:
                c = nonzero()
            b, d = (int(v) for v in rng.integers(-limit, limit + 1, size=2))
            left, right = _linear_side(a, b), _linear_side(c, d)
            solution = Fraction(d - b, a - c)
        question = f"Solve for x: {left} = {right}. Give the exact value of x."
        return question, solution
