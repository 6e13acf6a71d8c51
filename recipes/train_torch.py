r"""Train a tiny language model on a multi-turn xpgym game with the reference trainer (CPU).

The main job of the README. Offline and self-contained: the model and its tokenizer are built
here from scratch (`xpgym.reference.tiny_model`), no weights are downloaded. Two phases:

1. Pretraining (`xpgym.reference.warm_start`): a randomly initialised model never writes a
   valid ``\boxed{n}``, so every episode earns the same return and RL has no signal at all.
   The model is first trained as a plain language model on *whole transcripts* (the env's
   text and the actions) of episodes played by a random valid guesser, which ignores the
   feedback. It learns the answer format and to read the transcript, but sees no strategy:
   after this phase it is still a random guesser.
2. RL: multi-turn REINFORCE with Return Batch Normalization (ReBN, the GEM paper's baseline)
   on ``game:GuessTheNumber-v0-easy`` for a fixed, seeded number of steps (``--steps``), so
   the result does not depend on how fast the machine is or how busy: a busy machine takes
   longer to reach the same place. ``--time-budget-s`` stops RL early instead where the
   whole job (final evaluation included) would overrun it; the result then depends on the
   machine.

It reports honestly what each phase did: the same held-out seeds are played at
initialisation, after pretraining and after RL (greedy and sampled), next to two reference
policies (the random valid guesser that pretraining imitates, and binary search). Besides
success and return it reports "consistent", the share of guesses from turn 2 on that lie
inside the interval the feedback so far allows: it measures directly whether the policy uses
the feedback (binary search scores 1.0; a random guesser about half that: docs/demo.md).

    python recipes/train_torch.py [--steps 700] [--threads N] [--out-dir DIR]
    python recipes/train_torch.py --time-budget-s 300  # stop RL where the job would pass 5 min
    python recipes/train_torch.py --device cuda      # on a GPU (parity.curves.gpu_check)
    python recipes/train_torch.py --rollouts tree --algorithm tree   # tree rollouts
    python recipes/train_torch.py --curriculum       # a difficulty curriculum (max_number)

``--rollouts tree`` grows each step's episodes as trees (`RolloutCollector.collect_tree`:
``--tree-roots`` roots, forks of ``--tree-branches`` at the ``--tree-rule`` turns, at most
``--tree-max-episodes`` per tree) and trains on tree advantages with ``--algorithm tree``
(``gigpo`` and ``rebn`` take trees too). ``--curriculum`` collects the RL episodes from
GuessTheNumber at the ``max_number`` a `SuccessRateScheduler` sets (2 up to the env's own,
the env's turn cap), held near 50% success; pretraining and evaluation stay on ``--env``.
Every training step logs ``tokens_per_episode`` (`xpgym.rollout.tree.generation_cost`), and
the summary the RL phase's generated tokens and episodes and its prompt tokens prefilled and
reused from the KV cache (``rl_prompt_tokens``: a branch reuses its parent's prefix).

Threads: ``--threads 2`` by default, fixed, so that a run's numbers are fixed by its
arguments: with another thread count torch sums in another order and the runs part after
the first update. On a busy machine the job restarts itself with passive OpenMP waits
(`restart_with_passive_waits_if_busy`), which changes the time only. ``--threads 0`` picks
the idle cores instead (faster under load, numbers that depend on it).

``--env`` takes the GuessTheNumber ids of `TRAINABLE_ENVS` (``-easy`` by default) and refuses
others: the warm start, the metrics and the reference policies are GuessTheNumber's.

Outputs in `--out-dir`: ``metrics.jsonl`` (one line per training step and per evaluation),
``summary.json`` (before/after numbers and the configuration), ``reward_curve.png``, and the
last RL step's ``episodes.jsonl`` with the ``tokenizer`` (``python -m xpgym view`` shows them).
"""

from __future__ import annotations

import atexit
import gc
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

import xpgym
from xpgym.core.trajectory import Episode, save_episodes
from xpgym.recipe_args import parse_dataclass_args
from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
from xpgym.reference.trainer import Trainer, TrainerConfig
from xpgym.reference.warm_start import CORPUS_SEED, RandomValidGuesser, number_range, pretrain
from xpgym.rollout.collector import RolloutCollector
from xpgym.rollout.curriculum import Knob, KnobLadder, SuccessRateScheduler, make_curriculum_vec
from xpgym.rollout.policies.hf import HFPolicy
from xpgym.rollout.tree import BranchRule, TreeSpec, generation_cost

HELD_OUT_SEED = 2_000_003  # evaluation episodes' seeds derive from this; training never uses it
MAX_NUMBER = 100  # the tokenizer spells each integer 0..MAX_NUMBER as one token
TRAINABLE_ENVS = (
    "game:GuessTheNumber-v0",
    "game:GuessTheNumber-v0-easy",
    "game:GuessTheNumber-v0-hard",
)
"""The envs this demo trains. Its warm start (a random valid guesser), its "consistent"
metric and its reference policies (random valid guesses, binary search) are GuessTheNumber's,
for one number range per env id, inside ``0..MAX_NUMBER``; ``-random`` draws its range at
every reset, so it is not one of them."""


@dataclass
class Args:
    env: str = "game:GuessTheNumber-v0-easy"  # one of TRAINABLE_ENVS
    seed: int = 0
    threads: int = 2  # torch threads, fixed so results do not depend on load; 0: idle cores
    device: str = "cpu"  # where the model trains and samples ("cuda" on a GPU)
    # model
    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    # pretraining: next-token loss on whole transcripts of the env's random guesser
    pretrain_steps: int = 150
    pretrain_episodes_per_step: int = 32  # fresh episodes every step
    pretrain_lr: float = 1e-3
    # RL (REINFORCE + ReBN over turns: G_t = r_t + gamma * G_{t+1}, A = (G - mean) / std)
    algorithm: str = "rebn"
    steps: int = 700  # RL steps: fixed and seeded, whatever the machine's load
    episodes_per_step: int = 64
    num_envs: int = 64  # every episode of a step in flight: one generate call per turn
    lr: float = 3e-4  # 1e-3 collapsed to 100% invalid answers in some runs
    gamma: float = 0.9
    temperature: float = 1.0
    max_new_tokens: int = 6
    no_kv_cache: bool = False  # HFPolicy re-prefills every prompt (the cache: 2-3x faster)
    time_budget_s: float = 0.0  # > 0: stop RL early so the whole job fits (load-dependent)
    # evaluation
    eval_episodes: int = 200
    eval_every: int = 50
    out_dir: str = "results/train_torch"
    # tree rollouts: each step grows episodes_per_step // tree_max_episodes trees
    rollouts: str = "flat"  # "flat" (independent episodes) or "tree"
    tree_roots: int = 2
    tree_branches: int = 2
    tree_rule: str = "entropy"  # "every" or "entropy" (each episode's least certain turn)
    tree_max_episodes: int = 8
    # curriculum: RL episodes at the max_number a success-rate scheduler sets
    curriculum: bool = False
    curriculum_target: float = 0.5
    curriculum_window: int = 64


def check_args(args: Args) -> None:
    """Refuse an ``--env`` this demo cannot train (`TRAINABLE_ENVS`), naming the ones it can,
    and tree options that do not fit together."""
    if args.env not in TRAINABLE_ENVS:
        raise SystemExit(
            f"--env {args.env!r}: this demo trains {', '.join(TRAINABLE_ENVS)} only (its warm "
            "start, metrics and reference policies are GuessTheNumber's, with one number "
            "range per env id)"
        )
    if args.steps < 1 or args.time_budget_s < 0:
        raise SystemExit(
            f"--steps must be >= 1 and --time-budget-s >= 0 (0: none), got {args.steps} and "
            f"{args.time_budget_s}"
        )
    if args.rollouts not in ("flat", "tree"):
        raise SystemExit(f"--rollouts must be 'flat' or 'tree', got {args.rollouts!r}")
    if args.rollouts == "flat" and args.algorithm in ("gigpo", "tree"):
        raise SystemExit(f"--algorithm {args.algorithm} compares episodes: use --rollouts tree")
    if args.rollouts == "tree" and args.episodes_per_step < args.tree_max_episodes:
        raise SystemExit(
            f"--episodes-per-step {args.episodes_per_step} < --tree-max-episodes "
            f"{args.tree_max_episodes}: a step needs one tree at least"
        )


def tree_spec(args: Args) -> TreeSpec | None:
    """The trees of ``--rollouts tree`` (None for flat rollouts)."""
    if args.rollouts != "tree":
        return None
    return TreeSpec(
        roots=args.tree_roots,
        branches=args.tree_branches,
        rule=BranchRule(args.tree_rule),  # type: ignore[arg-type]
        max_episodes=args.tree_max_episodes,
    )


def play(collector: RolloutCollector, episodes: int, seed: int) -> list[Episode]:
    return collector.collect(episodes, seed=seed)


def play_step(
    collector: RolloutCollector, args: Args, tree: TreeSpec | None, seed: int
) -> list[Episode]:
    """One RL step's episodes: ``args.episodes_per_step`` independent ones, or as many as
    ``episodes_per_step // tree.max_episodes`` trees grow."""
    if tree is None:
        return play(collector, args.episodes_per_step, seed)
    assert tree.max_episodes is not None
    return collector.collect_tree(args.episodes_per_step // tree.max_episodes, tree, seed=seed)


def curriculum_for(args: Args) -> SuccessRateScheduler:
    """GuessTheNumber's ``max_number`` from 2 up to ``--env``'s own, at ``--env``'s turn cap
    (`KnobLadder`), held near ``--curriculum-target`` success."""
    env = xpgym.make(args.env)
    max_turns = int(env.unwrapped.max_turns)
    env.close()
    _, high = number_range(args.env)
    knob = Knob("max_number", 2, high, fixed={"max_turns": max_turns})
    return SuccessRateScheduler(
        [KnobLadder("game:GuessTheNumber-v0", knob)],
        target=args.curriculum_target,
        window=args.curriculum_window,
    )


def consistent_guesses(
    guesses: list[int | None], feedback: list[str], low: int, high: int
) -> tuple[int, int]:
    """``(consistent, counted)``: valid guesses from turn 2 on inside the interval allowed.

    ``guesses[t]`` is turn t's parsed guess (``None``: invalid) and ``feedback[t]`` the env's
    answer to it ("... higher than 7 ...", "... lower than 3 ..."); ``low``/``high`` bound the
    secret number before the first guess.
    """
    consistent = counted = 0
    for turn, (guess, answer) in enumerate(zip(guesses, feedback, strict=True)):
        if guess is None:
            continue
        if turn > 0:
            counted += 1
            consistent += low <= guess <= high
        if "higher than" in answer:
            low = max(low, guess + 1)
        elif "lower than" in answer:
            high = min(high, guess - 1)
    return consistent, counted


def summarize(episodes: list[Episode], env_id: str) -> dict[str, float]:
    """Success rate, mean return, mean turns, share of invalid actions and of consistent
    guesses (`consistent_guesses`) of episodes of the GuessTheNumber env `env_id`."""
    low, high = number_range(env_id)
    turns = [turn for ep in episodes for turn in ep.turns]
    consistent = counted = 0
    for ep in episodes:
        guesses = [
            None if t.info.get("invalid_action", True) else int(t.info["parsed_action"])
            for t in ep.turns
        ]
        feedback = [str(t.observation) for t in ep.turns[1:]] + [""]  # answer to turn t
        c, n = consistent_guesses(guesses, feedback, low, high)
        consistent, counted = consistent + c, counted + n
    return {
        "success": float(np.mean([ep.turns[-1].info.get("correct", False) for ep in episodes])),
        "mean_return": float(np.mean([ep.total_reward for ep in episodes])),
        "mean_turns": float(np.mean([len(ep.turns) for ep in episodes])),
        "invalid_rate": float(np.mean([t.info.get("invalid_action", False) for t in turns])),
        "consistent": consistent / counted if counted else 0.0,
    }


def reference_policies(env_id: str, episodes: int, seed: int) -> dict[str, dict[str, float]]:
    """A random valid guesser (the env's own `sample_random_action`) and binary search."""
    results = {}
    for name in ("random_valid", "binary_search"):
        env = xpgym.make(env_id)
        returns, successes, consistent, counted = [], [], 0, 0
        for episode_seed in range(seed, seed + episodes):
            _, info = env.reset(seed=episode_seed)
            low, high, total = info["min_number"], info["max_number"], 0.0
            guesses: list[int | None] = []
            feedback: list[str] = []
            while True:
                guess = (low + high) // 2
                action = (
                    env.sample_random_action() if name == "random_valid" else f"\\boxed{{{guess}}}"
                )
                obs, reward, terminated, truncated, step_info = env.step(action)
                guesses.append(int(step_info["parsed_action"]))
                feedback.append(obs)
                total += reward
                if terminated or truncated:
                    successes.append(float(step_info["correct"]))
                    returns.append(total)
                    break
                low, high = (guess + 1, high) if "higher" in obs else (low, guess - 1)
            c, n = consistent_guesses(guesses, feedback, info["min_number"], info["max_number"])
            consistent, counted = consistent + c, counted + n
        results[name] = {
            "success": float(np.mean(successes)),
            "mean_return": float(np.mean(returns)),
            "consistent": consistent / counted if counted else 0.0,
        }
    return results


def make_policy(model: Any, tokenizer: Any, args: Args, temperature: float) -> HFPolicy:
    """The demo's `HFPolicy` (``temperature=0``: greedy), with the cross-turn KV cache unless
    ``args.no_kv_cache``."""
    return HFPolicy(
        model,
        tokenizer,
        max_new_tokens=args.max_new_tokens,
        temperature=temperature,
        top_p=1.0,
        top_k=0,
        seed=args.seed,
        kv_cache=not args.no_kv_cache,
    )


def evaluate(model: Any, tokenizer: Any, vec: Any, args: Args, step: int) -> dict[str, Any]:
    """Play the held-out seeds greedily and with sampling; the same seeds every time."""
    out: dict[str, Any] = {"kind": "eval", "step": step}
    for mode, temperature in (("greedy", 0.0), ("sampled", args.temperature)):
        collector = RolloutCollector(vec, make_policy(model, tokenizer, args, temperature))
        out[mode] = summarize(play(collector, args.eval_episodes, HELD_OUT_SEED), args.env)
    return out


def build(args: Args) -> tuple[Any, Any, Any, Trainer]:
    """The demo's tokenizer, freshly initialised model, vector env and RL trainer."""
    corpus = env_corpus(xpgym.make(args.env), episodes=50, seed=CORPUS_SEED)
    tokenizer = build_tiny_tokenizer(corpus, max_number=MAX_NUMBER)
    model = build_tiny_model(
        tokenizer,
        hidden_size=args.hidden_size,
        num_layers=args.num_layers,
        num_heads=args.num_heads,
        seed=args.seed,
    ).to(args.device)
    vec = xpgym.make_vec(args.env, args.num_envs)
    tree = tree_spec(args)
    config = TrainerConfig(
        algorithm=args.algorithm,
        group_size=1 if tree is None else tree.roots,
        gamma=args.gamma,
        lr=args.lr,
        temperature=args.temperature,
        max_new_tokens=args.max_new_tokens,
        num_episodes=args.episodes_per_step,
        old_logprobs="detach",  # one on-policy pass: the ratio is 1, skip the extra forward
        seed=args.seed,
    )
    return tokenizer, model, vec, Trainer(model, config, pad_token_id=tokenizer.pad_token_id)


def warm_start(
    model: Any, tokenizer: Any, vec: Any, args: Args, on_step: Callable[[], object] | None = None
) -> list[float]:
    """Pretrain `model` for ``args.pretrain_steps`` steps on transcripts of the env's random
    valid guesser (`xpgym.reference.warm_start.pretrain`); the losses, one per step."""
    guesser = RandomValidGuesser(tokenizer, *number_range(args.env), seed=args.seed)
    return pretrain(
        model,
        tokenizer,
        vec,
        guesser,
        steps=args.pretrain_steps,
        episodes_per_step=args.pretrain_episodes_per_step,
        lr=args.pretrain_lr,
        on_step=None if on_step is None else lambda step, loss: on_step(),
    )


def freeze_what_was_built() -> None:
    """Move every object alive now (torch, transformers, the model, the envs: about 370k)
    out of the garbage collector's reach until exit. They live for the whole run, yet each
    full collection walks all of them (in one profile: once in four rollouts, 160 ms, a
    tenth of their time; docs/benchmarks.md). Numbers do not change: only when garbage is
    looked for."""
    gc.collect()
    gc.freeze()
    atexit.register(gc.unfreeze)  # exit collects them as usual


def idle_cores() -> int:
    """Cores not busy with other work right now, between 1 and 4: tiny matrices gain little
    from more threads, and threads fighting another job for a core cost up to 5x
    (docs/demo.md, "Machine load"). Busy cores are measured over half a second from
    ``/proc/stat`` (Linux), else taken from the 1-minute load average."""
    cores = os.cpu_count() or 1
    try:
        before = _cpu_times()
        time.sleep(0.5)
        after = _cpu_times()
        total, idle = (a - b for a, b in zip(after, before, strict=True))
        busy = cores * (1 - idle / total) if total > 0 else 0.0
    except OSError:
        busy = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return max(1, min(4, cores - round(busy)))


def _cpu_times() -> tuple[int, int]:
    """``(total, idle)`` jiffies of all cores since boot (``/proc/stat``; idle + iowait)."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    return sum(fields), fields[3] + fields[4]


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
    ax.plot([0], [initial["greedy"]["mean_return"]], "kx", label="random init (before pretraining)")
    ax.set_xlabel("RL step (0 = after pretraining)")
    ax.set_ylabel("mean episode return")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def restart_with_passive_waits_if_busy(threads: int) -> None:
    """Run again with ``OMP_WAIT_POLICY=PASSIVE`` when fewer than `threads` cores are idle.

    torch's OpenMP threads spin while they wait for each other; when another job holds one
    of their cores that spinning made a step up to 6x slower (docs/demo.md, "Machine load"),
    and passive waits cost about 10% on idle cores. The wait policy changes no number (the
    thread count fixes the results), but OpenMP reads it when torch loads it, hence the
    restart (``os.execv``: same interpreter, same arguments). A policy the user set is kept.
    """
    if "OMP_WAIT_POLICY" in os.environ or idle_cores() >= threads:
        return
    logging.warning("fewer than %d idle cores: restarting with OMP_WAIT_POLICY=PASSIVE", threads)
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.execv(sys.executable, [sys.executable, *sys.argv])


def main() -> None:
    args = parse_dataclass_args(Args, __doc__.splitlines()[0])
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    check_args(args)
    if args.threads:
        restart_with_passive_waits_if_busy(args.threads)
    torch.set_num_threads(args.threads or idle_cores())
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()

    # The model: a tokenizer over the env's own words and the numbers, and a small decoder.
    tokenizer, model, vec, trainer = build(args)
    freeze_what_was_built()
    # RL episodes: on --env, or on the curriculum's envs; as independent episodes or trees.
    scheduler = curriculum_for(args) if args.curriculum else None
    rl_vec = vec if scheduler is None else make_curriculum_vec(scheduler.ladders, args.num_envs)
    tree = tree_spec(args)
    collector = RolloutCollector(
        rl_vec, make_policy(model, tokenizer, args, args.temperature), record_states=bool(tree)
    )

    records: list[dict[str, Any]] = []
    metrics_file = (out_dir / "metrics.jsonl").open("w")

    def log(record: dict[str, Any]) -> None:
        records.append(record)
        metrics_file.write(json.dumps(record) + "\n")
        metrics_file.flush()

    log(initial := {**evaluate(model, tokenizer, vec, args, step=0), "phase": "random init"})
    # Warm start: next-token loss on whole transcripts of a random valid guesser.
    with tqdm(total=args.pretrain_steps, desc="pretraining", unit="step") as progress:
        pretrain_losses = warm_start(model, tokenizer, vec, args, lambda: progress.update())
    eval_start = time.monotonic()
    log(before := {**evaluate(model, tokenizer, vec, args, step=0), "phase": "after pretraining"})
    rl_start, step, rl_tokens, rl_episodes = time.monotonic(), 0, 0, 0
    # With a time budget, RL stops early enough for the final evaluation and the references.
    rl_end = start + args.time_budget_s - 2 * (rl_start - eval_start)
    stopped_by = "steps"
    progress = tqdm(total=args.steps, desc="RL", unit="step")  # with its ETA
    for step in range(1, args.steps + 1):
        # 1. Collect complete episodes with the current policy (token ids + log-probs).
        tick = time.monotonic()
        if scheduler is not None:  # the curriculum's max_number for this step's resets
            scheduler.apply(rl_vec, step)
        episodes = play_step(collector, args, tree, seed=args.seed * 100_003 + step)
        rollout_s, tick = time.monotonic() - tick, time.monotonic()
        cost = generation_cost(episodes)
        rl_tokens, rl_episodes = rl_tokens + cost.tokens, rl_episodes + cost.episodes
        # 2-4. Per-turn returns, ReBN advantages on every turn's tokens, policy-gradient step.
        metrics = trainer.train_step(episodes)
        if scheduler is not None:
            scheduler.observe(episodes)
            metrics.update(scheduler.metrics())
        timing = {"rollout_s": rollout_s, "update_s": time.monotonic() - tick}
        spent = {"tokens_per_episode": cost.tokens_per_episode}
        log(
            {
                "kind": "train",
                "step": step,
                **summarize(episodes, args.env),
                **metrics,
                **timing,
                **spent,
            }
        )
        if step % args.eval_every == 0:
            log(evaluate(model, tokenizer, vec, args, step))
        progress.update()
        progress.set_postfix(train_return=f"{metrics['return_mean']:.2f}")
        if args.time_budget_s > 0 and time.monotonic() > rl_end and step < args.steps:
            logging.warning(
                "time budget of %.0f s reached after %d of %d RL steps",
                args.time_budget_s,
                step,
                args.steps,
            )
            stopped_by = "time budget"
            break
    progress.close()
    after = records[-1] if records[-1]["kind"] == "eval" and records[-1]["step"] == step else None
    if after is None:
        log(after := evaluate(model, tokenizer, vec, args, step))
    metrics_file.close()
    vec.close()
    if rl_vec is not vec:
        rl_vec.close()

    summary = {
        "config": asdict(args),
        "steps_trained": step,
        "stopped_by": stopped_by,
        "episodes_trained": rl_episodes,
        "tokens_generated": rl_tokens,
        "tokens_per_episode": rl_tokens / rl_episodes if rl_episodes else 0.0,
        "rl_prompt_tokens": asdict(stats) if (stats := collector.policy.cache_stats) else None,
        "initial": {k: initial[k] for k in ("greedy", "sampled")},
        "pretrain_nll": {"first": pretrain_losses[:1], "last": pretrain_losses[-1:]},
        "rl_wall_time_s": round(time.monotonic() - rl_start, 1),
        "before": {k: before[k] for k in ("greedy", "sampled")},
        "after": {k: after[k] for k in ("greedy", "sampled")},
        "references": reference_policies(args.env, args.eval_episodes, HELD_OUT_SEED),
        "wall_time_s": round(time.monotonic() - start, 1),
        "torch_threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(OpenMP's default)"),
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot(records, out_dir / "reward_curve.png")

    print(f"\n{args.env}: {summary['steps_trained']} steps, {summary['wall_time_s']} s")
    header = f"{'held-out seeds':<26}{'success':>9}{'return':>9}{'invalid':>9}{'consistent':>12}"
    print(header)
    for label, result in (
        ("random init, greedy", initial["greedy"]),
        ("pretrained, greedy", before["greedy"]),
        ("pretrained, sampled", before["sampled"]),
        ("after RL, greedy", after["greedy"]),
        ("after RL, sampled", after["sampled"]),
    ):
        print(
            f"{label:<26}{result['success']:>9.3f}{result['mean_return']:>9.3f}"
            f"{result['invalid_rate']:>9.3f}{result['consistent']:>12.3f}"
        )
    for name, result in summary["references"].items():
        print(
            f"{name + ' (reference)':<26}{result['success']:>9.3f}{result['mean_return']:>9.3f}"
            f"{'':>9}{result['consistent']:>12.3f}"
        )
    print(f"wrote {out_dir}/summary.json, metrics.jsonl, reward_curve.png")
    if step:  # the last RL step's episodes (token ids included) and the tokenizer
        episodes_file, tokenizer_dir = out_dir / "episodes.jsonl", out_dir / "tokenizer"
        save_episodes(episodes, episodes_file)
        tokenizer.save_pretrained(tokenizer_dir)
        print(f"view: python -m xpgym view {episodes_file} --tokenizer {tokenizer_dir}")


if __name__ == "__main__":
    main()
