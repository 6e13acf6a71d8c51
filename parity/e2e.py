"""End to end on CPU: a trainer's own training loop drives xpgym for a few real steps.

    python -m parity.e2e --trainer trl --steps 3          # results/parity_e2e/trl.json
    python -m parity.e2e --trainer all --steps 3          # every trainer that runs on CPU

Each run starts from the same warm tiny model (`warm_model_dir`: the demo's language-model
pretraining on random-play transcripts, built once per machine and cached, keyed by its
inputs) on ``game:GuessTheNumber-v0-easy`` and trains for ``--steps`` optimizer steps
through the trainer's own loop, nothing patched:

- **trl**: TRL's ``GRPOTrainer.train()`` with xpgym's ``rollout_func``
  (`xpgym.adapters.trl`, per-turn ReBN through ``TurnCreditGRPOTrainer``);
- **verl**: ``recipes/train_verl.py``'s launch path (``run_ppo`` + ``TaskRunnerV1`` +
  ``XpgymAgentLoop``) through the CPU test harness of `parity.verl_cpu`
  (`parity.e2e_verl.run_verl`).

Per trainer it writes ``<out>/<trainer>.json`` and prints one table row: steps completed,
start-up and per-step wall time (rollout / update), policy tokens per step, loss and grad
norm per step, how far the sampler's and the trainer's probabilities of the policy tokens
are apart (`GAP_BOUNDS` names each trainer's measure), and whether every parameter tensor
changed. `check` turns a result into the failures CI refuses (a crash, a missing step, a
step without policy tokens, unchanged parameters, a gap above its bound, a NaN).

Every run sets ``XPGYM_EPISODE_LOG`` to ``<out>/episodes/<trainer>-seed<k>``, so each episode
the trainer's workers finish is logged (`xpgym.core.wrappers.episode_log`) and the result carries
``mean_return`` per block of one step's episodes: the curve `parity.gpu` bands on the GPU
runners, read by the same code.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from parity.curves import CurveConfig, start_weights, tokenizer_and_model
from parity.gpu import curve
from parity.trainers._layout import package_version
from xpgym.core.wrappers.episode_log import EPISODE_LOG_VARIABLE, read_episode_log

__all__ = [
    "GAP_BOUNDS",
    "LOGPROB_GAP_BOUND",
    "TRAINERS",
    "E2EConfig",
    "cache_dir",
    "check",
    "main",
    "run_trl",
    "set_environment",
    "warm_model_dir",
]

logger = logging.getLogger(__name__)

LOGPROB_GAP_BOUND = 1e-4
"""Largest |sampler - trainer| log-prob on a policy token accepted. Same weights, same tokens,
float32 on CPU (TRL's default bf16 autocast is switched off: under it the two differ by up to
~3e-3): measured ~3e-6. A wrong shift, a wrong mask or stale weights give 0.1 and more."""

GAP_BOUNDS = {
    "max_logprob_gap": LOGPROB_GAP_BOUND,
    "max_prob_gap": 1e-4,
    "max_sequence_logprob_gap": 1e-4,
}
"""Each sampler-vs-trainer measure a result may carry, and its bound. TRL's run reports
``max_logprob_gap`` (the trainer's model scoring the rows it just sampled, before the update);
verl logs no per-token log-prob gap without switching on token-level importance weights
(which changes the loss), so its run reports ``max_prob_gap`` (verl's
``training/rollout_probs_diff_max``, max |p_sampler - p_trainer| over policy tokens) and
``max_sequence_logprob_gap`` (max over rows of |mean log p_trainer - mean log p_sampler|):
both sides compute in float32 on synced weights (measured ~1e-6); one step of stale weights
is far above 1e-4."""

RESULTS_DIR = Path("results/parity_e2e")


@dataclass(frozen=True)
class E2EConfig:
    """One end-to-end run. `warm` fixes the start model (and its cache key); the rest is RL.

    Attributes:
        warm: The tiny model and its pretraining (`parity.curves.CurveConfig`'s model and
            pretraining fields; its RL fields are unused here).
        steps: Optimizer steps.
        tasks_per_step: Distinct tasks per step; each is played `group_size` times (the
            GRPO group: same seed, same start state).
        group_size: Episodes per task.
        lr: Learning rate.
        gamma: Discount over turns (per-turn ReBN).
        max_new_tokens: Token budget per turn.
        max_completion_length: Tokens after the first prompt, env tokens included.
        seed: Task and sampling seed.
        threads: torch threads.
    """

    warm: CurveConfig = field(default_factory=CurveConfig)
    steps: int = 3
    tasks_per_step: int = 2
    group_size: int = 4
    lr: float = 1e-3
    gamma: float = 0.9
    max_new_tokens: int = 6
    max_completion_length: int = 96
    seed: int = 0
    threads: int = 1


def cache_dir() -> Path:
    """Where warm checkpoints are kept: ``$XPGYM_CACHE`` or ``~/.cache/xpgym``."""
    return Path(os.environ.get("XPGYM_CACHE") or Path.home() / ".cache" / "xpgym")


def _source_digest() -> str:
    """A digest of the code the warm model depends on (model builder and pretraining)."""
    import xpgym.reference.tiny_model as tiny_model
    import xpgym.reference.warm_start as warm_start

    digest = hashlib.sha256()
    for module in (tiny_model, warm_start):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:12]


def warm_model_dir(cfg: CurveConfig, root: Path | None = None) -> Path:
    """The warm tiny model as a ``save_pretrained`` directory (model and tokenizer).

    Built once per machine from `parity.curves.start_weights` (deterministic in `cfg`) and
    cached under `root` (default `cache_dir`), keyed by `cfg`'s pretraining fields and the
    source of the model builder and the pretraining; later calls with the same key reuse it.
    """
    import torch

    root = root or cache_dir()
    path = root / f"warm-{cfg.pretrain_key()}-{_source_digest()}"
    if (path / "config.json").exists():
        return path
    weights, _ = start_weights(cfg, root)
    tokenizer, model = tokenizer_and_model(cfg)
    model.load_state_dict(torch.load(weights, weights_only=True))
    partial = path.with_name(path.name + ".partial")
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    partial.replace(path)  # whole directories only: a crash leaves no half checkpoint
    return path


def run_trl(cfg: E2EConfig, out_dir: Path, warm_dir: Path) -> dict[str, Any]:
    """TRL's own ``GRPOTrainer.train()`` for ``cfg.steps`` steps from the model in `warm_dir`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig

    from xpgym.adapters.trl import (
        TurnCreditGRPOTrainer,
        episode_reward,
        make_rollout_func,
        task_dataset,
    )
    from xpgym.rollout.runner import make_tasks

    started = time.perf_counter()
    torch.manual_seed(cfg.seed)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = AutoTokenizer.from_pretrained(warm_dir)
    model = AutoModelForCausalLM.from_pretrained(warm_dir)
    start = {name: p.detach().clone() for name, p in model.named_parameters()}
    rows: list[dict[str, float]] = []
    rollout = make_rollout_func(max_new_tokens=cfg.max_new_tokens, max_turns=None, seed=cfg.seed)

    def measured_rollout(prompts: list[str], trainer: Any) -> dict[str, Any]:
        begin = time.perf_counter()
        output = rollout(prompts, trainer)
        seconds = time.perf_counter() - begin
        rows.append(
            {
                "rollout_s": seconds,
                "policy_tokens": float(sum(map(sum, output["env_mask"]))),
                "logprob_gap": _logprob_gap(trainer.model, output),
            }
        )
        return output

    steps: list[dict[str, float]] = []

    class StepClock(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            steps.append({"begin": time.perf_counter()})

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            steps[-1]["end"] = time.perf_counter()

    batch = cfg.tasks_per_step * cfg.group_size
    config = GRPOConfig(
        output_dir=str(out_dir / "trl_run"),
        use_cpu=True,
        bf16=False,  # TRL defaults to bf16 autocast, which puts ~1e-3 between sampler and trainer
        per_device_train_batch_size=batch,
        num_generations=cfg.group_size,
        learning_rate=cfg.lr,
        lr_scheduler_type="constant",
        beta=0.0,
        temperature=1.0,
        max_steps=cfg.steps,
        max_completion_length=cfg.max_completion_length,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=cfg.seed,
    )
    trainer = TurnCreditGRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=episode_reward,
        args=config,
        train_dataset=task_dataset(
            make_tasks(cfg.warm.env, cfg.steps * cfg.tasks_per_step, seed=cfg.seed)
        ),
        rollout_func=measured_rollout,
        turn_advantage="rebn",
        gamma=cfg.gamma,
        callbacks=[StepClock()],
    )
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    changed = [not torch.equal(start[n], p.detach()) for n, p in model.named_parameters()]
    step_s = [s["end"] - s["begin"] for s in steps if "end" in s]
    rollout_s = [r["rollout_s"] for r in rows[: len(step_s)]]
    return {
        "trainer": "trl",
        "steps_completed": int(trainer.state.global_step),
        "startup_s": steps[0]["begin"] - started if steps else None,
        "step_s": step_s,
        "rollout_s": rollout_s,
        "update_s": [s - r for s, r in zip(step_s, rollout_s, strict=False)],
        "policy_tokens": [r["policy_tokens"] for r in rows],
        "loss": [float(entry["loss"]) for entry in logs],
        "grad_norm": [float(entry.get("grad_norm", math.nan)) for entry in logs],
        "max_logprob_gap": max((r["logprob_gap"] for r in rows), default=math.nan),
        "all_params_changed": all(changed),
        "params_changed": f"{sum(changed)}/{len(changed)}",
        "versions": {name: package_version(name) for name in ("trl", "transformers", "torch")},
    }


def _logprob_gap(model: Any, output: dict[str, Any]) -> float:
    """Largest |sampler - model| log-prob over the policy tokens of a rollout output."""
    import torch

    was_training = model.training
    model.eval()
    gap = 0.0
    try:
        with torch.no_grad():
            for prompt, completion, sampled, mask in zip(
                output["prompt_ids"],
                output["completion_ids"],
                output["logprobs"],
                output["env_mask"],
                strict=True,
            ):
                ids = torch.tensor([list(prompt) + list(completion)])
                logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
                scored = torch.log_softmax(logits, -1).gather(-1, ids[0, len(prompt) :, None])
                on_policy = torch.tensor(mask, dtype=torch.bool)
                diff = (scored[:, 0] - torch.tensor(sampled, dtype=torch.float32)).abs()
                if on_policy.any():
                    gap = max(gap, float(diff[on_policy].max()))
    finally:
        model.train(was_training)
    return gap


def run_verl(cfg: E2EConfig, out_dir: Path, warm_dir: Path) -> dict[str, Any]:
    """verl's real V1 trainer for ``cfg.steps`` steps from the model in `warm_dir`, through
    the CPU test harness (`parity.e2e_verl.run_verl`; its batch settings are its own)."""
    from parity.e2e_verl import run_verl as run_verl_harness

    return run_verl_harness(cfg.steps, out_dir, warm_dir)


TRAINERS: dict[str, Callable[[E2EConfig, Path, Path], dict[str, Any]]] = {
    "trl": run_trl,
    "verl": run_verl,
}
"""Trainers whose own loop runs end to end on CPU, in table order."""


def check(result: dict[str, Any], steps: int) -> list[str]:
    """What is wrong with one trainer's `result` of a `steps`-step run (empty: nothing)."""
    name = result.get("trainer", "?")
    problems = []
    if result.get("error"):
        problems.append(f"{name}: crashed: {result['error']}")
        return problems
    if result["steps_completed"] != steps:
        problems.append(f"{name}: {result['steps_completed']} of {steps} steps completed")
    if not result["policy_tokens"] or min(result["policy_tokens"]) <= 0:
        problems.append(f"{name}: a step trained no policy token: {result['policy_tokens']}")
    if not result["all_params_changed"]:
        unchanged = result.get("params_unchanged") or result.get("params_changed")
        problems.append(f"{name}: parameters unchanged ({unchanged})")
    gaps = {key: result[key] for key in GAP_BOUNDS if result.get(key) is not None}
    if not gaps:
        problems.append(f"{name}: no sampler vs trainer gap measured")
    numbers = [*result["loss"], *result["grad_norm"], *gaps.values()]
    if any(x is None or not math.isfinite(x) for x in numbers):
        problems.append(f"{name}: NaN, inf or missing in loss / grad norm / gaps: {numbers}")
        return problems
    for key, gap in gaps.items():
        if gap > GAP_BOUNDS[key]:
            problems.append(f"{name}: sampler vs trainer {key} {gap:.3g} > {GAP_BOUNDS[key]:g}")
    return problems


def run(
    names: Sequence[str], cfg: E2EConfig, out_dir: Path, warm_dir: Path | None = None
) -> dict[str, dict[str, Any]]:
    """Run each trainer of `names` from `warm_dir` (default: `warm_model_dir` of ``cfg.warm``)
    and write ``<out_dir>/<trainer>.json``; a crash is recorded as ``{"trainer", "error"}``,
    not raised, so the other trainers still run."""
    import torch

    torch.set_num_threads(cfg.threads)
    out_dir.mkdir(parents=True, exist_ok=True)
    warm_dir = warm_dir or warm_model_dir(cfg.warm)
    results = {}
    for name in names:
        logger.info("%s: %d steps from %s", name, cfg.steps, warm_dir)
        log_dir = out_dir / "episodes" / f"{name}-seed{cfg.seed}"
        shutil.rmtree(log_dir, ignore_errors=True)
        try:
            with set_environment({EPISODE_LOG_VARIABLE: str(log_dir)}):
                result = TRAINERS[name](cfg, out_dir, warm_dir)
        except Exception as exc:
            logger.exception("%s crashed", name)
            result = {"trainer": name, "error": f"{type(exc).__name__}: {exc}"}
        else:
            records = read_episode_log(log_dir)
            result["episode_log"] = str(log_dir)
            result["episodes_logged"] = len(records)
            result["mean_return"] = curve(records, cfg.tasks_per_step * cfg.group_size)
        result["config"] = asdict(cfg)
        (out_dir / f"{name}.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
        results[name] = result
    return results


@contextmanager
def set_environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set the environment variables of `values` for the block (subprocesses see them); on
    exit each gets its earlier value back, or is removed if it had none."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def table(results: dict[str, dict[str, Any]]) -> str:
    """The combined results as a markdown table."""
    header = "| trainer | steps | start-up s | step s | rollout s | policy tokens | loss | "
    header += "grad norm | sampler vs trainer | all params changed |\n" + "|---" * 10 + "|\n"
    lines = []
    for name, r in results.items():
        if r.get("error"):
            lines.append(f"| {name} | crashed: {r['error']} |" + " |" * 8)
            continue

        def fmt(values: Sequence[float]) -> str:
            return " / ".join(f"{v:.3g}" for v in values)

        gaps = ", ".join(f"{k} {r[k]:.2g}" for k in GAP_BOUNDS if r.get(k) is not None)

        lines.append(
            f"| {name} | {r['steps_completed']} | {r['startup_s']:.1f} | {fmt(r['step_s'])} | "
            f"{fmt(r['rollout_s'])} | {fmt(r['policy_tokens'])} | {fmt(r['loss'])} | "
            f"{fmt(r['grad_norm'])} | {gaps} | {r['all_params_changed']} |"
        )
    return header + "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns 1 when any trainer's result fails `check`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trainer", choices=[*TRAINERS, "all"], default="all")
    parser.add_argument("--steps", type=int, default=E2EConfig.steps)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--threads", type=int, default=E2EConfig.threads)
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    names = list(TRAINERS) if args.trainer == "all" else [args.trainer]
    cfg = E2EConfig(steps=args.steps, threads=args.threads)
    results = run(names, cfg, args.out)
    sys.stdout.write(table(results))
    (args.out / "table.md").write_text(table(results))
    problems = [line for r in results.values() for line in check(r, args.steps)]
    for line in problems:
        logger.error("%s", line)
    logger.info("results in %s", args.out)
    return 1 if problems else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
