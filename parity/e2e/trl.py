"""TRL end to end on CPU: its own ``GRPOTrainer.train()`` with xpgym's ``rollout_func``
(`xpgym.adapters.trl`, per-turn ReBN through ``TurnCreditGRPOTrainer``), float32, for a few
optimizer steps from the warm tiny model. `parity.e2e.runs` (``python -m parity.e2e
--trainer trl``) calls `run_trl`.

The sampler and the trainer are compared on the policy tokens the trainer just sampled: its
model scores each rollout's rows before the update (`max_logprob_gap`). TRL's default bf16
autocast is switched off: under it the two differ by up to ~3e-3.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from parity.e2e.config import E2EConfig
from parity.shared.trainer_code import package_version

__all__ = ["run_trl"]


def run_trl(cfg: E2EConfig, out_dir: Path, warm_dir: Path) -> dict[str, Any]:
    """TRL's own ``GRPOTrainer.train()`` for ``cfg.steps`` steps from the model in `warm_dir`,
    on ``cfg.device`` (TRL's accelerator places the model; ``"cpu"`` sets ``use_cpu``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

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

    clock, steps = step_clock()
    config = grpo_config(cfg, out_dir / "trl_run", cfg.max_completion_length)
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
        callbacks=[clock],
    )
    trainer.train()
    return {"trainer": "trl", **trained(trainer, model, start, steps, rows, started)}


def grpo_config(cfg: E2EConfig, output_dir: Path, max_completion_length: int) -> Any:
    """The ``GRPOConfig`` of TRL's end-to-end runs: `cfg`'s batch (``tasks_per_step x
    group_size`` completions, groups of ``group_size``), steps, learning rate and seed;
    float32 (TRL defaults to bf16 autocast, which puts ~1e-3 between sampler and trainer),
    no KL term, a constant learning rate, a log row per step, nothing saved or reported."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(output_dir),
        use_cpu=cfg.device == "cpu",
        bf16=False,
        per_device_train_batch_size=cfg.tasks_per_step * cfg.group_size,
        num_generations=cfg.group_size,
        learning_rate=cfg.lr,
        lr_scheduler_type="constant",
        beta=0.0,
        temperature=1.0,
        max_steps=cfg.steps,
        max_completion_length=max_completion_length,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=cfg.seed,
    )


def step_clock() -> tuple[Any, list[dict[str, float]]]:
    """A transformers ``TrainerCallback`` timing each optimizer step, and the list it appends
    ``{"begin": t, "end": t}`` (``time.perf_counter`` seconds) to, one dict per step."""
    from transformers import TrainerCallback

    steps: list[dict[str, float]] = []

    class StepClock(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            steps.append({"begin": time.perf_counter()})

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            steps[-1]["end"] = time.perf_counter()

    return StepClock(), steps


def trained(
    trainer: Any,
    model: Any,
    start: dict[str, Any],
    steps: list[dict[str, float]],
    rows: list[dict[str, float]],
    started: float,
) -> dict[str, Any]:
    """The result fields every TRL run reports after ``trainer.train()``: steps, times (from
    `step_clock`'s `steps` and each rollout row's ``rollout_s``), policy tokens, TRL's logged
    loss and grad norm, the largest ``logprob_gap`` of the rows, whether every parameter
    of `model` moved from `start` (name -> initial tensor), and the versions."""
    import torch

    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    params = model.named_parameters()
    changed = [not torch.equal(start[n], p.detach().cpu()) for n, p in params]
    step_s = [s["end"] - s["begin"] for s in steps if "end" in s]
    rollout_s = [r["rollout_s"] for r in rows[: len(step_s)]]
    return {
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
                ids = torch.tensor([list(prompt) + list(completion)], device=model.device)
                logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
                scored = torch.log_softmax(logits, -1).gather(-1, ids[0, len(prompt) :, None])
                on_policy = torch.tensor(mask, dtype=torch.bool)
                diff = (scored[:, 0].cpu() - torch.tensor(sampled, dtype=torch.float32)).abs()
                if on_policy.any():
                    gap = max(gap, float(diff[on_policy].max()))
    finally:
        model.train(was_training)
    return gap
