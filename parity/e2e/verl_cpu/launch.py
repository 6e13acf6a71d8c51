"""Test harness (not a way to train): run verl's V1 trainer on CPU, in this process.

``python -m parity.e2e.verl_cpu.launch RUN_DIR MODEL_DIR STEPS`` composes the config of
``recipes/train_verl.py`` (`xpgym.adapters.verl.ppo_overrides`) plus `CPU_OVERRIDES`, writes
the task files, and calls verl's ``run_ppo`` with ``TaskRunnerV1``. `parity.e2e.verl` runs it
as a subprocess with `harness_env` (verl reads the platform and plugins from the
environment at import, and Ray's workers inherit it), under a timeout.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from parity.e2e.verl_cpu import REPORT_DIR_ENV, ROLLOUT_NAME, check_versions

ENV_ID = "game:GuessTheNumber-v0-easy"
TASKS_PER_STEP = 4
MAX_TURNS = 6
MAX_NEW_TOKENS = 8
PROMPT_LENGTH = 640
RESPONSE_LENGTH = 256
LR = 1e-5

PLATFORM = "cpu"
"""The ``VERL_PLATFORM`` value that selects `parity.e2e.verl_cpu.platform.CpuPlatform`."""

PLUGIN = "parity.e2e.verl_cpu.platform"
"""The module verl imports in each of its processes (``VERL_USE_EXTERNAL_MODULES``)."""

CPU_OVERRIDES = [
    "trainer.device=cpu",
    "++ray_kwargs.ray_init.num_cpus=16",  # TransferQueue's actors ask for 9 CPUs
    "++ray_kwargs.ray_init.num_gpus=1",  # verl's pools ask Ray for "GPU": one logical GPU
    "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
    "actor_rollout_ref.actor.strategy=fsdp2",  # FSDP1 cannot sync module states on CPU
    # fp32 compute: the sampler/trainer log-prob gap then measures the weight sync alone
    "++actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=fp32",
    "actor_rollout_ref.actor.use_torch_compile=false",
    "actor_rollout_ref.actor.fsdp_config.use_torch_compile=false",
    "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    "actor_rollout_ref.model.use_remove_padding=false",
    "actor_rollout_ref.model.enable_gradient_checkpointing=false",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "actor_rollout_ref.rollout.free_cache_engine=false",
    "actor_rollout_ref.rollout.agent.num_workers=1",
    "reward.num_workers=1",
    "data.dataloader_num_workers=0",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
]
"""Overrides on top of the recipe's config that make verl run on a CPU (research note
``trainers-on-cpu.md``, section verl)."""


def harness_env(run_dir: Path) -> dict[str, str]:
    """Environment variables of the launch process (and so of every Ray worker)."""
    repo = str(Path(__file__).resolve().parents[3])
    return {
        "VERL_PLATFORM": PLATFORM,
        "VERL_USE_EXTERNAL_MODULES": PLUGIN,
        "VERL_ENGINE_DEVICE": "cuda",  # verl's FSDP engines register for cuda/npu only
        "VERL_FILE_LOGGER_PATH": str(run_dir / "metrics.jsonl"),
        REPORT_DIR_ENV: str(run_dir),
        "PYTHONPATH": os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p),
        "TOKENIZERS_PARALLELISM": "false",
        "RAY_DEDUP_LOGS": "0",
    }


def main(run_dir: Path, model_dir: Path, steps: int) -> None:
    """Train `steps` optimizer steps from `model_dir`; metrics go to ``run_dir``."""

    check_versions()
    import verl  # noqa: F401  (first: verl imports PLUGIN, which registers the harness)
    from verl.trainer.main_ppo import TaskRunnerV1, run_ppo

    from xpgym.adapters.verl import ppo_config, ppo_overrides, write_run_files
    from xpgym.rollout.runner import make_tasks

    write_run_files(
        run_dir,
        make_tasks(ENV_ID, TASKS_PER_STEP * steps, seed=0),
        layout="per_turn",
        max_turns=MAX_TURNS,
        max_new_tokens=MAX_NEW_TOKENS,
    )
    overrides = ppo_overrides(
        model=str(model_dir),
        run_dir=run_dir,
        algorithm="rebn",
        train_batch_size=TASKS_PER_STEP,
        ppo_mini_batch_size=TASKS_PER_STEP,
        lr=LR,
        prompt_length=PROMPT_LENGTH,
        response_length=RESPONSE_LENGTH,
        total_steps=steps,
        rollout_name=ROLLOUT_NAME,
        loggers=("console", "file"),
    )
    run_ppo(ppo_config([*overrides, *CPU_OVERRIDES]), task_runner_class=TaskRunnerV1)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
