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

CPU check, no download (builds the config, plays a batch through `XpgymAgentLoop` with a
tiny local model, converts it, validates it with verl's ``DataProto`` and advantage code):

    python recipes/train_verl.py --dry-run

Defaults follow the GEM paper (Appendix F): gamma 0.9 for games, lr 1e-6, AdamW
(0.9, 0.95), no weight decay, grad clip 1.0, constant lr, 2 PPO epochs, clip 0.2, no KL
loss or penalty, temperature 1.0, top-p 1, top-k off.
"""

from __future__ import annotations

import asyncio
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


def check_args(args: Args) -> None:
    from xpgym.adapters.verl import ALGORITHMS

    if args.algorithm not in ALGORITHMS:
        raise SystemExit(f"--algorithm must be one of {sorted(ALGORITHMS)}, got {args.algorithm!r}")
    if args.algorithm in ("grpo", "dr_grpo", "rloo"):
        if args.rollout_n < 2:
            raise SystemExit(f"--algorithm {args.algorithm} needs --rollout-n >= 2 (a group)")
        if args.layout != "per_episode":
            raise SystemExit(
                f"verl's {args.algorithm} reads each row's reward sum: use --layout per_episode"
            )


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
# Dry run: everything up to the first update, on CPU, with a tiny local model
# --------------------------------------------------------------------------------------


def dry_run(args: Args, out_dir: Path) -> dict[str, Any]:
    """Config, envs, one batch through the agent loop and verl's advantage code; no GPU."""
    import torch
    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.trainer.config import AlgoConfig
    from verl.trainer.main_ppo import validate_config
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.rollout.replica import TokenOutput

    import xpgym
    from xpgym.adapters.verl import ALGORITHMS, XpgymAgentLoop, episode_outputs, to_data_proto
    from xpgym.core.chat import ChatPromptBuilder
    from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
    from xpgym.rollout.policies.hf import HFPolicy
    from xpgym.rollout.runner import (
        EpisodeTask,
        policy_generate,
        run_episode,
    )
    from xpgym.training.advantages import (
        broadcast_to_tokens,
        discounted_returns,
        rebn,
        turn_index_from_mask,
        turn_rewards,
    )

    config = compose_config(args, out_dir)
    validate_config(config, need_reference_policy(config), need_critic(config))  # verl's checks
    OmegaConf.resolve(config)
    algo_config = omega_conf_to_dataclass(config.algorithm, AlgoConfig)
    rows = write_dataset(args, out_dir)[: args.train_batch_size]

    # A tiny offline model stands in for the policy; vLLM's server for its engine.
    tokenizer = build_tiny_tokenizer(env_corpus(xpgym.make(args.env_id), episodes=5))
    policy = HFPolicy(
        build_tiny_model(tokenizer, seed=args.seed),
        tokenizer,
        greedy=True,
        max_new_tokens=min(args.max_new_tokens, 8),
    )
    generate = policy_generate(policy)

    class LocalServer:  # verl's LLMServerClient.generate, token in / token out
        async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
            generation = await generate(prompt_ids, sampling_params["max_tokens"])
            return TokenOutput(token_ids=generation.token_ids, log_probs=generation.logprobs)

    agent_loop = XpgymAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=LocalServer(),
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(config.data),
    )
    sampling_params = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "logprobs": True}

    async def play_batch():
        hook_outputs, episodes = [], []
        for row in rows:
            for _ in range(args.rollout_n):
                kwargs = {**row, "raw_prompt": row["prompt"]}
                out = await agent_loop.run(sampling_params, **kwargs)
                hook_outputs.append(out if isinstance(out, list) else [out])
                task = EpisodeTask.from_json(row["extra_info"]["xpgym_task"])
                episodes.append(
                    await run_episode(
                        xpgym.make(task.env_id),
                        task,
                        generate,
                        ChatPromptBuilder(tokenizer),
                        max_new_tokens=args.max_new_tokens,
                        max_turns=args.max_turns,
                        max_response_tokens=args.response_length,
                    )
                )
        return hook_outputs, episodes

    hook_outputs, episodes = asyncio.run(play_batch())

    # The hook's outputs are the converter's rows (greedy decoding: the same episodes).
    for outputs, episode in zip(hook_outputs, episodes, strict=True):
        expected = episode_outputs(episode, layout=args.layout, gamma=args.gamma)
        assert [o.as_dict()["responses"].tolist() for o in outputs] == [
            o.as_dict()["responses"].tolist() for o in expected
        ], "the agent loop's rows differ from the converter's"

    # The batch in verl's own classes, and verl's own advantage dispatch on it.
    data = to_data_proto(
        episodes,
        pad_token_id=tokenizer.pad_token_id,
        layout=args.layout,
        gamma=args.gamma,
        max_prompt_length=args.prompt_length,
        max_response_length=args.response_length,
    )
    assert isinstance(data, DataProto)
    data.batch["token_level_rewards"] = data.batch["rm_scores"]
    estimator, norm_by_std = ALGORITHMS[args.algorithm]
    data = compute_advantage(
        data,
        adv_estimator=estimator,
        gamma=args.gamma,
        num_repeat=args.rollout_n,
        norm_adv_by_std_in_grpo=norm_by_std,
        config=algo_config,
    )
    advantages = data.batch["advantages"]
    mask = data.batch["response_mask"].bool()
    assert torch.isfinite(advantages).all()
    assert not advantages[~mask].any()
    summary: dict[str, Any] = {
        "config": asdict(args),
        "rows": len(data),
        "episodes": len(episodes),
        "keys": {k: f"{v.dtype}{list(v.shape)}" for k, v in data.batch.items()},
        "policy_tokens": int(mask.sum()),
        "mean_return": float(np.mean([ep.total_reward for ep in episodes])),
    }
    if args.algorithm == "rebn":  # verl's dispatch + our estimator == the reference
        rewards, turn_mask = turn_rewards(episodes)
        reference = rebn(discounted_returns(rewards, turn_mask, args.gamma), turn_mask)
        if args.layout == "per_episode":
            turn_index = turn_index_from_mask(data.batch["response_mask"].numpy())
            reference_tokens = broadcast_to_tokens(reference, turn_index)
            summary["max_abs_diff_vs_reference"] = float(
                np.abs(advantages.numpy() - reference_tokens).max()
            )
        else:
            per_row = advantages[torch.arange(len(data)), mask.int().argmax(1)].numpy()
            summary["max_abs_diff_vs_reference"] = float(
                np.abs(per_row - reference[turn_mask]).max()
            )
        assert summary["max_abs_diff_vs_reference"] < 1e-6, summary
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
