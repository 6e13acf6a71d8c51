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

CPU check, no download (composes RL2's config, plays a batch through the env module the
way RL2's rollout does, with RL2's own tensor-dict helpers and a tiny local model, and
computes the advantages):

    python recipes/train_rl2.py --dry-run

Defaults follow the GEM paper (Appendix F): gamma 0.9 for games, lr 1e-6, no weight decay,
grad clip 1.0, constant lr, clip 0.2, no KL, temperature 1.0.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
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


def check_args(args: Args) -> None:
    if args.algorithm not in ESTIMATOR:
        raise SystemExit(f"--algorithm must be one of {sorted(ESTIMATOR)}, got {args.algorithm!r}")
    if args.algorithm in ("grpo", "dr_grpo") and args.responses_per_prompt < 2:
        raise SystemExit(f"--algorithm {args.algorithm} needs --responses-per-prompt >= 2")


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


def compose_config(overrides: list[str]) -> Any:
    """RL2's ``ppo`` config with Hydra `overrides` (`rl2_overrides`) applied (no GPU)."""
    import importlib.util

    from hydra import compose, initialize_config_dir

    # The package's location, without importing RL2.trainer (it needs wandb and SGLang).
    (package_dir,) = importlib.util.find_spec("RL2").submodule_search_locations
    config_dir = Path(package_dir) / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name="ppo", overrides=overrides)


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
# Dry run: everything up to the first update, on CPU, with a tiny local model
# --------------------------------------------------------------------------------------


def dry_run(args: Args, out_dir: Path) -> dict[str, Any]:
    """Config, envs, one batch through the env module and RL2's helpers; no GPU."""
    import torch
    from omegaconf import OmegaConf
    from RL2.datasets import initialize_state_dict, pack_tensor_dicts, state_dict_to_tensor_dict

    import xpgym
    from xpgym.adapters import rl2
    from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
    from xpgym.rollout.policies.hf import HFPolicy
    from xpgym.rollout.runner import policy_generate
    from xpgym.training.advantages import discounted_returns, rebn

    config = compose_config(rl2_overrides(args, out_dir))
    OmegaConf.resolve(config)
    rows = write_dataset(args, out_dir)[: args.prompts_per_rollout]

    # A tiny offline model stands in for the policy; SGLang's router for its engine. The
    # env module loads the tokenizer by the row's name: hand it the tiny one.
    tokenizer = build_tiny_tokenizer(env_corpus(xpgym.make(args.env_id), episodes=5))
    rl2._TOKENIZERS[args.model] = tokenizer
    model = build_tiny_model(tokenizer, seed=args.seed)
    generate = policy_generate(HFPolicy(model, tokenizer, greedy=True, max_new_tokens=8))

    async def rollout(extra_info: dict[str, Any]) -> tuple[list[Any], list[float]]:
        """What RL2 0.0.2's ``Rollout.rollout`` does for one sample, with a local engine."""
        state_text, extra_info = await rl2.reset(extra_info)
        state = initialize_state_dict(tokenizer, state_text)
        tensor_dicts, rewards = [], []
        for turn in range(1, args.max_turns + 1):
            g = await generate(state["states"], args.max_new_tokens)
            action_text = tokenizer.decode(g.token_ids, skip_special_tokens=False)
            response = await rl2.step(state_text, action_text, extra_info)
            state["states"] += g.token_ids
            state["actions"] += g.token_ids
            state["action_mask"] += [1] * len(g.token_ids)
            state["logps"] += g.logprobs
            state["rewards"] += [0] * (len(g.token_ids) - 1) + [response["reward"]]
            rewards.append(response["reward"])
            if turn == args.max_turns or response["done"]:
                tensor_dicts.append(state_dict_to_tensor_dict(state))
                break
            if not response["next_state"].startswith(state_text + action_text):
                raise AssertionError("the env module's next state does not extend the sequence")
            delta = initialize_state_dict(
                tokenizer, response["next_state"][len(state_text + action_text) :]
            )
            for key, values in delta.items():
                state[key] += values
            state_text, extra_info = response["next_state"], response["extra_info"]
        return tensor_dicts, rewards

    async def play_batch() -> list[tuple[list[Any], list[float]]]:
        samples = [row["extra_info"] for row in rows for _ in range(args.responses_per_prompt)]
        return await asyncio.gather(*(rollout(dict(s)) for s in samples))

    results = asyncio.run(play_batch())
    tensor_dict = pack_tensor_dicts([td for tds, _ in results for td in tds])
    counts = torch.tensor([len(tds) for tds, _ in results])
    cu_seqs = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(counts, 0)])
    summary: dict[str, Any] = {
        "config": asdict(args),
        "episodes": len(results),
        "sequences": int(cu_seqs[-1]),
        "tensor_dict": {k: f"{v.dtype}{list(v.shape)}" for k, v in tensor_dict.items()},
        "policy_tokens": int(tensor_dict["action_mask"].sum()),
        "mean_return": float(np.mean([sum(r) for _, r in results])),
    }
    estimator, _ = ESTIMATOR[args.algorithm]
    if estimator.startswith("xpgym_"):  # what the override computes inside RL2
        rl2.turn_advantages(config.adv, tensor_dict, cu_seqs)
        turn_rewards = [r for _, r in results]
        width = max(map(len, turn_rewards))
        r = np.array([t + [0.0] * (width - len(t)) for t in turn_rewards])
        m = np.arange(width) < np.array([len(t) for t in turn_rewards])[:, None]
        g = discounted_returns(r, m, args.gamma)
        reference = rebn(g, m) if estimator == "xpgym_rebn" else g
        mask = tensor_dict["action_mask"].numpy()
        starts = mask & ~np.pad(mask[:, :-1], ((0, 0), (1, 0)))
        got = tensor_dict["advantages"].numpy()[starts.astype(bool)]  # one per turn, in order
        diff = float(np.abs(got - reference[m]).max())
        summary["max_abs_diff_vs_reference"] = diff
        if diff > 1e-6:
            raise AssertionError(f"the override differs from the reference by {diff}")
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
