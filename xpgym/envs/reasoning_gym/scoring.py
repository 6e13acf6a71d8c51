"""Score answers with a reasoning-gym task's own ``score_answer``, inside a sandbox.

Why a sandbox: several tasks' scorers evaluate the answer as Python. In reasoning-gym 0.1.25
``n_queens``, ``binary_matrix``, ``spiral_matrix`` and ``string_insertion`` call `eval` on
it, and ``simple_integration``, ``intermediate_integration``, ``polynomial_multiplication``,
``countdown`` and ``puzzle24`` call sympy's ``parse_expr`` (which evaluates too): an answer
``__import__('os').system(...)`` runs, and ``9**9**9**9`` never returns. So every answer is
scored in a `xpgym.core.sandbox.Sandbox` (no network, no host files, CPU, memory and
wall-clock limits), never in the host process.

The scoring sandbox sees the running interpreter's site-packages and the directory
`SCORER_DIR`; its zygote preloads ``xpgym_rg_scorer`` (which imports reasoning_gym), so a call
costs a fork plus the task's dataset construction (milliseconds for most tasks; about 0.5 s
for ``arc_agi``, whose data is read again in each call). One sandbox per backend is shared by
the process (`scorer_sandbox`), started on the first score.

What the sandbox does not give: an honest reward from a task that evaluates answers. An
answer evaluating to an object that compares equal to anything can score 1.0 there; that
is the task's weakness, and the score is reported as the task computed it.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xpgym.core.sandbox import DEFAULT_PRELOAD, Sandbox, SandboxLimits

__all__ = ["SCORER_DIR", "ScoreResult", "score_answer", "scorer_sandbox"]

logger = logging.getLogger(__name__)

SCORER_DIR = Path(__file__).resolve().parent / "sandbox"
"""Bound into the sandbox: holds ``xpgym_rg_scorer.py``, the program that scores."""

_SCORER_CODE = "import xpgym_rg_scorer\nxpgym_rg_scorer.main()\n"
_lock = threading.Lock()
_sandboxes: dict[str, Sandbox] = {}


@dataclass(frozen=True)
class ScoreResult:
    """The outcome of scoring one answer.

    Attributes:
        score: The task's score, clipped to ``[0, 1]``; ``0.0`` when scoring failed.
        error: `None`, or why there is no score: the sandbox's ``exit_reason``
            (``"timeout"``, ``"memory"``, ``"error"`` for an exception in the scorer, ...)
            or ``"no_score"`` (the scorer printed no score line).
        duration_s: Seconds the sandbox call took.
    """

    score: float
    error: str | None
    duration_s: float


def scorer_sandbox(backend: str = "bwrap") -> Sandbox:
    """The process's scoring `Sandbox` for `backend`, started on first use (thread-safe)."""
    with _lock:
        sandbox = _sandboxes.get(backend)
        if sandbox is None or sandbox.closed:
            sandbox = Sandbox(
                backend=backend,
                site_packages=True,
                extra_paths=[SCORER_DIR],
                preload=(*DEFAULT_PRELOAD, "xpgym_rg_scorer"),
            )
            _sandboxes[backend] = sandbox
        return sandbox


def _reset_after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # a Sandbox restarts its own zygote in the child


os.register_at_fork(after_in_child=_reset_after_fork)


def score_answer(
    task: str,
    config: Mapping[str, Any],
    entry: Mapping[str, Any],
    answer: str,
    *,
    timeout_s: float = 10.0,
    backend: str = "bwrap",
) -> ScoreResult:
    """Score `answer` for `entry` with ``create_dataset(task, **config).score_answer``.

    Args:
        task: A reasoning-gym dataset name.
        config: Its configuration (``seed``, ``size`` and task options), as the entry was
            generated with.
        entry: The dataset item (``question``, ``answer``, ``metadata``).
        answer: The model's answer text (untrusted).
        timeout_s: Wall-clock limit of the call (its CPU limit is one second more).
        backend: The `Sandbox` backend (``"bwrap"``, or ``UNSAFE_NO_SANDBOX`` on machines
            without bubblewrap: a plain subprocess, no isolation).

    Returns:
        A `ScoreResult`; nothing the answer does raises here.
    """
    nonce = secrets.token_hex(16)
    request = {
        "task": task,
        "config": dict(config),
        "entry": dict(entry),
        "answer": answer,
        "nonce": nonce,
    }
    # The CPU limit sits above the wall-clock one, so a scorer that never returns always
    # ends as "timeout" (with equal limits, which fires first depends on the machine's load).
    limits = SandboxLimits(cpu_seconds=timeout_s + 1.0, wall_timeout_s=timeout_s)
    result = scorer_sandbox(backend).run_python(
        _SCORER_CODE, stdin=pickle.dumps(request), limits=limits
    )
    prefix = f"{nonce} "
    lines = [line for line in result.stdout.splitlines() if line.startswith(prefix)]
    if not result.ok or not lines:
        error = result.exit_reason if not result.ok else "no_score"
        logger.debug("scoring %s failed (%s): %s", task, error, result.stderr[-2000:])
        return ScoreResult(0.0, error, result.duration_s)
    try:
        score = float(lines[-1][len(prefix) :])
    except ValueError:
        return ScoreResult(0.0, "no_score", result.duration_s)
    if not math.isfinite(score):
        return ScoreResult(0.0, "no_score", result.duration_s)
    return ScoreResult(min(max(score, 0.0), 1.0), None, result.duration_s)
