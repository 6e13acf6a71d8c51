r"""Train an LLM on an xpgym env with ROLL: step_reinforce + batch mean/std (ReBN, GEM setup).

ROLL is not on PyPI: it runs from a clone of alibaba/ROLL (Docker images recommended).
ROLL's ``StepEnvManager`` makes one sample per turn; its envs come from GEM's registry,
where ``xpgym.adapters.roll`` registers xpgym envs (``xpgym:<id>``) in every Ray worker
(``worker_process_setup_hook``); ``step_reinforce`` discounts each turn's reward over the
episode and normalises over the batch. UNTESTED end to end: ROLL could not be installed
where this recipe was written; the tests run its launch up to ROLL's own code.

Install (a GPU machine, inside ROLL's Docker image or after its requirements files):

    git clone https://github.com/alibaba/ROLL && pip install -e ROLL && pip install "xpgym[roll]"

Launch (writes the pipeline YAML to --out-dir, starts Ray with xpgym's setup hook, then
runs ROLL's examples/start_agentic_pipeline.py on it):

    python recipes/train_roll.py --roll-dir ROLL --env-id game:GuessTheNumber-v0-easy \
        --model Qwen/Qwen3-1.7B --n-gpus 1

CPU check, no download (writes the YAML; registers the env in GEM 0.0.4's registry and
resets it the way ROLL's env managers do; converts a batch a tiny local model plays to
ROLL's keys: their shapes go to ``dry_run.json``):

    python recipes/train_roll.py --dry-run

Defaults follow the GEM paper (Appendix F) and ROLL's GEM game configs: step_reward_gamma
0.9 for games, lr 1e-6 constant, no weight decay, grad clip 1.0, 2 PPO epochs, no KL,
token-mean loss, temperature 1.0, top-p 1.
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
    algorithm: str = "rebn"  # rebn: step_reinforce + batch mean/std; reinforce: identity
    gamma: float = 0.9  # step_reward_gamma (GEM: 0.9 for games and QA, 1.0 otherwise)
    rollout_batch_size: int = 128  # samples (turns) per step
    num_env_groups: int = 128
    group_size: int = 1
    max_turns: int = 10
    max_new_tokens: int = 4096  # per turn (max_tokens_per_step)
    sequence_length: int = 16384
    lr: float = 1e-6
    max_steps: int = 500
    n_gpus: int = 1
    seed: int = 0
    roll_dir: str = "ROLL"
    out_dir: str = "results/train_roll"
    dry_run: bool = False


def check_args(args: Args) -> None:
    """Refuse flags the step_reinforce pipeline cannot run, before anything is written."""
    if args.algorithm not in ("rebn", "reinforce"):
        raise SystemExit(f"--algorithm must be rebn or reinforce, got {args.algorithm!r}")


# --------------------------------------------------------------------------------------
# Config: ROLL's agentic pipeline YAML (the model is --model; ROLL's env managers make the
# envs from GEM's registry, where the Ray setup hook registers them)
# --------------------------------------------------------------------------------------


def pipeline_config(args: Args) -> dict[str, Any]:
    """ROLL agentic pipeline config (the keys of ROLL's GEM examples) for this run."""
    from xpgym.adapters.roll import PREFIX, STEP_REINFORCE_CONFIG

    gpus = f"list(range(0,{args.n_gpus}))"
    method = "mean_std" if args.algorithm == "rebn" else "identity"
    env_group = {
        "num_env_groups": args.num_env_groups,
        "tags": ["xpgym"],
        "num_groups_partition": [args.num_env_groups],
    }
    return {
        **STEP_REINFORCE_CONFIG,
        "step_reward_gamma": args.gamma,
        "reward_normalization": {"grouping": "batch", "method": method},
        "exp_name": f"xpgym-{args.env_id.replace(':', '_')}",
        "seed": args.seed,
        "output_dir": str(Path(args.out_dir) / "output"),
        "max_steps": args.max_steps,
        "rollout_batch_size": args.rollout_batch_size,
        "val_batch_size": args.rollout_batch_size,
        "sequence_length": args.sequence_length,
        "num_gpus_per_node": args.n_gpus,
        "pretrain": args.model,
        "reward_pretrain": args.model,
        "actor_train": {
            "training_args": {
                "learning_rate": args.lr,
                "weight_decay": 0,
                "per_device_train_batch_size": 1,
                "gradient_accumulation_steps": 8,
                "lr_scheduler_type": "constant",
            },
            "strategy_args": {"strategy_name": "fsdp2_train", "strategy_config": {}},
            "device_mapping": gpus,
        },
        "actor_infer": {
            "generating_args": {
                "max_new_tokens": args.max_new_tokens,
                "top_p": 1.0,
                "top_k": -1,
                "temperature": 1.0,
                "num_return_sequences": 1,
            },
            "strategy_args": {
                "strategy_name": "vllm",
                "strategy_config": {"gpu_memory_utilization": 0.6},
            },
            "device_mapping": gpus,
        },
        "reference": {
            "strategy_args": {"strategy_name": "hf_infer", "strategy_config": None},
            "device_mapping": gpus,
        },
        "train_env_manager": {
            **env_group,
            "group_size": args.group_size,
            "max_env_num_per_worker": 16,
        },
        "val_env_manager": {**env_group, "group_size": 1, "max_env_num_per_worker": 16},
        "custom_envs": {
            "xpgym": {
                "env_type": f"{PREFIX}{args.env_id}",
                "max_steps": args.max_turns,
                "max_tokens_per_step": args.max_new_tokens,
                "env_manager_cls": STEP_REINFORCE_CONFIG["env_manager_cls"],
                "use_thread_lock": True,
                "env_config": {},
            }
        },
    }


def write_config(args: Args, out_dir: Path) -> Path:
    """`pipeline_config` as the YAML ROLL's launcher composes with Hydra."""
    import yaml

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "xpgym_step_reinforce.yaml"
    path.write_text(yaml.safe_dump(pipeline_config(args), sort_keys=False))
    return path


# --------------------------------------------------------------------------------------
# The trainer's launch
# --------------------------------------------------------------------------------------


def launch(args: Args, out_dir: Path) -> None:
    """Ray with xpgym's setup hook, then ROLL's own launcher on the written config (GPU)."""
    import ray

    from xpgym.adapters.roll import ROLL_RUNTIME_ENV

    config = write_config(args, out_dir)
    ray.init(runtime_env=dict(ROLL_RUNTIME_ENV))  # ROLL's init() keeps an initialised Ray
    script = Path(args.roll_dir).resolve() / "examples" / "start_agentic_pipeline.py"
    # The launcher hands --config_path to Hydra's initialize(), which takes it relative to
    # the launcher's own directory and refuses an absolute path.
    config_path = os.path.relpath(config.parent, script.parent)
    sys.argv = [str(script), "--config_path", config_path, "--config_name", config.stem]
    runpy.run_path(str(script), run_name="__main__")


# --------------------------------------------------------------------------------------
# Dry run: what ROLL would get, on CPU, with a tiny local model
# --------------------------------------------------------------------------------------


def dry_run(args: Args, out_dir: Path) -> dict[str, Any]:
    """The pipeline YAML, the env as ROLL's env manager makes it from GEM's registry (its
    first observation), and one batch a tiny offline model plays, as ROLL's step keys; no
    GPU, no download, no ROLL."""
    import gem

    import xpgym
    from xpgym.adapters.roll import register_gem_envs, step_batch
    from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
    from xpgym.rollout.collector import collect_episodes
    from xpgym.rollout.policies.hf import HFPolicy

    config_path = write_config(args, out_dir)
    (gem_id,) = register_gem_envs([args.env_id])  # what ROLL_RUNTIME_ENV's hook does
    env = gem.make(env_id=gem_id, **pipeline_config(args)["custom_envs"]["xpgym"]["env_config"])
    observation, _ = env.reset(seed=args.seed)

    # A tiny offline model stands in for --model and vLLM: one batch of episodes.
    tokenizer = build_tiny_tokenizer(env_corpus(xpgym.make(args.env_id), episodes=5))
    model = build_tiny_model(tokenizer, seed=args.seed)
    policy = HFPolicy(model, tokenizer, max_new_tokens=min(args.max_new_tokens, 8), seed=args.seed)
    # About one step's samples (turns), in whole groups.
    n = args.group_size * max(1, args.rollout_batch_size // (args.max_turns * args.group_size))
    vec = xpgym.make_vec(args.env_id, min(n, 8))
    episodes = collect_episodes(
        vec,
        policy,
        num_episodes=n,
        group_size=args.group_size,
        seed=args.seed,
        max_turns=args.max_turns,
    )
    vec.close()
    batch = step_batch(
        episodes, pad_token_id=tokenizer.pad_token_id, sequence_length=args.sequence_length
    )
    summary = {
        "config": asdict(args),
        "roll_config": str(config_path),
        "hook": gem_id,
        "first_observation": str(observation)[:80],
        "episodes": len(episodes),
        "samples": len(batch),
        "batch": {k: f"{v.dtype}{list(v.shape)}" for k, v in batch.batch.items()},
        "non_tensor_batch": sorted(batch.non_tensor_batch),
        "policy_tokens": int(batch.batch["response_mask"].sum()),
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
