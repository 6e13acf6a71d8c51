r"""Train an LLM on an xpgym env with TRL's GRPOTrainer: whole multi-turn episodes per sample.

TRL 1.16 (``pip install "xpgym[trl]"``). TRL's own ``GRPOTrainer`` drives xpgym through its
``rollout_func`` hook (``xpgym/adapters/trl.py``): each of the ``num_generations`` samples
of a task is one whole episode played token-exactly with the trainer's current model; env
tokens are masked out of the loss (``env_mask``). ``--algorithm grpo`` trains on TRL's own
group advantage of the episode rewards; ``rebn`` / ``reinforce`` use xpgym's
``TurnCreditGRPOTrainer``, which feeds per-turn ``G_t = r_t + gamma * G_{t+1}`` (normalised
over every turn of the batch for ``rebn``) on each token.

Launch (one machine; ``accelerate launch recipes/train_trl.py ...`` for several GPUs):

    python recipes/train_trl.py --env-id game:GuessTheNumber-v0-easy \
        --model Qwen/Qwen3-1.7B

CPU check, no download (builds TRL's trainer around a tiny local model and plays one batch
through the rollout_func and TRL's own scoring step: the batch's shapes go to
``dry_run.json``):

    python recipes/train_trl.py --dry-run

Horizon curriculum (AgentGym-RL's ScalingInter-RL): ``--horizon-schedule 5,10,15
--horizon-every 100`` caps episodes at 5 turns for training steps 0..99, 10 for 100..199
and 15 from step 200 on (each env is wrapped in ``HorizonSchedule``, which the rollout_func
gives the trainer's ``global_step``; it replaces ``--max-turns``), e.g. on
``--env-id world:Crafting-v0``.

Defaults follow the GEM paper (Appendix F): gamma 0.9 for games, lr 1e-6, no weight decay,
grad clip 1.0, constant lr, clip 0.2, no KL, temperature 1.0.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from xpgym.core.wrappers.limits import PiecewiseTurnSchedule
from xpgym.recipe_args import parse_dataclass_args

ALGORITHMS = ("rebn", "reinforce", "grpo")


@dataclass
class Args:
    env_id: str = "game:GuessTheNumber-v0-easy"
    model: str = "Qwen/Qwen3-1.7B"
    algorithm: str = "rebn"  # rebn | reinforce (per turn, xpgym) | grpo (TRL's own)
    gamma: float = 0.9  # GEM: 0.9 for games and QA, 1.0 otherwise
    batch_size: int = 32  # episodes per device per step (per_device_train_batch_size)
    num_generations: int = 4  # episodes per task (the GRPO group)
    lr: float = 1e-6
    max_steps: int = 500
    max_turns: int = 10  # unused with --horizon-schedule
    horizon_schedule: str = ""  # turn caps by phase, e.g. "5,10,15" (ScalingInter-RL)
    horizon_every: int = 100  # training steps per phase of --horizon-schedule
    max_new_tokens: int = 512  # per turn
    max_completion_length: int = 4096  # every token after the first prompt, env tokens too
    num_tasks: int = 4096
    seed: int = 0
    out_dir: str = "results/train_trl"
    dry_run: bool = False


def horizon_schedule(args: Args) -> PiecewiseTurnSchedule | None:
    """The turn cap by training step of ``--horizon-schedule`` and ``--horizon-every``
    (None without the flag): cap ``k`` of the list holds for steps ``k * every`` to
    ``(k + 1) * every - 1``, the last one from then on.

    Raises:
        SystemExit: the caps are not comma-separated positive ints, or ``--horizon-every``
            is not a positive int.
    """
    if not args.horizon_schedule:
        return None
    try:
        caps = [int(cap) for cap in args.horizon_schedule.split(",")]
        if args.horizon_every < 1:
            raise ValueError(f"--horizon-every must be >= 1, got {args.horizon_every}")
        bounds = [args.horizon_every * k for k in range(1, len(caps))]
        return PiecewiseTurnSchedule(caps, boundaries=bounds)
    except ValueError as error:
        raise SystemExit(
            f"--horizon-schedule takes turn caps such as 5,10,15, got "
            f"{args.horizon_schedule!r}: {error}"
        ) from None


def check_args(args: Args) -> None:
    horizon_schedule(args)
    if args.algorithm not in ALGORITHMS:
        raise SystemExit(f"--algorithm must be one of {ALGORITHMS}, got {args.algorithm!r}")
    if args.batch_size % args.num_generations:
        raise SystemExit(
            f"--batch-size {args.batch_size} must be a multiple of --num-generations "
            f"{args.num_generations} (TRL's groups are consecutive blocks)"
        )


# --------------------------------------------------------------------------------------
# Config: TRL's GRPOConfig
# --------------------------------------------------------------------------------------


def grpo_settings(args: Args, out_dir: Path) -> dict[str, Any]:
    """The fields of TRL's ``GRPOConfig`` this recipe sets."""
    return {
        "output_dir": str(out_dir),
        "per_device_train_batch_size": args.batch_size,
        "num_generations": args.num_generations,
        "learning_rate": args.lr,
        "weight_decay": 0.0,
        "max_grad_norm": 1.0,
        "lr_scheduler_type": "constant",
        "epsilon": 0.2,
        "beta": 0.0,
        "temperature": 1.0,
        "max_steps": args.max_steps,
        "max_completion_length": args.max_completion_length,
        "logging_steps": 1,
        "seed": args.seed,
        "report_to": [],
    }


def grpo_config(args: Args, out_dir: Path, **overrides: Any) -> Any:
    """TRL's ``GRPOConfig`` for this run (`overrides` win over `grpo_settings`)."""
    from trl import GRPOConfig

    return GRPOConfig(**{**grpo_settings(args, out_dir), **overrides})


# --------------------------------------------------------------------------------------
# Env, model and the trainer's launch: TRL's trainer plays the env through rollout_func
# --------------------------------------------------------------------------------------


def rollout_func(args: Args) -> Any:
    """The adapter's ``rollout_func`` for this run: envs under `horizon_schedule` (TRL's
    ``global_step`` picks the cap) with ``--horizon-schedule``, else episodes cut at
    ``--max-turns``."""
    from xpgym.adapters.trl import make_rollout_func

    horizon = horizon_schedule(args)
    return make_rollout_func(
        max_new_tokens=args.max_new_tokens,
        max_turns=args.max_turns if horizon is None else None,
        horizon=horizon,
        seed=args.seed,
    )


def build_trainer(args: Args, model: Any, tokenizer: Any, config: Any) -> Any:
    """TRL's ``GRPOTrainer`` (``grpo``) or xpgym's ``TurnCreditGRPOTrainer`` over the env."""
    from trl import GRPOTrainer

    from xpgym.adapters.trl import TurnCreditGRPOTrainer, episode_reward, task_dataset
    from xpgym.rollout.runner import make_tasks

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental
    common = {
        "model": model,
        "processing_class": tokenizer,
        "reward_funcs": episode_reward,
        "args": config,
        "train_dataset": task_dataset(make_tasks(args.env_id, args.num_tasks, seed=args.seed)),
        "rollout_func": rollout_func(args),
    }
    if args.algorithm == "grpo":
        return GRPOTrainer(**common)
    return TurnCreditGRPOTrainer(**common, turn_advantage=args.algorithm, gamma=args.gamma)


def launch(args: Args, out_dir: Path) -> None:
    """Load the model and run TRL's training loop."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype="auto")
    trainer = build_trainer(args, model, tokenizer, grpo_config(args, out_dir, bf16=True))
    trainer.train()
    trainer.save_model(str(out_dir / "final"))


# --------------------------------------------------------------------------------------
# Dry run: what TRL would train on, on CPU, with a tiny local model
# --------------------------------------------------------------------------------------


def dry_run(args: Args, out_dir: Path) -> dict[str, Any]:
    """The run's ``GRPOConfig`` settings, and one batch through TRL's trainer (on CPU,
    around a tiny offline model): its ``rollout_func`` and TRL's own
    ``_generate_and_score_completions`` (rewards, group statistics, advantages) give the
    batch TRL's loss reads; no GPU, no download."""
    import xpgym
    from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
    from xpgym.rollout.runner import make_tasks

    # The tiny model rambles until its budget: keep the turns short.
    tiny_args = replace(args, max_new_tokens=min(args.max_new_tokens, 16))
    tokenizer = build_tiny_tokenizer(env_corpus(xpgym.make(args.env_id), episodes=5))
    model = build_tiny_model(tokenizer, seed=args.seed)
    config = grpo_config(tiny_args, out_dir, use_cpu=True, max_steps=1, save_strategy="no")
    trainer = build_trainer(tiny_args, model, tokenizer, config)
    trainer.model.train()  # TRL scores batches in train mode
    tasks = make_tasks(args.env_id, args.batch_size // args.num_generations, seed=args.seed)
    inputs = [{"prompt": task.to_json()} for task in tasks for _ in range(args.num_generations)]
    output = trainer._generate_and_score_completions(inputs)
    hook = trainer.rollout_func
    summary: dict[str, Any] = {
        "config": asdict(args),
        "grpo_config": grpo_settings(args, out_dir),
        "trainer": type(trainer).__name__,
        "hook": f"{hook.__module__}.{hook.__qualname__}",
        "episodes": len(inputs),
        "batch": {k: f"{v.dtype}{list(v.shape)}" for k, v in output.items() if hasattr(v, "shape")},
        "policy_tokens": int((output["completion_mask"] * output["tool_mask"]).sum()),
        "mean_return": float(np.mean([x["episode_reward"] for x in inputs])),
    }
    (out_dir / "dry_run.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main() -> None:
    args = parse_dataclass_args(Args, __doc__.splitlines()[0])
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    check_args(args)
    out_dir = Path(args.out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.dry_run:
        summary = dry_run(args, out_dir)
        print(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=2))
        print(f"dry run ok: wrote {out_dir}/dry_run.json")
    else:
        launch(args, out_dir)


if __name__ == "__main__":
    main()
