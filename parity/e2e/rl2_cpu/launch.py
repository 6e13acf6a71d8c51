"""Test harness (not a way to train): run RL2's PPO trainer on CPU, in this process.

``python -m parity.e2e.rl2_cpu.launch RUN_DIR MODEL_DIR`` reads the run's settings from
``RUN_DIR/settings.json`` (`parity.e2e.rl2` writes it), then does what
``recipes/train_rl2.py``'s launch does under torchrun, with the same adapter functions the
recipe calls: writes the task rows (`xpgym.adapters.rl2.write_dataset`), builds RL2's ``ppo``
overrides (`xpgym.adapters.rl2.ppo_overrides`) and runs `xpgym.adapters.rl2.train` (the
advantage override and the infra-error masking installed, then RL2's ``main``), as the one
process torchrun would start (`torchrun_env`). What differs is named here: `CPU_OVERRIDES`
on top of the recipe's, and, around the trainer, RL2 importable on a CPU
(`parity.shared.rl2_imports.rl2_importable`), the harness's patches
(`parity.e2e.rl2_cpu.patches`) and its observers (`parity.e2e.rl2_cpu.observe`).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from parity.e2e.rl2_cpu import check_versions
from parity.e2e.subprocess_run import read_settings

__all__ = [
    "CPU_OVERRIDES",
    "cpu_overrides",
    "main",
    "recipe_overrides",
    "torchrun_env",
]


CPU_OVERRIDES = [
    # utils/offloading.py:15-26 moves FSDP's flat parameters; the model is on the CPU already
    "actor.offload_model=false",
    "actor.offload_optimizer=false",
    # RL2's default is bfloat16; float32 on both sides, so that the log-probs compare tightly
    "rollout.server_args.dtype=float32",
    # the harness's recorder is the run's wandb; with false RL2 drops every metric
    # (trainer/base.py:22)
    "trainer.use_wandb=true",
]
"""Overrides after the recipe's; each replaces the recipe's value of its key."""


def recipe_overrides(settings: dict[str, Any], model_dir: Path, run_dir: Path) -> list[str]:
    """The recipe's overrides for this run (`xpgym.adapters.rl2.ppo_overrides`): one optimizer
    step per step (``update_per_rollout=1``), ``settings`` for the rest."""
    from xpgym.adapters.rl2 import ppo_overrides

    return ppo_overrides(
        model=str(model_dir),
        data_path=run_dir / "train.jsonl",
        save_dir=run_dir / "checkpoints",
        algorithm="rebn",
        gamma=settings["gamma"],
        prompts_per_rollout=settings["tasks_per_step"],
        responses_per_prompt=settings["group_size"],
        update_per_rollout=1,
        lr=settings["lr"],
        max_turns=settings["max_turns"],
        max_new_tokens=settings["max_new_tokens"],
        max_length_per_device=settings["max_len"],
        experiment_name="parity-e2e",
    )


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+")


def cpu_overrides(overrides: list[str], run_dir: Path) -> list[str]:
    """The recipe's `overrides` without the keys `CPU_OVERRIDES` set, then `CPU_OVERRIDES`
    and the final model's directory (``trainer.save_dir``, RL2's ``save_model``)."""
    cpu = [*CPU_OVERRIDES, f"trainer.save_dir={run_dir / 'final'}"]
    replaced = {_key(override) for override in cpu}
    return [*(o for o in overrides if _key(o) not in replaced), *cpu]


def torchrun_env(port: int) -> dict[str, str]:
    """What ``torchrun --nproc_per_node=1`` sets for its one process."""
    return {
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }


def main(run_dir: Path, model_dir: Path) -> None:
    """Train the steps of ``RUN_DIR/settings.json`` from `model_dir`; reports go to `run_dir`."""
    import os

    import torch

    from parity.e2e.rl2_cpu import patches
    from parity.e2e.rl2_cpu.observe import install_recorder, observe_actor
    from parity.shared.rl2_imports import rl2_importable
    from parity.update._common import free_port
    from xpgym.adapters.rl2 import train, write_dataset
    from xpgym.rollout.runner import make_tasks

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    check_versions()
    settings = read_settings(run_dir)
    os.environ.update(torchrun_env(free_port()))
    torch.set_num_threads(settings["threads"])
    torch.manual_seed(settings["seed"])
    tasks = make_tasks(
        settings["env_id"], settings["steps"] * settings["tasks_per_step"], seed=settings["seed"]
    )
    write_dataset(
        run_dir / "train.jsonl", tasks, tokenizer=str(model_dir), max_turns=settings["max_turns"]
    )
    overrides = cpu_overrides(recipe_overrides(settings, model_dir, run_dir), run_dir)
    # transformers (through accelerate) asks at import whether wandb is installed: it is not,
    # and the recorder must not look like an installation to it
    import transformers.modeling_utils  # noqa: F401

    recorder = install_recorder(run_dir)
    with rl2_importable():
        from RL2.workers import Actor

        patches.apply(run_dir, settings["seed"])
        observe_actor(Actor, recorder)
        train(overrides)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())
