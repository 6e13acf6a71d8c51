r"""Train an LLM on an xpgym env with Oat: multi-turn REINFORCE + ReBN (the GEM paper's setup).

Oat 0.2.x: one training row per turn (the prompt holds the history), the turn's discounted
return ``G_t = r_t + gamma * G_{t+1}`` as its reward, and ReBN in the learner's advantage
hook (population std over every turn of the batch, across learner ranks). The actor
collects xpgym episodes with Oat's own vLLM engine (``xpgym.adapters.oat``).

Install (a GPU machine with Python 3.10: oat-llm declares Python < 3.11, and its launcher,
dm-launchpad, has wheels for 3.8-3.10 only; oat-llm pulls vLLM 0.8.4, DeepSpeed, flash-attn,
dm-launchpad[tensorflow] and pyarrow<12 for Plasma):

    pip install vllm==0.8.4 oat-llm==0.2.4 && pip install xpgym

Launch (one GPU, collocated actor and learner):

    python recipes/train_oat.py --env-id game:GuessTheNumber-v0-easy \
        --model Qwen/Qwen3-1.7B --gpus 1

CPU check, no download (the ``XpgymArgs`` fields Oat gets, xpgym's actor and learner where
Oat's GPU stack imports, and a batch a tiny local model plays, as Oat's ``TransitionData``
rows: their sizes go to ``dry_run.json``):

    python recipes/train_oat.py --dry-run

Defaults follow the GEM paper (Appendix F): gamma 0.9 for games, lr 1e-6, constant lr,
grad clip 1.0, 2 PPO epochs, clip 0.2, no KL (Oat's default ``beta`` is 0.1), temperature
1.0, top-p 1, 4096 tokens per turn.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xpgym.recipe_args import parse_dataclass_args


@dataclass
class Args:
    env_id: str = "game:GuessTheNumber-v0-easy"
    model: str = "Qwen/Qwen3-1.7B"
    algorithm: str = "rebn"  # rebn | reinforce (no normalisation)
    gamma: float = 0.9  # GEM: 0.9 for games and QA, 1.0 otherwise
    episodes_per_step: int = 16  # per actor
    num_envs: int = 16
    rollout_batch_size: int = 128  # transitions (turns) per learning step
    train_batch_size: int = 128
    num_ppo_epochs: int = 2
    lr: float = 1e-6
    max_turns: int = 10
    max_new_tokens: int = 4096  # per turn
    gpus: int = 1
    seed: int = 0
    out_dir: str = "results/train_oat"
    dry_run: bool = False


def check_args(args: Args) -> None:
    """Refuse flags xpgym's Oat learner cannot run, before anything starts."""
    if args.algorithm not in ("rebn", "reinforce"):
        raise SystemExit(f"--algorithm must be rebn or reinforce, got {args.algorithm!r}")


# --------------------------------------------------------------------------------------
# Config: Oat's PPOArgs plus xpgym's fields (the model is --model; the actor makes the envs)
# --------------------------------------------------------------------------------------


def oat_fields(args: Args) -> dict[str, Any]:
    """``XpgymArgs`` (Oat's ``PPOArgs`` + xpgym's fields) for this run
    (`xpgym.adapters.oat.oat_config`)."""
    from xpgym.adapters.oat import oat_config

    return oat_config(
        env_id=args.env_id,
        model=args.model,
        gamma=args.gamma,
        norm_return=args.algorithm == "rebn",
        episodes_per_step=args.episodes_per_step,
        num_envs=args.num_envs,
        rollout_batch_size=args.rollout_batch_size,
        train_batch_size=args.train_batch_size,
        num_ppo_epochs=args.num_ppo_epochs,
        lr=args.lr,
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        gpus=args.gpus,
        seed=args.seed,
        save_path=str(Path(args.out_dir) / "checkpoints"),
    )


# --------------------------------------------------------------------------------------
# The trainer's launch
# --------------------------------------------------------------------------------------


def launch(args: Args) -> None:
    """Build Oat's program with xpgym's actor and learner and launch it (GPU;
    `xpgym.adapters.oat.launch`)."""
    from xpgym.adapters.oat import launch as launch_oat

    launch_oat(oat_fields(args))


# --------------------------------------------------------------------------------------
# Dry run: what Oat would get, on CPU, with a tiny local model
# --------------------------------------------------------------------------------------


def dry_run(args: Args, out_dir: Path) -> dict[str, Any]:
    """The run's ``XpgymArgs`` fields, xpgym's actor and learner (or why they do not import
    here: they need Oat's GPU stack), and one batch a tiny offline model plays, as Oat's
    ``TransitionData`` rows; no GPU, no download."""
    import xpgym
    from xpgym.adapters.oat import oat_classes, to_transition_data
    from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
    from xpgym.rollout.collector import collect_episodes
    from xpgym.rollout.policies.hf import HFPolicy

    try:
        _, actor_cls, learner_cls = oat_classes()
        hook = f"{actor_cls.__qualname__}, {learner_cls.__qualname__}"
    except ImportError as error:  # vLLM, DeepSpeed and launchpad: a GPU install
        hook = f"not importable here: {error}"
        logging.warning("xpgym's Oat actor and learner: %s", hook)

    # A tiny offline model stands in for --model and vLLM: one batch of episodes.
    tokenizer = build_tiny_tokenizer(env_corpus(xpgym.make(args.env_id), episodes=5))
    model = build_tiny_model(tokenizer, seed=args.seed)
    policy = HFPolicy(model, tokenizer, max_new_tokens=min(args.max_new_tokens, 8), seed=args.seed)
    vec = xpgym.make_vec(args.env_id, min(args.num_envs, args.episodes_per_step))
    episodes = collect_episodes(
        vec, policy, num_episodes=args.episodes_per_step, seed=args.seed, max_turns=args.max_turns
    )
    vec.close()
    data = to_transition_data(episodes, gamma=args.gamma, tokenizer=tokenizer)
    lists = ("prompt_ids", "response_ids", "response_logprobs", "rewards")
    lengths = {name: [len(getattr(row, name)) for row in data] for name in lists}
    summary = {
        "config": asdict(args),
        "oat_args": oat_fields(args),
        "hook": hook,
        "episodes": len(episodes),
        "rows": len(data),
        "batch": {name: f"lengths {min(n)}..{max(n)}" for name, n in lengths.items()},
        "policy_tokens": sum(lengths["response_ids"]),
        "mean_return": float(np.mean([ep.total_reward for ep in episodes])),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
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
        launch(args)


if __name__ == "__main__":
    main()
