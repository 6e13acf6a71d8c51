r"""Train an LLM on an xpgym env with RL2: multi-turn REINFORCE + ReBN (the GEM setup).

RL2 as released on PyPI (``rl-square`` 0.0.2; current RL2 main has a different env API, see
``xpgym/adapters/rl2.py``). RL2's own SGLang rollout drives the env through xpgym's env
module (``rollout.env_path``); one sequence per episode, env tokens masked. RL2's
``reinforce`` is trajectory-level, so for ``--algorithm rebn``/``reinforce`` the recipe
runs RL2 with ``adv.estimator=xpgym_rebn``/``xpgym_reinforce`` and xpgym's override of
``compute_advantages`` installed in every torchrun process: per-turn
``G_t = r_t + gamma * G_{t+1}``, normalised over every turn of the batch. ``grpo`` and
``dr_grpo`` use RL2's own ``reinforce`` (with and without ``norm_var``).

Install (a GPU machine):

    pip install "xpgym[rl2]" "rl-square==0.0.2"   # pulls torch 2.8, SGLang 0.5.2, flash-attn

Launch (one GPU; writes the task dataset, then runs RL2's trainer under torchrun):

    python recipes/train_rl2.py --env-id game:GuessTheNumber-v0-easy \
        --model Qwen/Qwen3-1.7B --n-gpus 1

CPU check, no download (RL2's composed config, saved resolved as ``ppo.yaml``; the task
rows; the env module RL2 loads; a batch a tiny local model plays, as RL2's tensor dict: its
shapes go to ``dry_run.json``):

    python recipes/train_rl2.py --dry-run

Defaults follow the GEM paper (Appendix F): gamma 0.9 for games, lr 1e-6, no weight decay,
grad clip 1.0, constant lr, clip 0.2, no KL, temperature 1.0.
"""

from __future__ import annotations

import json
import logging
import os
import runpy
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xpgym.recipe_args import parse_dataclass_args

ESTIMATOR = {  # --algorithm -> (adv.estimator, adv.norm_var)
    "rebn": ("xpgym_rebn", False),
    "reinforce": ("xpgym_reinforce", False),
    "grpo": ("reinforce", True),
    "dr_grpo": ("reinforce", False),
}


@dataclass
class Args:
    env_id: str = "game:GuessTheNumber-v0-easy"
    model: str = "Qwen/Qwen3-1.7B"
    algorithm: str = "rebn"  # rebn | reinforce | grpo | dr_grpo
    gamma: float = 0.9  # GEM: 0.9 for games and QA, 1.0 otherwise
    prompts_per_rollout: int = 32  # tasks per step
    responses_per_prompt: int = 1  # episodes per task (group size; >= 2 for grpo)
    update_per_rollout: int = 2  # optimizer steps per rollout (RL2 splits one pass)
    lr: float = 1e-6
    max_turns: int = 10
    max_new_tokens: int = 4096  # per turn
    max_length_per_device: int = 16384
    num_tasks: int = 4096
    n_gpus: int = 1
    seed: int = 0
    out_dir: str = "results/train_rl2"
    dry_run: bool = False


def check_args(args: Args) -> None:
    """Refuse flags RL2 cannot run together, before anything is written."""
    if args.algorithm not in ESTIMATOR:
        raise SystemExit(f"--algorithm must be one of {sorted(ESTIMATOR)}, got {args.algorithm!r}")
    if args.algorithm in ("grpo", "dr_grpo") and args.responses_per_prompt < 2:
        raise SystemExit(f"--algorithm {args.algorithm} needs --responses-per-prompt >= 2")


# --------------------------------------------------------------------------------------
# Config: RL2's ppo config (the model is --model: RL2 loads it)
# --------------------------------------------------------------------------------------


def rl2_overrides(args: Args, out_dir: Path) -> list[str]:
    """Hydra overrides of RL2's ``ppo`` config for this run."""
    from xpgym.adapters.rl2 import ENV_PATH

    estimator, norm_var = ESTIMATOR[args.algorithm]
    data = out_dir / "train.jsonl"
    return [
        f"train_data.path={data}",
        f"train_data.prompts_per_rollout={args.prompts_per_rollout}",
        f"train_data.responses_per_prompt={args.responses_per_prompt}",
        f"test_data.path={data}",
        f"actor.model_name={args.model}",
        f"actor.max_length_per_device={args.max_length_per_device}",
        f"actor.lr={args.lr}",
        "actor.weight_decay=0.0",
        "actor.max_grad_norm=1.0",
        "actor.scheduler=constant",
        "actor.warmup_ratio=0.0",
        "actor.clip=0.2",
        "actor.kl.coef=0.0",
        f"actor.update_per_rollout={args.update_per_rollout}",
        f"rollout.max_turns={args.max_turns}",
        f"rollout.env_path={ENV_PATH}",
        "rollout.dynamic_filtering=false",
        "rollout.train_sampling_params.temperature=1.0",
        f"rollout.train_sampling_params.max_new_tokens={args.max_new_tokens}",
        "+rollout.train_sampling_params.skip_special_tokens=false",
        f"adv.estimator={estimator}",
        f"adv.gamma={args.gamma}",
        f"adv.norm_var={str(norm_var).lower()}",
        "trainer.project=xpgym",
        f"trainer.experiment_name={args.env_id.replace(':', '_')}-{args.algorithm}",
        f"trainer.save_dir={out_dir / 'checkpoints'}",
        "trainer.use_wandb=false",
    ]


def compose_config(overrides: list[str]) -> Any:
    """RL2's ``ppo`` config with Hydra `overrides` (`rl2_overrides`) applied (no GPU)."""
    import importlib.util

    from hydra import compose, initialize_config_dir

    # The package's location, without importing RL2.trainer (it needs wandb and SGLang).
    (package_dir,) = importlib.util.find_spec("RL2").submodule_search_locations
    config_dir = Path(package_dir) / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name="ppo", overrides=overrides)


# --------------------------------------------------------------------------------------
# Env: the task rows RL2's dataloader reads, and the trainer's launch
# --------------------------------------------------------------------------------------


def write_dataset(args: Args, out_dir: Path) -> list[dict[str, Any]]:
    """One JSONL row per task: only ``extra_info`` (no ``prompt``: the env module resets)."""
    from xpgym.adapters.rl2 import make_extra_info
    from xpgym.rollout.runner import make_tasks

    rows = [
        {"extra_info": make_extra_info(task, tokenizer=args.model, max_turns=args.max_turns)}
        for task in make_tasks(args.env_id, args.num_tasks, seed=args.seed)
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return rows


def launch(args: Args, out_dir: Path) -> None:
    """Write the dataset, then re-run this file as RL2's trainer under torchrun (GPU)."""
    write_dataset(args, out_dir)
    command = [
        "torchrun",
        f"--nproc_per_node={args.n_gpus}",
        str(Path(__file__).resolve()),
        "--rl2-worker",
        *rl2_overrides(args, out_dir),
    ]
    os.execvp(command[0], command)


def rl2_worker(overrides: list[str]) -> None:
    """Inside torchrun: install xpgym's advantage override and infra-error masking, then run
    RL2's trainer on its ``ppo`` config with `overrides`. RL2's ``main`` is called without its
    ``@hydra.main`` wrapper, which finds the config only when RL2 runs as ``python -m
    RL2.trainer.ppo`` (its config folder is not a package)."""
    from RL2.trainer import ppo

    from xpgym.adapters.rl2 import install_infra_masking, install_turn_advantages

    install_turn_advantages()
    install_infra_masking()
    ppo.main.__wrapped__(compose_config(overrides))


# --------------------------------------------------------------------------------------
# Dry run: what RL2 would get, on CPU, with a tiny local model
# --------------------------------------------------------------------------------------


def dry_run(args: Args, out_dir: Path) -> dict[str, Any]:
    """The run's config (saved resolved as ``ppo.yaml``), the task rows, the env module RL2
    loads from ``rollout.env_path``, and one batch a tiny offline model plays, as RL2's
    tensor dict; no GPU, no download."""
    from omegaconf import OmegaConf

    import xpgym
    from xpgym.adapters.rl2 import ENV_PATH, to_tensor_dict
    from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
    from xpgym.rollout.collector import collect_episodes
    from xpgym.rollout.policies.hf import HFPolicy

    overrides = rl2_overrides(args, out_dir)
    rows = write_dataset(args, out_dir)
    OmegaConf.save(compose_config(overrides), out_dir / "ppo.yaml", resolve=True)
    env_module = runpy.run_path(ENV_PATH)  # loaded by path, as RL2's rollout does

    # A tiny offline model stands in for --model and SGLang: one batch of episodes.
    tokenizer = build_tiny_tokenizer(env_corpus(xpgym.make(args.env_id), episodes=5))
    model = build_tiny_model(tokenizer, seed=args.seed)
    policy = HFPolicy(model, tokenizer, max_new_tokens=min(args.max_new_tokens, 8), seed=args.seed)
    n = args.prompts_per_rollout * args.responses_per_prompt
    vec = xpgym.make_vec(args.env_id, min(n, 8))
    episodes = collect_episodes(
        vec,
        policy,
        num_episodes=n,
        group_size=args.responses_per_prompt,
        seed=args.seed,
        max_turns=args.max_turns,
    )
    vec.close()
    tensor_dict, cu_seqs = to_tensor_dict(episodes)
    summary: dict[str, Any] = {
        "config": asdict(args),
        "overrides": overrides,
        "hook": {name: f"{env_module[name].__module__}.{name}" for name in ("reset", "step")},
        "tasks": len(rows),
        "episodes": len(episodes),
        "sequences": int(cu_seqs[-1]),
        "batch": {k: f"{v.dtype}{list(v.shape)}" for k, v in tensor_dict.items()},
        "policy_tokens": int(tensor_dict["action_mask"].sum()),
        "mean_return": float(np.mean([ep.total_reward for ep in episodes])),
    }
    (out_dir / "dry_run.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--rl2-worker":
        rl2_worker(sys.argv[2:])
        return
    args = parse_dataclass_args(Args, __doc__.splitlines()[0])
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    check_args(args)
    out_dir = Path(args.out_dir).resolve()
    if args.dry_run:
        summary = dry_run(args, out_dir)
        print(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=2))
        print(f"dry run ok: wrote {out_dir}/dry_run.json")
    else:
        launch(args, out_dir)


if __name__ == "__main__":
    main()
