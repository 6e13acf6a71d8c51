"""Test harness (not a way to train): what the run reports about itself. Observers read and
never change what OpenRLHF computes.

- `observe_experiences` (``RemoteExperienceMaker.make_experience_batch``, in OpenRLHF's
  ``PPOTrainer`` actor): per step, the policy tokens of the batch (``action_mask``) and how
  far the engine's log-probs (``rollout_log_probs``) are from the actor's
  (``action_log_probs``, computed before the update, on the weights the engine sampled with;
  `batch_observation`);
- `observe_step_logs` (a handler on ``openrlhf.trainer.ppo_trainer``'s logger, same actor):
  OpenRLHF's own log line of each finished step (its metrics and timings), with the step's
  batch observation, as one line of ``metrics.jsonl``;
- `report_weights` (the engine's weight sync, `parity.e2e.openrlhf_cpu.patches.reload_on_sync`,
  in vLLM's worker process): after every sync, ``weights.json`` says which parameters the
  engine now holds differ from the start checkpoint.

Both files go to ``$PARITY_OPENRLHF_CPU_DIR`` (`parity.e2e.openrlhf_cpu.REPORT_DIR_ENV`).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from pathlib import Path
from typing import Any

import torch

from parity.e2e.openrlhf_cpu import REPORT_DIR_ENV
from parity.shared.vllm_weights import SyncReport

__all__ = [
    "METRICS_FILE",
    "STEP_LOG",
    "WEIGHTS_FILE",
    "batch_observation",
    "observe_experiences",
    "observe_step_logs",
    "parse_step_log",
    "report_weights",
]

METRICS_FILE = "metrics.jsonl"
WEIGHTS_FILE = "weights.json"

_batches: list[dict[str, Any]] = []
"""Observations of the batches made since the last logged step (the PPOTrainer actor's)."""

_engine = SyncReport()
"""The engine worker's weight report (the start checkpoint, the syncs so far)."""


def _report_dir() -> Path | None:
    where = os.environ.get(REPORT_DIR_ENV)
    return Path(where) if where else None


def batch_observation(experiences: list[Any]) -> dict[str, Any]:
    """Policy tokens and the sampler/trainer log-prob gaps in `experiences` (OpenRLHF
    ``Experience`` batches: ``action_mask``, ``action_log_probs``, ``rollout_log_probs``, each
    ``[B, A]``; the gaps are None without sampler log-probs).

    ``max_logprob_gap`` is the largest ``|rollout - trainer|`` over the policy tokens that do
    not start a turn. A turn's first token is compared apart (``turn_start_gap``, the
    ``[min, max]`` of ``rollout - trainer``): OpenRLHF samples with ``min_tokens=1``
    (``trainer/ppo_utils/samples_generator.py:204``), so vLLM masks the stop tokens at a
    turn's first token and reports the log-prob of that masked distribution (its
    ``processed_logprobs``), ``log p - log(1 - p_stop) >= log p``: a gap of the model's
    stop probability there, not of the weights.
    """
    tokens = 0
    gap: float | None = None
    start: list[float] | None = None
    for experience in experiences:
        mask = experience.action_mask.bool()
        tokens += int(mask.sum())
        rollout = experience.rollout_log_probs
        if rollout is None or not mask.any():
            continue
        diff = rollout.float() - experience.action_log_probs.float()
        before = torch.nn.functional.pad(mask[:, :-1], (1, 0), value=False)
        first = mask & ~before
        rest = mask & before
        if rest.any():
            gap = max(gap or 0.0, float(diff[rest].abs().max()))
        low, high = float(diff[first].min()), float(diff[first].max())
        start = [low, high] if start is None else [min(start[0], low), max(start[1], high)]
    return {"policy_tokens": tokens, "max_logprob_gap": gap, "turn_start_gap": start}


def observe_experiences(module: Any) -> None:
    """Record `batch_observation` of every batch ``make_experience_batch`` returns."""
    maker = module.RemoteExperienceMaker
    original = maker.make_experience_batch

    @functools.wraps(original)
    def make_experience_batch(self: Any, rollout_samples: Any) -> Any:
        experiences = original(self, rollout_samples)
        _batches.append(batch_observation(experiences))
        return experiences

    maker.make_experience_batch = make_experience_batch


STEP_LOG = re.compile(r"Global step (\d+): \{(.*)\}\s*$", re.S)
"""OpenRLHF's log line of a finished step (``trainer/ppo_trainer.py:551``:
``logger.info(f"✨ Global step {global_step}: {log_status}")``, a dict of numbers)."""

_ENTRY = re.compile(r"'([^']+)': ([^,]+)")


def parse_step_log(message: str) -> dict[str, Any] | None:
    """``{"global_step": k, <key>: <number>, ...}`` from OpenRLHF's step log line (numbers as
    floats, ``nan`` and ``inf`` kept); None for any other message."""
    match = STEP_LOG.search(message)
    if match is None:
        return None
    row: dict[str, Any] = {"global_step": int(match.group(1))}
    for key, text in _ENTRY.findall(match.group(2)):
        try:
            row[key] = float(text)
        except ValueError:
            continue  # not a number (OpenRLHF logs numbers only; kept out if one is not)
    return row


class _StepLogHandler(logging.Handler):
    """Appends each step log line, parsed, with the step's batch observation, to
    ``metrics.jsonl``."""

    def emit(self, record: logging.LogRecord) -> None:
        row = parse_step_log(record.getMessage())
        where = _report_dir()
        if row is None or where is None:
            return
        batch = _batches.pop(0) if _batches else {}
        with (where / METRICS_FILE).open("a") as out:
            out.write(json.dumps({**row, **batch}) + "\n")


def observe_step_logs(module: Any) -> None:
    """Read OpenRLHF's per-step log (`STEP_LOG`) of ``openrlhf.trainer.ppo_trainer``'s logger.

    A log handler, not a wrapper: ``PPOTrainer`` is a Ray actor class, and Ray copies its
    methods, inherited ones included, into the class it ships when it is decorated
    (``ray.actor._make_actor``), so a method replaced after the import never reaches the actor.
    """
    module.logger.addHandler(_StepLogHandler(level=logging.INFO))


def report_weights(model_path: str, weights: list[tuple[str, torch.Tensor]]) -> None:
    """Write ``weights.json``: the syncs so far and, per parameter of the last one, whether it
    differs from the start checkpoint in `model_path` (``*.safetensors``)."""
    where = _report_dir()
    if where is None:
        return
    _engine.write(where / WEIGHTS_FILE, model_path, weights)
