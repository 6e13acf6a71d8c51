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
    from xpgym.adapters.rl2 import ALGORITHMS

    if args.algorithm not in ALGORITHMS:
        raise SystemExit(f"--algorithm must be one of {sorted(ALGORITHMS)}, got {args.algorithm!r}")
    if args.algorithm in ("grpo", "dr_grpo") and args.responses_per_prompt < 2:
        raise SystemExit(f"--algorithm {args.algorithm} needs --responses-per-prompt >= 2")


# --------------------------------------------------------------------------------------
# Config: RL2's ppo config (the model is --model: RL2 loads it)
# --------------------------------------------------------------------------------------


def rl2_overrides(args: Args, out_dir: Path) -> list[str]:
    """Hydra overrides of RL2's ``ppo`` config for this run."""
    from xpgym.adapters.rl2 import ppo_overrides

    return ppo_overrides(
        model=args.model,
        data_path=out_dir / "train.jsonl",
        save_dir=out_dir / "checkpoints",
        algorithm=args.algorithm,
        gamma=args.gamma,
        prompts_per_rollout=args.prompts_per_rollout,
        responses_per_prompt=args.responses_per_prompt,
        update_per_rollout=args.update_per_rollout,
        lr=args.lr,
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        max_length_per_device=args.max_length_per_device,
        experiment_name=f"{args.env_id.replace(':', '_')}-{args.algorithm}",
    )


# --------------------------------------------------------------------------------------
# Env: the task rows RL2's dataloader reads, and the trainer's launch
# --------------------------------------------------------------------------------------


def write_dataset(args: Args, out_dir: Path) -> list[dict[str, Any]]:
    """One JSONL row per task: only ``extra_info`` (no ``prompt``: the env module resets)."""
    from xpgym.adapters.rl2 import write_dataset as write_rows
    from xpgym.rollout.runner import make_tasks

    return write_rows(
        out_dir / "train.jsonl",
        make_tasks(args.env_id, args.num_tasks, seed=args.seed),
        tokenizer=args.model,
        max_turns=args.max_turns,
    )


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
    """Inside torchrun: RL2's trainer on its ``ppo`` config with `overrides`, xpgym's
    advantage override and infra-error masking installed (`xpgym.adapters.rl2.train`)."""
    from xpgym.adapters.rl2 import train

    train(overrides)


# --------------------------------------------------------------------------------------
# Dry run: what RL2 would get, on CPU, with a tiny local model
# --------------------------------------------------------------------------------------


def dry_run(args: Args, out_dir: Path) -> dict[str, Any]:
    """The run's config (saved resolved as ``ppo.yaml``), the task rows, the env module RL2
    loads from ``rollout.env_path``, and one batch a tiny offline model plays, as RL2's
    tensor dict; no GPU, no download."""
    from omegaconf import OmegaConf

    import xpgym
    from xpgym.adapters.rl2 import ENV_PATH, ppo_config, to_tensor_dict
    from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
    from xpgym.rollout.collector import collect_episodes
    from xpgym.rollout.policies.hf import HFPolicy

    overrides = rl2_overrides(args, out_dir)
    rows = write_dataset(args, out_dir)
    OmegaConf.save(ppo_config(overrides), out_dir / "ppo.yaml", resolve=True)
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
