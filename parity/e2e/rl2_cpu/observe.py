"""Test harness (not a way to train): what the run reports about itself. Observers read and
never change what RL2 computes.

- `WandbRecorder` is the ``wandb`` module of the run (RL2 logs every metric with
  ``wandb.log(metrics, step=step)``): ``init`` writes RL2's resolved config to `CONFIG_FILE`,
  ``log`` appends ``{"step": step, **metrics}`` to `METRICS_FILE`. What RL2 logs per step:
  its timers (``timing/rollout``, ``timing/update_actor``, ``timing/update_rollout``;
  ``utils/logging.py:18-34``), the rollout's means (``n_turns/train``, ``scores/train``,
  ...; ``workers/rollout.py:166-172``) and the actor's (``actor/loss``, ``actor/grad_norm``,
  ...; ``workers/actor.py:166``).
- `observe_actor` measures, per ``Actor.update``, the policy tokens of the step's batch
  (``action_mask``) and the largest ``|log p_sampler - log p_trainer|`` over them: the
  server's log-probs (``llm_logps``) against those of the actor's own forward passes in the
  update before its first optimizer step (the weights the server sampled with), and logs
  both through the recorder as ``parity/policy_tokens`` and ``parity/max_logprob_gap``.
"""

from __future__ import annotations

import functools
import json
import math
import sys
import types
from pathlib import Path
from typing import Any

import torch

__all__ = ["CONFIG_FILE", "METRICS_FILE", "WandbRecorder", "install_recorder", "observe_actor"]

METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "rl2_config.json"


class WandbRecorder(types.ModuleType):
    """A ``wandb`` module that writes what RL2 logs into `run_dir` (module docstring).

    Args:
        run_dir: Gets `CONFIG_FILE` and `METRICS_FILE`.
    """

    def __init__(self, run_dir: Path) -> None:
        super().__init__("wandb", "the run's recorder of RL2's metrics (parity.e2e.rl2_cpu)")
        self.run_dir = run_dir

    def init(self, project: str | None = None, name: str | None = None, config: Any = None) -> None:
        """``wandb.init`` as RL2 calls it (``trainer/base.py:15-20``): keep the config."""
        (self.run_dir / CONFIG_FILE).write_text(
            json.dumps({"project": project, "name": name, "config": config}, default=str)
        )

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        """``wandb.log``: append ``{"step": step, **metrics}`` to `METRICS_FILE`."""
        row = {"step": step, **{key: _plain(value) for key, value in metrics.items()}}
        with (self.run_dir / METRICS_FILE).open("a") as out:
            out.write(json.dumps(row) + "\n")


def _plain(value: Any) -> Any:
    """A logged value as JSON takes it (a tensor or numpy number as a float)."""
    return float(value) if hasattr(value, "item") else value


def _larger(a: float | None, b: float) -> float:
    """The larger of `a` (None: none yet) and `b`, NaN if either is NaN."""
    if a is None or math.isnan(b):
        return b
    return a if math.isnan(a) else max(a, b)


def install_recorder(run_dir: Path) -> WandbRecorder:
    """Make a `WandbRecorder` the ``wandb`` module of this process (before RL2 imports it)."""
    (run_dir / METRICS_FILE).unlink(missing_ok=True)
    recorder = WandbRecorder(run_dir)
    sys.modules["wandb"] = recorder
    return recorder


def observe_actor(actor_cls: type[Any], recorder: WandbRecorder) -> None:
    """Wrap RL2's ``Actor.update``, ``Actor.forward`` and ``Actor.optimizer_step`` to measure
    each step's policy tokens and sampler/trainer log-prob gap (module docstring)."""
    watch: dict[str, Any] = {"open": False, "gap": None}
    update, forward, optimizer_step = actor_cls.update, actor_cls.forward, actor_cls.optimizer_step

    @functools.wraps(update)
    def observed_update(self: Any, tensor_dict: dict[str, torch.Tensor], step: int) -> Any:
        tokens = int(tensor_dict["action_mask"].sum())
        watch.update(open=True, gap=None)
        try:
            return update(self, tensor_dict, step)
        finally:
            watch["open"] = False
            recorder.log(
                {"parity/policy_tokens": tokens, "parity/max_logprob_gap": watch["gap"]}, step
            )

    @functools.wraps(forward)
    def observed_forward(
        self: Any, minibatch: dict[str, torch.Tensor], *args: Any, **kwargs: Any
    ) -> Any:
        output = forward(self, minibatch, *args, **kwargs)
        if watch["open"] and kwargs.get("return_entropy"):
            mask = minibatch["action_mask"].bool()
            if mask.any():
                diff = (output[0].detach() - minibatch["llm_logps"]).abs()[mask]
                watch["gap"] = _larger(watch["gap"], float(diff.max()))
        return output

    @functools.wraps(optimizer_step)
    def observed_optimizer_step(self: Any, *args: Any, **kwargs: Any) -> Any:
        watch["open"] = False  # later forwards see updated weights
        return optimizer_step(self, *args, **kwargs)

    actor_cls.update = observed_update
    actor_cls.forward = observed_forward
    actor_cls.optimizer_step = observed_optimizer_step
