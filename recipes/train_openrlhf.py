r"""Train an LLM on an xpgym env with OpenRLHF: multi-turn REINFORCE + ReBN (the GEM setup).

OpenRLHF 0.11.x. Its own vLLM rollout drives the env through xpgym's ``AgentExecutor``
(``--train.agent_func_path``); one sequence per episode, env tokens masked. OpenRLHF has no
per-turn returns, so for ``--algorithm rebn``/``reinforce`` the recipe installs xpgym's
override of ``RemoteExperienceMaker.compute_advantages_and_returns`` in every Ray worker
(``worker_process_setup_hook``): per-turn ``G_t = r_t + gamma * G_{t+1}``, normalised over
every turn of the batch. ``grpo``/``dr_grpo``/``rloo`` use OpenRLHF's own estimators.

Install (a GPU machine):

    pip install torch==2.13.0 && pip install "xpgym[openrlhf]" "openrlhf[vllm]==0.11.2"

Launch (one GPU, actor, reference and vLLM colocated):

    python recipes/train_openrlhf.py --env-id game:GuessTheNumber-v0-easy \
        --model Qwen/Qwen3-1.7B --n-gpus 1

CPU check, no download (the Ray runtime env and the flags OpenRLHF gets, the task rows, the
executor it loads, and a batch a tiny local model plays, as OpenRLHF's ``Experience``: its
shapes go to ``dry_run.json``):

    python recipes/train_openrlhf.py --dry-run

Defaults follow the GEM paper (Appendix F): gamma 0.9 for games, lr 1e-6, Adam
(0.9, 0.95), no weight decay, grad clip 1.0, constant lr, 2 epochs per batch, clip 0.2, no
KL (OpenRLHF's default ``--algo.kl.init_coef`` is 0.01), temperature 1.0, top-p 1.
"""

from __future__ import annotations

import json
import logging
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
    algorithm: str = "rebn"  # rebn | reinforce | grpo | dr_grpo | rloo
    gamma: float = 0.9  # GEM: 0.9 for games and QA, 1.0 otherwise
    rollout_batch_size: int = 32  # prompts (tasks) per step
    n_samples_per_prompt: int = 1  # episodes per task (group size; >= 2 for grpo/rloo)
    train_batch_size: int = 32
    max_epochs: int = 2
    lr: float = 1e-6
    max_turns: int = 10
    max_new_tokens: int = 4096  # per turn
    max_len: int = 16384  # whole sequence: prompt, env and policy tokens
    num_tasks: int = 4096
    n_gpus: int = 1
    seed: int = 0
    out_dir: str = "results/train_openrlhf"
    dry_run: bool = False


def check_args(args: Args) -> None:
    """Refuse flags OpenRLHF cannot run together, before anything is written."""
    from xpgym.adapters.openrlhf import check_algorithm

    try:
        check_algorithm(args.algorithm, args.n_samples_per_prompt)
    except ValueError as exc:
        raise SystemExit(f"--algorithm / --n-samples-per-prompt: {exc}") from None


# --------------------------------------------------------------------------------------
# Launch: the task rows, then OpenRLHF's CLI with xpgym's flags (the model is --model)
# --------------------------------------------------------------------------------------


def openrlhf_flags(args: Args, out_dir: Path) -> list[str]:
    """Command-line flags of ``openrlhf.cli.train_ppo_ray`` for this run."""
    from xpgym.adapters.openrlhf import train_ppo_ray_flags

    return train_ppo_ray_flags(
        model=args.model,
        run_dir=out_dir,
        algorithm=args.algorithm,
        gamma=args.gamma,
        rollout_batch_size=args.rollout_batch_size,
        n_samples_per_prompt=args.n_samples_per_prompt,
        train_batch_size=args.train_batch_size,
        max_epochs=args.max_epochs,
        lr=args.lr,
        max_new_tokens=args.max_new_tokens,
        max_len=args.max_len,
        n_gpus=args.n_gpus,
        seed=args.seed,
    )


def write_dataset(args: Args, out_dir: Path) -> list[dict[str, str]]:
    """One JSONL prompt per task; its label names the episode to play."""
    from xpgym.adapters.openrlhf import write_task_rows

    return write_task_rows(
        out_dir,
        args.env_id,
        args.num_tasks,
        algorithm=args.algorithm,
        gamma=args.gamma,
        max_turns=args.max_turns,
        seed=args.seed,
    )


def launch(args: Args, out_dir: Path) -> None:
    """Start Ray with the override in every worker, then run OpenRLHF's CLI (GPU)."""
    import ray

    from xpgym.adapters.openrlhf import ray_runtime_env

    write_dataset(args, out_dir)
    ray.init(runtime_env=ray_runtime_env(args.algorithm))
    sys.argv = ["openrlhf.cli.train_ppo_ray", *openrlhf_flags(args, out_dir)]
    runpy.run_module("openrlhf.cli.train_ppo_ray", run_name="__main__")


# --------------------------------------------------------------------------------------
# Dry run: what OpenRLHF would get, on CPU, with a tiny local model
# --------------------------------------------------------------------------------------


def dry_run(args: Args, out_dir: Path) -> dict[str, Any]:
    """The run's Ray runtime env and flags, the task rows, the executor OpenRLHF loads from
    ``--train.agent_func_path``, and one batch a tiny offline model plays, as OpenRLHF's
    ``Experience``; no GPU, no download."""
    import xpgym
    from xpgym.adapters.openrlhf import AGENT_FUNC_PATH, ray_runtime_env, to_experience
    from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
    from xpgym.rollout.collector import collect_episodes
    from xpgym.rollout.policies.hf import HFPolicy

    flags = openrlhf_flags(args, out_dir)
    rows = write_dataset(args, out_dir)
    hook = runpy.run_path(AGENT_FUNC_PATH)["AgentExecutor"]  # loaded by path, as OpenRLHF does

    # A tiny offline model stands in for --model and vLLM: one batch of episodes.
    tokenizer = build_tiny_tokenizer(env_corpus(xpgym.make(args.env_id), episodes=5))
    model = build_tiny_model(tokenizer, seed=args.seed)
    policy = HFPolicy(model, tokenizer, max_new_tokens=min(args.max_new_tokens, 8), seed=args.seed)
    n = args.rollout_batch_size * args.n_samples_per_prompt
    vec = xpgym.make_vec(args.env_id, min(n, 8))
    episodes = collect_episodes(
        vec,
        policy,
        num_episodes=n,
        group_size=args.n_samples_per_prompt,
        seed=args.seed,
        max_turns=args.max_turns,
    )
    vec.close()
    experience = to_experience(
        episodes,
        pad_token_id=tokenizer.pad_token_id,
        max_length=args.max_len,
        n_samples_per_prompt=args.n_samples_per_prompt,
    )
    fields = ("sequences", "attention_mask", "action_mask", "rollout_log_probs", "rewards")
    summary: dict[str, Any] = {
        "config": asdict(args),
        "ray_runtime_env": ray_runtime_env(args.algorithm),
        "flags": flags,
        "hook": f"{AGENT_FUNC_PATH}:{hook.__name__}",
        "tasks": len(rows),
        "episodes": len(episodes),
        "batch": {
            name: f"{getattr(experience, name).dtype}{list(getattr(experience, name).shape)}"
            for name in fields
        },
        "policy_tokens": int(experience.action_mask.sum()),
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
