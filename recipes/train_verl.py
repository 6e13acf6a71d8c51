r"""Train an LLM on an xpgym env with verl: multi-turn REINFORCE + ReBN (the GEM paper's setup).

verl 0.9.x, V1 trainer. verl's own rollout drives the env through `XpgymAgentLoop`
(``xpgym.adapters.verl``), and its own trainer computes the advantages with the registered
``xpgym_rebn`` estimator (per-turn returns ``G_t = r_t + gamma * G_{t+1}``, normalised over
every turn of the batch).

Install (a GPU machine; verl needs a rollout engine, vLLM here):

    pip install torch==2.13.0 && pip install "xpgym[verl]" vllm

Launch (one GPU; writes the task dataset and the agent-loop config to --out-dir, then runs
verl's V1 trainer):

    python recipes/train_verl.py --env-id game:GuessTheNumber-v0-easy \
        --model Qwen/Qwen3-1.7B --n-gpus 1

CPU check, no download (verl's own ``validate_config`` on the run's config, saved resolved
as ``ppo_trainer.yaml``; the task rows; the agent loop verl will load; a batch a tiny local
model plays, as verl's ``DataProto``: its shapes go to ``dry_run.json``):

    python recipes/train_verl.py --dry-run

Defaults follow the GEM paper (Appendix F): gamma 0.9 for games, lr 1e-6, AdamW
(0.9, 0.95), no weight decay, grad clip 1.0, constant lr, 2 PPO epochs, clip 0.2, no KL
loss or penalty, temperature 1.0, top-p 1, top-k off.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xpgym.recipe_args import parse_dataclass_args
from xpgym.training.advantages import GROUP_ALGORITHMS


@dataclass
class Args:
    env_id: str = "game:GuessTheNumber-v0-easy"
    model: str = "Qwen/Qwen3-1.7B"
    algorithm: str = "rebn"  # rebn | reinforce | grpo | dr_grpo | rloo
    layout: str = "per_turn"  # per_turn (GEM: one sample per turn) | per_episode
    gamma: float = 0.9  # GEM: 0.9 for games and QA, 1.0 otherwise
    train_batch_size: int = 32  # tasks (dataset rows) per step
    rollout_n: int = 1  # episodes per task (the group size; >= 2 for grpo/dr_grpo/rloo)
    ppo_mini_batch_size: int = 32
    ppo_epochs: int = 2
    lr: float = 1e-6
    max_turns: int = 10
    max_new_tokens: int = 4096  # per turn
    prompt_length: int = 8192  # per-turn rows hold the whole history in their prompt
    response_length: int = 4096
    num_tasks: int = 4096  # dataset rows
    total_steps: int = 500
    n_gpus: int = 1
    seed: int = 0
    out_dir: str = "results/train_verl"
    dry_run: bool = False


def check_args(args: Args) -> None:
    """Refuse flags verl cannot run together, before anything is written."""
    from xpgym.adapters.verl import ALGORITHMS

    if args.algorithm not in ALGORITHMS:
        raise SystemExit(f"--algorithm must be one of {sorted(ALGORITHMS)}, got {args.algorithm!r}")
    if args.algorithm in GROUP_ALGORITHMS:
        if args.rollout_n < 2:
            raise SystemExit(f"--algorithm {args.algorithm} needs --rollout-n >= 2 (a group)")
        if args.layout != "per_episode":
            raise SystemExit(
                f"verl's {args.algorithm} reads each row's reward sum: use --layout per_episode"
            )


# --------------------------------------------------------------------------------------
# Config: verl's ppo_trainer config (the model is --model: verl's workers load it)
# --------------------------------------------------------------------------------------


def verl_overrides(args: Args, out_dir: Path) -> list[str]:
    """Hydra overrides of verl's ``ppo_trainer`` config for this run."""
    from xpgym.adapters.verl import ppo_overrides

    return ppo_overrides(
        model=args.model,
        run_dir=out_dir,
        algorithm=args.algorithm,
        gamma=args.gamma,
        train_batch_size=args.train_batch_size,
        rollout_n=args.rollout_n,
        ppo_mini_batch_size=args.ppo_mini_batch_size,
        ppo_epochs=args.ppo_epochs,
        lr=args.lr,
        prompt_length=args.prompt_length,
        response_length=args.response_length,
        total_steps=args.total_steps,
        n_gpus=args.n_gpus,
    )


def compose_config(args: Args, out_dir: Path) -> Any:
    """verl's ``ppo_trainer`` config with `verl_overrides` applied (no Ray, no GPU)."""
    from xpgym.adapters.verl import ppo_config

    return ppo_config(verl_overrides(args, out_dir))


# --------------------------------------------------------------------------------------
# Env: the task rows verl's dataloader reads, and the trainer's launch
# --------------------------------------------------------------------------------------


def write_dataset(args: Args, out_dir: Path) -> list[dict[str, Any]]:
    """The task rows (one per reset seed) as parquet, and the agent-loop registry file."""
    from xpgym.adapters.verl import write_run_files
    from xpgym.rollout.runner import make_tasks

    return write_run_files(
        out_dir,
        make_tasks(args.env_id, args.num_tasks, seed=args.seed),
        layout=args.layout,
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
    )


def launch(args: Args, out_dir: Path) -> None:
    """Run verl's V1 trainer (GPU)."""
    from verl.trainer.main_ppo import TaskRunnerV1, run_ppo

    import xpgym.adapters.verl  # noqa: F401  (registers xpgym_agent and the estimators)

    write_dataset(args, out_dir)
    run_ppo(compose_config(args, out_dir), task_runner_class=TaskRunnerV1)


# --------------------------------------------------------------------------------------
# Dry run: what verl would get, on CPU, with a tiny local model
# --------------------------------------------------------------------------------------


def dry_run(args: Args, out_dir: Path) -> dict[str, Any]:
    """The run's config (verl's own ``validate_config``; saved resolved as
    ``ppo_trainer.yaml``), the task rows, the agent loop verl's registry file names, and one
    batch a tiny offline model plays, as verl's ``DataProto``; no GPU, no download."""
    from hydra.utils import get_class
    from omegaconf import OmegaConf
    from verl.trainer.main_ppo import validate_config
    from verl.trainer.ppo.utils import need_critic, need_reference_policy

    import xpgym
    from xpgym.adapters.verl import to_data_proto
    from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
    from xpgym.rollout.collector import collect_episodes
    from xpgym.rollout.policies.hf import HFPolicy

    config = compose_config(args, out_dir)
    validate_config(config, need_reference_policy(config), need_critic(config))
    rows = write_dataset(args, out_dir)
    OmegaConf.save(config, out_dir / "ppo_trainer.yaml", resolve=True)
    (entry,) = OmegaConf.load(out_dir / "agent_loops.yaml")  # imported the way verl does
    hook = get_class(entry["_target_"])

    # A tiny offline model stands in for --model and verl's engine: one batch of episodes.
    tokenizer = build_tiny_tokenizer(env_corpus(xpgym.make(args.env_id), episodes=5))
    model = build_tiny_model(tokenizer, seed=args.seed)
    policy = HFPolicy(model, tokenizer, max_new_tokens=min(args.max_new_tokens, 8), seed=args.seed)
    n = args.train_batch_size * args.rollout_n
    vec = xpgym.make_vec(args.env_id, min(n, 8))
    episodes = collect_episodes(
        vec,
        policy,
        num_episodes=n,
        group_size=args.rollout_n,
        seed=args.seed,
        max_turns=args.max_turns,
    )
    vec.close()
    data = to_data_proto(
        episodes,
        pad_token_id=tokenizer.pad_token_id,
        layout=args.layout,
        gamma=args.gamma,
        max_prompt_length=args.prompt_length,
        max_response_length=args.response_length,
    )
    summary: dict[str, Any] = {
        "config": asdict(args),
        "overrides": verl_overrides(args, out_dir),
        "hook": f"{hook.__module__}.{hook.__qualname__}",
        "tasks": len(rows),
        "episodes": len(episodes),
        "rows": len(data),
        "batch": {k: f"{v.dtype}{list(v.shape)}" for k, v in data.batch.items()},
        "policy_tokens": int(data.batch["response_mask"].sum()),
        "mean_return": float(np.mean([ep.total_reward for ep in episodes])),
    }
    (out_dir / "dry_run.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main() -> None:
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
