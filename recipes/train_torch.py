"""Train a tiny language model on a multi-turn xpgym game with the reference trainer (CPU).

The main job of the README. Offline and self-contained: the model and its tokenizer are built
here from scratch (`xpgym.adapters.tiny_lm`), no weights are downloaded. Two phases:

1. Format warm start (supervised, a few seconds): a randomly initialised model never writes a
   valid ``\boxed{n}``, so every episode earns the same return and RL has no signal at all.
   The model first imitates the env's own random guesser (`sample_random_action`, which
   ignores the feedback): it learns the answer format, nothing about the task.
2. RL: multi-turn REINFORCE with Return Batch Normalization (ReBN, the GEM paper's baseline)
   on ``game:GuessTheNumber-v0-easy`` for at most `time_budget_s` seconds.

It reports honestly what each phase did: the same held-out seeds are played at
initialisation, after the warm start and after RL (greedy and sampled), next to two reference
policies (the random valid guesser the warm start imitates, and binary search).

    python recipes/train_torch.py [--steps 300] [--time-budget-s 480] [--out-dir DIR]

Outputs in `--out-dir`: ``metrics.jsonl`` (one line per training step and per evaluation),
``summary.json`` (before/after numbers and the configuration), ``reward_curve.png``.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

import xpgym
from xpgym.adapters.tiny_lm import build_tiny_model, build_tiny_tokenizer, env_corpus
from xpgym.adapters.torch import Trainer, TrainerConfig, token_logprobs
from xpgym.core.policies import Generation
from xpgym.core.policies.hf import HFPolicy
from xpgym.core.rollout import RolloutCollector
from xpgym.core.trajectory import Episode, episode_rows

HELD_OUT_SEED = 2_000_003  # evaluation episodes' seeds derive from this; training never uses it


@dataclass
class Args:
    env: str = "game:GuessTheNumber-v0-easy"
    seed: int = 0
    # model
    hidden_size: int = 128
    num_layers: int = 2
    # training (REINFORCE + ReBN over turns: G_t = r_t + gamma * G_{t+1}, A = (G - mean) / std)
    algorithm: str = "rebn"
    steps: int = 300
    episodes_per_step: int = 32
    num_envs: int = 8
    lr: float = 1e-3
    gamma: float = 0.9
    temperature: float = 1.0
    max_new_tokens: int = 6
    time_budget_s: float = 480.0
    # format warm start (behaviour cloning of the env's random guesser)
    warmstart_steps: int = 40
    warmstart_episodes: int = 256
    warmstart_lr: float = 1e-3
    # evaluation
    eval_episodes: int = 200
    eval_every: int = 50
    out_dir: str = "results/train_torch"


def play(collector: RolloutCollector, episodes: int, seed: int) -> list[Episode]:
    return collector.collect(episodes, seed=seed)


class RandomValidGuesser:
    """A `Policy` that answers a uniform random ``\boxed{n}``, tokenized like the model's own."""

    def __init__(self, tokenizer: Any, low: int, high: int, seed: int) -> None:
        self.tokenizer = tokenizer
        self.low, self.high = low, high
        self.rng = np.random.default_rng(seed)

    def generate(self, prompts: list[Any]) -> list[Generation]:
        out = []
        for _ in prompts:
            text = f"\\boxed{{{int(self.rng.integers(self.low, self.high + 1))}}}"
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            out.append(Generation(text=text, token_ids=[*ids, self.tokenizer.eos_token_id]))
        return out


def warm_start(model: Any, tokenizer: Any, vec: Any, args: Args) -> list[float]:
    """Imitate the random valid guesser: maximise log p(its actions | prompts), policy
    tokens only (``response_mask``), over episodes collected with the same collector."""
    _, info = xpgym.make(args.env).reset(seed=0)
    guesser = RandomValidGuesser(tokenizer, info["min_number"], info["max_number"], args.seed)
    episodes = play(RolloutCollector(vec, guesser), args.warmstart_episodes, seed=args.seed)
    rows = episode_rows(episodes).pad(pad_token_id=tokenizer.pad_token_id)
    input_ids = torch.as_tensor(rows.input_ids)
    attention_mask = torch.as_tensor(rows.attention_mask)
    mask = torch.as_tensor(rows.response_mask, dtype=torch.float32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.warmstart_lr, weight_decay=0.0)
    generator = torch.Generator().manual_seed(args.seed)
    losses = []
    for _ in tqdm(range(args.warmstart_steps), desc="format warm start", unit="step"):
        batch = torch.randperm(len(input_ids), generator=generator)[:64]
        logp = token_logprobs(model, input_ids[batch], attention_mask[batch])
        loss = -(logp * mask[batch]).sum() / mask[batch].sum()  # NLL per policy token
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


def summarize(episodes: list[Episode]) -> dict[str, float]:
    """Success rate, mean return, mean turns and the share of invalid actions."""
    turns = [turn for ep in episodes for turn in ep.turns]
    return {
        "success": float(np.mean([ep.turns[-1].info.get("correct", False) for ep in episodes])),
        "mean_return": float(np.mean([ep.total_reward for ep in episodes])),
        "mean_turns": float(np.mean([len(ep.turns) for ep in episodes])),
        "invalid_rate": float(np.mean([t.info.get("invalid_action", False) for t in turns])),
    }


def reference_policies(env_id: str, episodes: int, seed: int) -> dict[str, dict[str, float]]:
    """A random valid guesser (the env's own `sample_random_action`) and binary search."""
    results = {}
    for name in ("random_valid", "binary_search"):
        env = xpgym.make(env_id)
        returns, successes = [], []
        for episode_seed in range(seed, seed + episodes):
            _, info = env.reset(seed=episode_seed)
            low, high, total = info["min_number"], info["max_number"], 0.0
            while True:
                guess = (low + high) // 2
                action = (
                    env.sample_random_action() if name == "random_valid" else f"\\boxed{{{guess}}}"
                )
                obs, reward, terminated, truncated, step_info = env.step(action)
                total += reward
                if terminated or truncated:
                    successes.append(float(step_info["correct"]))
                    returns.append(total)
                    break
                low, high = (guess + 1, high) if "higher" in obs else (low, guess - 1)
        results[name] = {
            "success": float(np.mean(successes)),
            "mean_return": float(np.mean(returns)),
        }
    return results


def evaluate(model: Any, tokenizer: Any, vec: Any, args: Args, step: int) -> dict[str, Any]:
    """Play the held-out seeds greedily and with sampling; the same seeds every time."""
    out: dict[str, Any] = {"kind": "eval", "step": step}
    for mode, temperature in (("greedy", 0.0), ("sampled", args.temperature)):
        policy = HFPolicy(
            model,
            tokenizer,
            max_new_tokens=args.max_new_tokens,
            temperature=temperature,
            top_p=1.0,
            top_k=0,
            seed=args.seed,
        )
        collector = RolloutCollector(vec, policy)
        out[mode] = summarize(play(collector, args.eval_episodes, HELD_OUT_SEED))
    return out


def plot(records: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in records if r["kind"] == "train"]
    evals = [r for r in records if r["kind"] == "eval" and r.get("phase") != "random init"]
    initial = next(r for r in records if r.get("phase") == "random init")
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(
        [r["step"] for r in train],
        [r["return_mean"] for r in train],
        alpha=0.4,
        label="training episodes (sampled)",
    )
    for mode in ("greedy", "sampled"):
        ax.plot(
            [r["step"] for r in evals],
            [r[mode]["mean_return"] for r in evals],
            "o-",
            label=f"held-out seeds, {mode}",
        )
    ax.plot([0], [initial["greedy"]["mean_return"]], "kx", label="random init (before warm start)")
    ax.set_xlabel("RL step (0 = after the format warm start)")
    ax.set_ylabel("mean episode return")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in fields(Args):
        default = getattr(Args, f.name)
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(default), default=default)
    args = Args(**vars(parser.parse_args()))
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    torch.set_num_threads(1)  # tiny matrices: threads cost more than they give on 2 cores
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()

    # The model: a tokenizer over the env's own words and the numbers, and a small decoder.
    tokenizer = build_tiny_tokenizer(env_corpus(xpgym.make(args.env), seed=args.seed))
    model = build_tiny_model(
        tokenizer, hidden_size=args.hidden_size, num_layers=args.num_layers, seed=args.seed
    )
    vec = xpgym.make_vec(args.env, args.num_envs)
    config = TrainerConfig(
        algorithm=args.algorithm,
        gamma=args.gamma,
        lr=args.lr,
        temperature=args.temperature,
        max_new_tokens=args.max_new_tokens,
        num_episodes=args.episodes_per_step,
        seed=args.seed,
    )
    trainer = Trainer(model, config, pad_token_id=tokenizer.pad_token_id)
    sampler = HFPolicy(
        model,
        tokenizer,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=1.0,
        top_k=0,
        seed=args.seed,
    )
    collector = RolloutCollector(vec, sampler)

    records: list[dict[str, Any]] = []
    metrics_file = (out_dir / "metrics.jsonl").open("w")

    def log(record: dict[str, Any]) -> None:
        records.append(record)
        metrics_file.write(json.dumps(record) + "\n")
        metrics_file.flush()

    log(initial := {**evaluate(model, tokenizer, vec, args, step=0), "phase": "random init"})
    warmstart_losses = warm_start(model, tokenizer, vec, args) if args.warmstart_steps else []
    log(before := {**evaluate(model, tokenizer, vec, args, step=0), "phase": "after warm start"})
    train_start, step = time.monotonic(), 0
    for step in tqdm(range(1, args.steps + 1), desc="training", unit="step"):
        # 1. Collect complete episodes with the current policy (token ids + log-probs).
        episodes = play(collector, args.episodes_per_step, seed=args.seed * 100_003 + step)
        # 2-4. Per-turn returns, ReBN advantages on every turn's tokens, policy-gradient step.
        metrics = trainer.train_step(episodes)
        log({"kind": "train", "step": step, **summarize(episodes), **metrics})
        if step % args.eval_every == 0:
            log(evaluate(model, tokenizer, vec, args, step))
        if time.monotonic() - train_start > args.time_budget_s:
            logging.warning(
                "time budget of %.0f s reached after %d steps", args.time_budget_s, step
            )
            break
    after = records[-1] if records[-1]["kind"] == "eval" and records[-1]["step"] == step else None
    if after is None:
        log(after := evaluate(model, tokenizer, vec, args, step))
    metrics_file.close()
    vec.close()

    summary = {
        "config": asdict(args),
        "steps_trained": step,
        "episodes_trained": step * args.episodes_per_step,
        "initial": {k: initial[k] for k in ("greedy", "sampled")},
        "warmstart_nll": warmstart_losses[-1:] or None,
        "before": {k: before[k] for k in ("greedy", "sampled")},
        "after": {k: after[k] for k in ("greedy", "sampled")},
        "references": reference_policies(args.env, args.eval_episodes, HELD_OUT_SEED),
        "wall_time_s": round(time.monotonic() - start, 1),
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot(records, out_dir / "reward_curve.png")

    print(f"\n{args.env}: {summary['steps_trained']} steps, {summary['wall_time_s']} s")
    print(f"{'held-out seeds':<24}{'success':>9}{'return':>9}{'invalid':>9}")
    for label, result in (
        ("random init, greedy", initial["greedy"]),
        ("warm start, greedy", before["greedy"]),
        ("warm start, sampled", before["sampled"]),
        ("after RL, greedy", after["greedy"]),
        ("after RL, sampled", after["sampled"]),
    ):
        print(
            f"{label:<24}{result['success']:>9.3f}{result['mean_return']:>9.3f}"
            f"{result['invalid_rate']:>9.3f}"
        )
    for name, result in summary["references"].items():
        print(f"{name + ' (reference)':<24}{result['success']:>9.3f}{result['mean_return']:>9.3f}")
    print(f"wrote {out_dir}/summary.json, metrics.jsonl, reward_curve.png")


if __name__ == "__main__":
    main()
