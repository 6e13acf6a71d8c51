"""TRL 1.x: ``GRPOTrainer.train()`` (xpgym's ``TurnCreditGRPOTrainer``, per-turn ReBN) on the
adapter's batch.

TRL's own loop runs unpatched: its ``rollout_func`` hook returns `to_rollout_output` of the
job's episodes (the same batch every call), ``TurnCreditGRPOTrainer`` puts the adapter's
ReBN advantages on the policy tokens (``completion_mask * tool_mask``), and TRL's
``_compute_loss`` (``loss_type="dapo"``: token sum over the generation batch's policy
tokens), backward, ``clip_grad_norm_`` and AdamW (its defaults: betas (0.9, 0.999), eps
1e-8) do the rest. ``num_iterations = K`` makes TRL generate once and take K optimizer steps
on that generation batch with ``old_per_token_logps`` computed by the model before the first
step (equal to the sampler's up to float error): the layer-3 job. ``per_device_train_batch_size
= micro_batch_size`` and ``gradient_accumulation_steps = episodes / micro_batch_size`` split
each step into micro-batches (TRL shuffles the rows first). Float32 (``bf16=False``).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from parity.shared.trainer_code import NotRunnableError
from parity.update.job import StepResult, TrainerRun, UpdateJob

__all__ = ["run"]


def run(job: UpdateJob) -> TrainerRun:
    """TRL's ``train()`` for ``job.steps`` steps (module docstring)."""
    try:
        from datasets import Dataset
        from transformers import AutoTokenizer, TrainerCallback
        from trl import GRPOConfig

        from xpgym.adapters.trl import TurnCreditGRPOTrainer, episode_reward, to_rollout_output
    except ImportError as err:
        raise NotRunnableError(f"cannot import trl: {err}") from err

    from parity.update._common import load_model, snapshot

    hp = job.hparams
    episodes = list(job.episodes)
    if len(episodes) % hp.micro_batch_size:
        raise NotRunnableError(
            f"{len(episodes)} episodes are not a multiple of the micro-batch size "
            f"{hp.micro_batch_size}"
        )
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    model = load_model(job)
    tokenizer = AutoTokenizer.from_pretrained(job.model_dir)
    steps: list[StepResult] = []

    class Record(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            steps.append(StepResult(float("nan"), float("nan"), snapshot(model)))

    def rollout(prompts: list[str], trainer: Any) -> dict[str, Any]:
        if len(prompts) != len(episodes):
            raise ValueError(f"{len(prompts)} prompts for {len(episodes)} episodes")
        return to_rollout_output(episodes)

    group = len({ep.group_id for ep in episodes})
    with tempfile.TemporaryDirectory() as out_dir:
        config = GRPOConfig(
            output_dir=out_dir,
            use_cpu=job.device == "cpu",
            bf16=False,
            per_device_train_batch_size=hp.micro_batch_size,
            gradient_accumulation_steps=len(episodes) // hp.micro_batch_size,
            num_generations=len(episodes) // group,
            num_iterations=job.steps,
            max_steps=job.steps,
            learning_rate=hp.lr,
            lr_scheduler_type="constant",
            weight_decay=0.0,
            max_grad_norm=hp.max_grad_norm,
            epsilon=hp.clip_low,
            epsilon_high=hp.clip_high,
            beta=hp.kl_coef,
            temperature=1.0,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            seed=hp.seed,
        )
        trainer = TurnCreditGRPOTrainer(
            model=model,
            processing_class=tokenizer,
            reward_funcs=episode_reward,
            args=config,
            train_dataset=Dataset.from_dict({"prompt": [f"task {g}" for g in range(group)]}),
            rollout_func=rollout,
            turn_advantage="rebn",
            gamma=hp.gamma,
            callbacks=[Record()],
        )
        trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    for step, entry in zip(steps, logs, strict=True):
        step.loss, step.grad_norm = float(entry["loss"]), float(entry["grad_norm"])
    return TrainerRun(
        steps=steps,
        notes=[
            f"TRL loss_type {config.loss_type}, AdamW betas ({config.adam_beta1}, "
            f"{config.adam_beta2})"
        ],
    )
