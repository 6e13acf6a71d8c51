"""What a trainer module of the parity check provides, the reference it is held against, and
how a comparison is classified.

A trainer module (``parity/tokens/<name>.py``) gives a `TrainerSpec`: a loader (its
trainer's code, imported lazily), layout checks (`LayoutCheck`) and estimators
(`Estimator`). Every estimator returns, per episode, the advantage on each token the trainer
trains on, read from the trainer's own output at its own mask, in order: by the layout check
those tokens are exactly the episode's policy tokens, so the values line up with
`reference_tokens`.

Classification of one estimator on one case (`classify`):

* ``exact``: ``max |trainer - reference| <= TOL`` (``TOL = 1e-6``);
* ``formula``: not exact, but ``max |trainer - formula| <= TOL`` where the formula is the
  estimator's stated closed-form difference, computed independently from the episodes
  (NaN equals NaN there: a formula may state that a trainer gives NaN);
* ``mismatch``: neither;
* ``not runnable: <why>``: the trainer's code cannot run here, or cannot express the case.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from parity.shared.trainer_code import NotRunnableError
from parity.tokens.cases import Case, per_token
from xpgym.core.trajectory import Episode
from xpgym.training.advantages import CRITIC_FREE_ALGORITHMS, turn_advantages, turn_rewards

__all__ = [
    "ALGORITHMS",
    "TOL",
    "Estimator",
    "Formula",
    "LayoutCheck",
    "Outcome",
    "TrainerSpec",
    "classify",
    "equal_groups",
    "read_masked",
    "reference_tokens",
    "reference_turns",
]

TOL = 1e-6
ALGORITHMS: tuple[str, ...] = CRITIC_FREE_ALGORITHMS

TokenValues = list[np.ndarray]
"""Per episode, one value per policy token (in the order of `parity.tokens.cases.policy_tokens`)."""


@dataclass(frozen=True)
class Formula:
    """A stated closed-form difference from the reference.

    Attributes:
        text: The difference, in words and symbols (shown in the report).
        expected: ``(case, episodes) -> TokenValues``: what the trainer must give by it.
    """

    text: str
    expected: Callable[[Case, list[Episode]], TokenValues]


@dataclass(frozen=True)
class Estimator:
    """One of a trainer's advantage code paths, compared with a reference algorithm.

    Attributes:
        algorithm: The reference algorithm (one of `ALGORITHMS`).
        code: What runs (the trainer's function and options).
        run: ``(case, episodes) -> TokenValues`` read from the trainer's output; raises
            `NotRunnableError` for a case the trainer cannot express. None: never runnable.
        formula: The stated difference, if the estimator is not meant to equal the
            reference.
        why_not: Why `run` is None.
    """

    algorithm: str
    code: str
    run: Callable[[Case, list[Episode]], TokenValues] | None = None
    formula: Formula | None = None
    why_not: str = ""


@dataclass(frozen=True)
class LayoutCheck:
    """One layout fact about a trainer's batch: ``ok`` and, when not, what differs."""

    name: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class TrainerSpec:
    """A trainer as the parity check sees it.

    Attributes:
        name: Trainer name (table rows).
        version: The version checked (from its package metadata), or why it is missing.
        load: Returns a context manager whose entry imports the trainer's code (an
            `ImportError` there makes every row ``not runnable`` with its message); the
            checks run inside it (stand-ins for GPU-only modules live only there).
        layout: ``(case, episodes) -> list[LayoutCheck]``, run inside `load`'s context.
        estimators: The advantage code paths.
    """

    name: str
    version: Callable[[], str]
    load: Callable[[], AbstractContextManager[Any]]
    layout: Callable[[Case, list[Episode]], list[LayoutCheck]]
    estimators: Sequence[Estimator] = field(default_factory=tuple)


@dataclass(frozen=True)
class Outcome:
    """The classification of one comparison (see the module docstring)."""

    status: str  # "exact" | "formula" | "mismatch" | "not runnable"
    detail: str = ""
    error_vs_reference: float | None = None
    error_vs_formula: float | None = None


def reference_turns(algorithm: str, episodes: Sequence[Episode], gamma: float) -> np.ndarray:
    """``[B, T]`` per-turn advantages of the reference trainer (`xpgym.reference.trainer`
    with its default options) for `algorithm`: `xpgym.training.advantages.turn_advantages`,
    the dispatch the trainer calls, with the estimators' defaults."""
    rewards, mask = turn_rewards(episodes)
    group_ids = [ep.group_id for ep in episodes]
    return turn_advantages(algorithm, rewards, mask, gamma=gamma, group_ids=group_ids)


def reference_tokens(algorithm: str, episodes: Sequence[Episode], gamma: float) -> TokenValues:
    """`reference_turns` on each policy token."""
    turns = reference_turns(algorithm, episodes, gamma)
    return [per_token(ep, turns[e]) for e, ep in enumerate(episodes)]


def read_masked(
    values: np.ndarray, mask: np.ndarray, rows_per_episode: Sequence[int]
) -> TokenValues:
    """Per episode, `values` where `mask` is 1, rows in order (an episode may span several
    consecutive rows: per-turn rows, or RL2's split sequences)."""
    values, mask = np.asarray(values, dtype=np.float64), np.asarray(mask).astype(bool)
    out, row = [], 0
    for n in rows_per_episode:
        out.append(np.concatenate([values[r][mask[r]] for r in range(row, row + n)]))
        row += n
    return out


def equal_groups(episodes: Sequence[Episode], trainer: str, option: str) -> int:
    """The common group size, for trainers that group consecutive blocks of a fixed size.

    Raises:
        NotRunnableError: groups of different sizes (the trainer cannot express them).
    """
    from parity.tokens.cases import group_sizes

    sizes = group_sizes(list(episodes))
    if len(set(sizes)) != 1:
        raise NotRunnableError(
            f"{trainer} groups rows as consecutive blocks of {option}; groups of sizes "
            f"{sizes} cannot be expressed"
        )
    return sizes[0]


def _max_error(got: TokenValues, expected: TokenValues) -> float:
    if len(got) != len(expected) or any(
        g.shape != e.shape for g, e in zip(got, expected, strict=True)
    ):
        return float("inf")
    a, b = np.concatenate(got), np.concatenate(expected)
    both_nan = np.isnan(a) & np.isnan(b)
    diff = np.where(both_nan, 0.0, np.abs(a - b))
    return float(np.nan_to_num(diff, nan=np.inf).max(initial=0.0))


def classify(
    got: TokenValues, reference: TokenValues, formula: TokenValues | None, formula_text: str = ""
) -> Outcome:
    """Classify `got` against the reference, then the formula (module docstring)."""
    err_ref = _max_error(got, reference)
    if err_ref <= TOL:
        return Outcome("exact", "", err_ref)
    if formula is not None:
        err_formula = _max_error(got, formula)
        if err_formula <= TOL:
            return Outcome("formula", formula_text, err_ref, err_formula)
        return Outcome(
            "mismatch",
            f"off the reference by {err_ref:.3g} and off the formula ({formula_text}) by "
            f"{err_formula:.3g}",
            err_ref,
            err_formula,
        )
    return Outcome("mismatch", f"off the reference by {err_ref:.3g}", err_ref)
