"""Evaluation metrics: the unbiased Pass@k estimator, per-episode results, per-env summaries.

Definitions (the summary table and ``summary.json`` use exactly these):

* **success** of an episode (or of one agent in a multi-agent episode): the final step's
  ``info["correct"]`` when the env reports that key, else ``return >= 1.0`` (xpgym envs give
  ``1.0`` for success; for a two-player game that is a win).
* **return**: the undiscounted sum of the rewards (an agent's own rewards, multi-agent).
* **turns**: policy turns (multi-agent: the turns that agent acted).
* **invalid-action rate**: turns whose ``info["invalid_action"]`` is true, divided by all
  turns, pooled over the episodes of a row.
* **tokens**: generated tokens per episode, when the policy reports token ids (local
  models); `None` for chat APIs, which return text only.
* **metrics**: the episode's own metrics, ``Episode.info["metrics"]`` (the last value of
  each key its steps reported in ``info["metrics"]``, e.g. a reward function's metrics,
  `xpgym.core.rewards`); a row reports each key's mean over the completed episodes that
  reported it.
* **Pass@k** (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): for a
  problem (env id and seed) with ``n`` sampled episodes of which ``c`` succeeded, the
  probability that at least one of ``k`` episodes drawn without replacement from the ``n``
  succeeded, ``1 - C(n - c, k) / C(n, k)``; averaged over the problems that have ``n >= k``.
  It is computed as ``1 - prod_{i = n - c + 1}^{n} (1 - k / i)``, which never forms the
  (huge) binomial coefficients.

Failed episodes (a policy error; see `xpgym.eval.records`) are counted in ``failed``, and
episodes ended by an infrastructure failure (`xpgym.core.errors`) in ``infra_errors``; both
are left out of every other number, so ``n`` of a problem is its number of completed
samples.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from xpgym.core.trajectory import Episode, mean_metrics

__all__ = [
    "SUCCESS_RETURN",
    "SummaryRow",
    "episode_result",
    "is_success",
    "pass_at_k",
    "pass_at_k_values",
    "summarize",
]

SUCCESS_RETURN = 1.0
"""The return that counts as success when the env reports no ``info["correct"]``."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased Pass@k estimate ``1 - C(n - c, k) / C(n, k)`` (see the module docstring).

    Args:
        n: Samples of the problem (``n >= 1``).
        c: Successful samples (``0 <= c <= n``).
        k: Samples drawn (``1 <= k <= n``).

    Raises:
        ValueError: the counts are out of range. TypeError: a count is not an int.
    """
    n, c, k = (operator.index(x) for x in (n, c, k))
    if not (n >= 1 and 0 <= c <= n and 1 <= k <= n):
        raise ValueError(
            f"pass_at_k needs n >= 1, 0 <= c <= n and 1 <= k <= n; got {n=}, {c=}, {k=}"
        )
    if n - c < k:  # every k-subset holds a success
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_at_k_values(samples: int) -> list[int]:
    """The k reported for `samples` samples per problem: 1, the powers of two below
    `samples`, and `samples` itself (e.g. ``[1, 2, 4, 8, 10]`` for 10)."""
    ks = {1, samples}
    k = 2
    while k < samples:
        ks.add(k)
        k *= 2
    return sorted(ks)


def is_success(final_info: Mapping[str, Any], episode_return: float) -> bool:
    """``final_info["correct"]`` if the env reports it, else ``episode_return >= 1.0``."""
    if "correct" in final_info:
        return bool(final_info["correct"])
    return episode_return >= SUCCESS_RETURN


def episode_result(episode: Episode) -> dict[str, Any]:
    """The metrics of one single-agent episode, as stored in a record's ``results``.

    Returns:
        ``{"return", "turns", "success", "invalid_actions", "tokens", "metrics"}``;
        ``tokens`` is the number of generated token ids, or `None` if some turn has no ids;
        ``metrics`` is ``Episode.info["metrics"]`` (``{}`` when the episode has none).
    """
    turns = episode.turns
    episode_return = episode.total_reward
    tokens = None
    if all(turn.response_ids is not None for turn in turns):
        tokens = sum(len(turn.response_ids or ()) for turn in turns)
    return {
        "return": episode_return,
        "turns": len(turns),
        "success": is_success(turns[-1].info if turns else {}, episode_return),
        "invalid_actions": sum(bool(turn.info.get("invalid_action")) for turn in turns),
        "tokens": tokens,
        "metrics": dict(episode.info.get("metrics") or {}),
    }


@dataclass
class SummaryRow:
    """The aggregate of one env id (and, for multi-agent envs, one agent id).

    Attributes:
        env_id: The env id. agent: The agent id (`None` for single-agent envs).
        model: The model spec that played (the agent's, for multi-agent envs).
        episodes: Episodes planned for the row; ``completed + failed + infra_errors`` of them
            have a record.
        completed: Episodes that ran to the end. failed: Episodes recorded as failed.
        infra_errors: Episodes ended by an infrastructure failure (status
            ``"infra_error"``), not counted as failures of the model.
        success_rate, mean_return, mean_turns, invalid_action_rate: over completed episodes
            (`None` when there are none).
        mean_tokens: Mean generated tokens per completed episode (`None` if unknown).
        pass_at_k: ``{str(k): estimate}``, averaged over problems with at least k completed
            samples (a k no problem reaches is left out).
        problems: Problems (seeds) with at least one completed episode.
        metrics: ``{key: mean}`` of the episodes' own metrics over the completed episodes
            that reported the key (`xpgym.core.trajectory.mean_metrics`; results recorded
            before metrics existed count as reporting none).
    """

    env_id: str
    agent: str | None
    model: str
    episodes: int = 0
    completed: int = 0
    failed: int = 0
    infra_errors: int = 0
    success_rate: float | None = None
    mean_return: float | None = None
    mean_turns: float | None = None
    invalid_action_rate: float | None = None
    mean_tokens: float | None = None
    pass_at_k: dict[str, float] = field(default_factory=dict)
    problems: int = 0
    metrics: dict[str, float] = field(default_factory=dict)


def summarize(
    records: Iterable[Mapping[str, Any]],
    planned: Mapping[tuple[str, str | None], tuple[str, int]],
    ks: Sequence[int],
) -> list[SummaryRow]:
    """Aggregate `records` (see `xpgym.eval.records`) into one row per env id and agent.

    Args:
        records: One record per episode (the latest per key).
        planned: ``{(env_id, agent): (model, planned episodes)}``: the rows, in order.
        ks: The k values of Pass@k.

    Returns:
        One `SummaryRow` per key of `planned`, in its order.
    """
    results: dict[tuple[str, str | None], list[tuple[int, Mapping[str, Any]]]] = {
        key: [] for key in planned
    }
    failed = dict.fromkeys(planned, 0)
    infra = dict.fromkeys(planned, 0)
    for record in records:
        if record["status"] in ("failed", "infra_error"):
            counts = failed if record["status"] == "failed" else infra
            for key in planned:
                counts[key] += key[0] == record["env_id"]
            continue
        for result in record["results"]:
            key = (record["env_id"], result["agent"])
            if key in results:
                results[key].append((record["seed"], result))
    rows = []
    for (env_id, agent), (model, count) in planned.items():
        row = _row(env_id, agent, model, count, failed[env_id, agent], results[env_id, agent], ks)
        row.infra_errors = infra[env_id, agent]
        rows.append(row)
    return rows


def _row(
    env_id: str,
    agent: str | None,
    model: str,
    planned: int,
    failed: int,
    results: list[tuple[int, Mapping[str, Any]]],
    ks: Sequence[int],
) -> SummaryRow:
    row = SummaryRow(env_id, agent, model, episodes=planned, completed=len(results), failed=failed)
    if not results:
        return row
    values = [result for _, result in results]
    turns = sum(r["turns"] for r in values)
    row.success_rate = _mean(float(r["success"]) for r in values)
    row.mean_return = _mean(float(r["return"]) for r in values)
    row.mean_turns = turns / len(values)
    row.invalid_action_rate = sum(r["invalid_actions"] for r in values) / turns if turns else None
    if all(r["tokens"] is not None for r in values):
        row.mean_tokens = _mean(float(r["tokens"]) for r in values)
    row.metrics = mean_metrics(r.get("metrics") or {} for r in values)
    per_problem: dict[int, list[bool]] = {}
    for seed, result in results:
        per_problem.setdefault(seed, []).append(bool(result["success"]))
    row.problems = len(per_problem)
    for k in ks:
        estimates = [pass_at_k(len(s), sum(s), k) for s in per_problem.values() if len(s) >= k]
        if estimates:
            row.pass_at_k[str(k)] = _mean(estimates)
    return row


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return math.fsum(items) / len(items)
