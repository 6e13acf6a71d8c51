"""Test harness (not a way to train): what the run reports about itself. Observers read and
never change what Oat computes.

- `observe_learner` (the launch process): wraps Oat's ``FeedbackCollector.collect_feedback``
  (the step's rollout: the actor's ``step`` and the rows it returned), ``PPOLearner.learn``
  and ``learning_step`` (the update and Oat's own metrics of it) and
  ``LearnerBase.sync_params_to_actors`` (the weight broadcast, the end of a step); after each
  sync one line of ``metrics.jsonl`` (`step_record`);
- `report_weights` (vLLM's worker process, from the weight sync,
  `parity.e2e.oat_cpu.patches.reload_on_sync`): after every sync, ``weights.json`` says which
  parameters the engine now holds differ from the start checkpoint.

Both files go to ``$PARITY_OAT_CPU_DIR`` (`parity.e2e.oat_cpu.REPORT_DIR_ENV`).
"""

from __future__ import annotations

import functools
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import torch

from parity.e2e.oat_cpu import REPORT_DIR_ENV
from parity.shared.vllm_weights import SyncReport

__all__ = [
    "LEARNING_METRICS",
    "METRICS_FILE",
    "WEIGHTS_FILE",
    "observe_learner",
    "report_weights",
    "step_record",
]

METRICS_FILE = "metrics.jsonl"
WEIGHTS_FILE = "weights.json"

LEARNING_METRICS = (
    "pg_loss",
    "policy_grad_norm",
    "sampler_learner_prob_diff_max",
    "sampler_learner_prob_diff_min",
    "kl_sample_train_v1",
    "kl_sample_train_v2",
    "logprobs_diff_max",
    "logprobs_diff_min",
    "adv_mean",
)
"""Oat's ``learning_step`` infos a step record keeps (``algorithms/ppo.py:697-746``)."""

_step: dict[str, Any] = {}
"""What the current step observed so far (the learner's)."""

_engine = SyncReport()
"""The engine worker's weight report (the start checkpoint, the syncs so far)."""


def _report_dir() -> Path | None:
    where = os.environ.get(REPORT_DIR_ENV)
    return Path(where) if where else None


def step_record(step: dict[str, Any]) -> dict[str, Any]:
    """One step's line of ``metrics.jsonl`` from what the observers saw.

    `step` holds ``rollout_s``, ``update_s``, ``sync_s``, ``step_s`` (wall seconds), ``rows``
    (the transitions the actor returned), ``policy_tokens`` (their response tokens, all
    trained: Oat's ``response_masks``), ``reward_mean`` (Oat's ``actor/avg_reward``: the mean
    over rows of the largest of each row's token rewards, ``max(0, G_t)`` for a response of
    more than one token) and ``learning`` (the `LEARNING_METRICS`
    of each ``learning_step``, as floats). The record adds, from the last ``learning_step``:
    ``loss`` (Oat's ``pg_loss``: its last micro-batch's), ``grad_norm``
    (``policy_grad_norm``), ``max_prob_gap`` (``max |exp(sampler) - exp(learner)|`` over
    policy tokens: Oat's ``sampler_learner_prob_diff_max``/``_min``, the engine's log-probs
    against the learner's before the update, on the weights the engine sampled with) and
    ``rms_logprob_gap`` (``sqrt(2 * kl_sample_train_v2)``: the root mean square of
    ``log p_sampler - log p_learner`` over policy tokens).
    """
    record = {k: v for k, v in step.items() if k != "learning"}
    learning = step.get("learning") or []
    if learning:
        last = learning[-1]
        record.update(
            loss=last["pg_loss"],
            grad_norm=last["policy_grad_norm"],
            max_prob_gap=max(
                abs(last["sampler_learner_prob_diff_max"]),
                abs(last["sampler_learner_prob_diff_min"]),
            ),
            rms_logprob_gap=math.sqrt(2.0 * max(last["kl_sample_train_v2"], 0.0)),
            oat=last,
        )
    return record


def observe_learner(
    collectors: Any, learners_base: Any, ppo: Any, clock: Any = time.perf_counter
) -> None:
    """Wrap the learner's methods named in the module docstring (``oat.collectors.base``'s
    ``FeedbackCollector``, ``oat.learners.base``'s ``LearnerBase``, ``oat.algorithms.ppo``'s
    ``PPOLearner``); `clock` gives the wall time."""
    collector = collectors.FeedbackCollector
    collect = collector.collect_feedback

    @functools.wraps(collect)
    def collect_feedback(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = clock()
        _step.setdefault("start", start)
        data, info = collect(self, *args, **kwargs)
        _step["rollout_s"] = clock() - start
        _step["rows"] = len(data)
        _step["policy_tokens"] = sum(len(row.response_ids) for row in data)
        _step["reward_mean"] = float(info.get("actor/avg_reward", math.nan))
        return data, info

    learner = ppo.PPOLearner
    learn = learner.learn
    learning_step = learner.learning_step

    @functools.wraps(learn)
    def observed_learn(self: Any, learning_round: int) -> Any:
        start = clock()
        info = learn(self, learning_round)
        _step["update_s"] = clock() - start
        return info

    @functools.wraps(learning_step)
    def observed_learning_step(self: Any, trajectory: Any) -> Any:
        infos = learning_step(self, trajectory)
        metrics = {name: float(infos[name]) for name in LEARNING_METRICS if name in infos}
        _step.setdefault("learning", []).append(metrics)
        return infos

    base = learners_base.LearnerBase
    sync = base.sync_params_to_actors

    @functools.wraps(sync)
    def sync_params_to_actors(self: Any) -> Any:
        start = clock()
        result = sync(self)
        end = clock()
        _step["sync_s"] = end - start
        _step["step_s"] = end - _step.pop("start", start)
        where = _report_dir()
        if where is not None:
            with (where / METRICS_FILE).open("a") as out:
                out.write(json.dumps(step_record(_step)) + "\n")
        _step.clear()
        return result

    collector.collect_feedback = collect_feedback
    learner.learn = observed_learn
    learner.learning_step = observed_learning_step
    base.sync_params_to_actors = sync_params_to_actors


def report_weights(model_path: str, weights: list[tuple[str, torch.Tensor]]) -> None:
    """Write ``weights.json``: the syncs so far and, per parameter of the last one, whether it
    differs from the start checkpoint in `model_path` (``*.safetensors``), and whether all
    are finite."""
    where = _report_dir()
    if where is None:
        return
    _engine.write(where / WEIGHTS_FILE, model_path, weights)
