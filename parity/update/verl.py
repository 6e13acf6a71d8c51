"""verl 0.9.x: its advantage, log-prob and policy-loss code on `to_data_proto`'s batch.

What runs is verl's own: ``compute_advantage`` (the V1 trainer's dispatcher, with the
adapter's registered ``xpgym_rebn`` estimator after the V1 copy of ``rm_scores`` into
``token_level_rewards``), ``logprobs_from_logits`` on the response logits,
``get_policy_loss_fn(actor.policy_loss.loss_mode)`` with the ``ActorConfig`` of the recipe's
config (`xpgym.adapters.verl.ppo_config` of `ppo_overrides`: token-mean, clip 0.2, dual-clip
3.0, grad clip 1.0), verl's ``agg_loss`` normalised by the batch's token count
(``global_batch_info``, as verl's engine sets it), and ``build_optimizer`` of
``actor.optim`` (AdamW, betas (0.9, 0.95)). The model is a plain float32 module (no FSDP, no
Ray); micro-batches of ``job.hparams.micro_batch_size`` rows accumulate gradients, then
``clip_grad_norm_(actor.grad_clip)`` and one optimizer step. ``old_log_probs`` are the
sampler's log-probs (``rollout_log_probs``) in every step.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from parity.shared.trainer_code import NotRunnableError
from parity.update.job import StepResult, TrainerRun, UpdateJob

__all__ = ["run"]


def run(job: UpdateJob) -> TrainerRun:
    """verl's update for ``job.steps`` steps (module docstring)."""
    try:
        from verl.trainer.config import AlgoConfig
        from verl.trainer.ppo.core_algos import get_policy_loss_fn
        from verl.trainer.ppo.ray_trainer import compute_advantage
        from verl.utils.config import omega_conf_to_dataclass
        from verl.utils.torch_functional import logprobs_from_logits
        from verl.workers.config.optimizer import build_optimizer

        from xpgym.adapters.verl import ppo_config, ppo_overrides, to_data_proto
    except ImportError as err:
        raise NotRunnableError(f"cannot import verl: {err}") from err
    import torch

    from parity.update._common import load_model, snapshot

    hp = job.hparams
    with tempfile.TemporaryDirectory() as run_dir:
        overrides = ppo_overrides(
            model=str(job.model_dir),
            run_dir=Path(run_dir),
            gamma=hp.gamma,
            lr=hp.lr,
            train_batch_size=len(job.episodes),
            ppo_mini_batch_size=len(job.episodes),
            ppo_epochs=1,
        )
        actor = omega_conf_to_dataclass(ppo_config(overrides).actor_rollout_ref.actor)
    model = load_model(job)
    optimizer = build_optimizer(model.parameters(), actor.optim)
    policy_loss = get_policy_loss_fn(actor.policy_loss.loss_mode)

    data = to_data_proto(job.episodes, pad_token_id=0, layout="per_episode", gamma=hp.gamma)
    data.batch["token_level_rewards"] = data.batch["rm_scores"]
    data = compute_advantage(
        data, adv_estimator="xpgym_rebn", gamma=hp.gamma, config=AlgoConfig(gamma=hp.gamma)
    )
    batch = data.batch
    response_length = batch["responses"].shape[1]
    mask = batch["response_mask"]
    actor.global_batch_info.update(
        dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=len(mask)
    )
    steps = []
    for _ in range(job.steps):
        optimizer.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for rows in torch.split(torch.arange(len(mask)), hp.micro_batch_size):
            logits = model(
                input_ids=batch["input_ids"][rows],
                attention_mask=batch["attention_mask"][rows],
                position_ids=batch["position_ids"][rows],
                use_cache=False,
            ).logits
            logits = logits[:, -response_length - 1 : -1] / 1.0  # temperature 1
            log_prob = logprobs_from_logits(logits, batch["responses"][rows])
            pg_loss, _ = policy_loss(
                old_log_prob=batch["rollout_log_probs"][rows],
                log_prob=log_prob,
                advantages=batch["advantages"][rows],
                response_mask=mask[rows],
                loss_agg_mode=actor.loss_agg_mode,
                config=actor,
            )
            pg_loss.backward()
            loss_sum += float(pg_loss.detach())
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), actor.grad_clip)
        optimizer.step()
        steps.append(StepResult(loss_sum, float(norm), snapshot(model)))
    return TrainerRun(
        steps=steps,
        notes=[
            f"verl {actor.policy_loss.loss_mode} loss, {actor.loss_agg_mode}, "
            f"AdamW betas {tuple(actor.optim.betas)}"
        ],
    )
