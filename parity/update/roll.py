"""Layer 3, ROLL (alibaba/ROLL 0.3.x, git only): ``ActorWorker.loss_func`` on
`xpgym.adapters.roll.trajectory_batch` rows, backward and an AdamW step.

ROLL is not installable from PyPI, so this runner runs wherever a checkout imports
(``PYTHONPATH=<checkout>``; docs/parity.md, "Layer 3: Oat and ROLL", has the command).
What ROLL's agentic pipeline does on a batch, and what runs here:

The advantage and loss keys are those of xpgym's ROLL recipe config
(`xpgym.adapters.roll.STEP_REINFORCE_CONFIG`: batch mean/std reward normalisation,
``gamma`` 1, ``advantage_clip`` 20, ``loss_agg_mode`` token-mean) with ``adv_estimator``
``reinforce``, the trajectory layout's estimator.

1. Advantages: ROLL's own ``compute_response_level_rewards`` (the episode totals
   normalised over the batch), ``compute_token_reward`` (that reward on the last response
   token) and ``agentic_compute_advantage`` (REINFORCE return with ``gamma`` 1, clipped:
   every policy token of an episode gets its normalised total).
2. Old log-probs: the learner's own at the start of each step (ROLL's default
   ``enable_old_logprobs_recompute=False`` caches the first forward of a step), computed
   with ROLL's ``op_compute_log_probs``; the sampler's log-probs are ``infer_logprobs``
   (train-infer correction off, ROLL's default).
3. Update: for each micro-batch, ``ActorWorker.loss_func`` on the model's logits (loss
   normalised by the whole batch's counts, which ROLL's strategy puts in ``meta_info`` as
   ``batch_num_tokens`` and ``global_valid_samples``: computed here as the strategy does,
   without its ``all_reduce``), ``backward``; then global-norm clip and one
   ``torch.optim.AdamW`` step (ROLL's strategies do the same with their engines). The loss
   reported is the sum over micro-batches.

ROLL's ``pipeline_config`` is a namespace of ``AgenticConfig``'s own field defaults with the
job's settings; ``AgenticConfig()`` itself needs generation and env-manager settings this
run does not use.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from functools import partial
from types import SimpleNamespace
from typing import Any
from unittest import mock

from parity.shared.trainer_code import (
    ROLL_NOT_IMPORTABLE,
    NotRunnableError,
    roll_importable,
    stand_ins,
)
from parity.update._common import snapshot
from parity.update.job import StepResult, TrainerRun, UpdateJob

__all__ = ["STAND_INS", "run"]

logger = logging.getLogger(__name__)

STAND_INS = (
    "more_itertools",
    "grpc",
    "pybase64",
    "imageio",
    "opentelemetry.exporter",
    "opentelemetry.exporter.otlp",
    "opentelemetry.exporter.otlp.proto",
    "opentelemetry.exporter.otlp.proto.grpc",
    "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
    "opentelemetry.proto",
    "opentelemetry.proto.collector",
    "opentelemetry.proto.collector.trace",
    "opentelemetry.proto.collector.trace.v1",
    "opentelemetry.sdk",
    "opentelemetry.sdk.resources",
    "opentelemetry.sdk.trace",
    "opentelemetry.sdk.trace.export",
    "opentelemetry.sdk.trace.id_generator",
)
"""Modules ROLL imports at the top (tracing, RPC, helpers) that ``loss_func`` never calls."""


_RECIPE_KEYS = (
    "reward_normalization",
    "gamma",
    "whiten_advantages",
    "advantage_clip",
    "loss_agg_mode",
)
"""The advantage and loss keys of xpgym's ROLL recipe config (`STEP_REINFORCE_CONFIG`) this
runner uses; the optimisation settings come from the job."""


def _pipeline_config(agentic_config: type, **settings: Any) -> SimpleNamespace:
    """``AgenticConfig``'s field defaults, with `settings` on top."""
    values = {}
    for f in dataclasses.fields(agentic_config):
        if f.default is not dataclasses.MISSING:
            values[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            values[f.name] = f.default_factory()
    unknown = set(settings) - set(values)
    if unknown:
        raise ValueError(f"not AgenticConfig fields: {sorted(unknown)}")
    return SimpleNamespace(**{**values, **settings})


def run(job: UpdateJob) -> TrainerRun:
    """`UpdateJob.steps` ROLL actor updates on the job's episodes (one row per episode).

    Raises:
        NotRunnableError: ROLL does not import here (`ROLL_NOT_IMPORTABLE`), or the job asks for
            a KL or entropy term (this runner has no reference model).
    """
    if not roll_importable():
        raise NotRunnableError(ROLL_NOT_IMPORTABLE)
    hp = job.hparams
    if hp.kl_coef or hp.entropy_coef:
        raise NotRunnableError("this runner has no reference model and no entropy term")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from xpgym.adapters.roll import STEP_REINFORCE_CONFIG, trajectory_batch

    torch.manual_seed(hp.seed)
    tokenizer = AutoTokenizer.from_pretrained(job.model_dir)
    model = AutoModelForCausalLM.from_pretrained(job.model_dir, dtype=torch.float32)
    model.train()
    length = 1 + max(len(t.prompt_ids) + len(t.response_ids) for e in job.episodes for t in e.turns)
    rows = trajectory_batch(
        job.episodes, pad_token_id=tokenizer.pad_token_id, sequence_length=length
    )
    with (
        tempfile.TemporaryDirectory(prefix="roll-logs-") as logs,  # ROLL logs to a file
        mock.patch.dict(os.environ, {"ROLL_LOG_DIR": logs}),
        stand_ins(STAND_INS, ("roll",)) as missing,
    ):
        from roll.distributed.strategy.strategy import InferenceStrategy
        from roll.pipeline.agentic.agentic_actor_worker import ActorWorker
        from roll.pipeline.agentic.agentic_config import AgenticConfig, RewardNormalizationConfig
        from roll.pipeline.agentic.utils import (
            agentic_compute_advantage,
            compute_response_level_rewards,
        )
        from roll.utils.functionals import compute_token_reward
        from roll.utils.kl_controller import get_kl_controller

        recipe = {k: STEP_REINFORCE_CONFIG[k] for k in _RECIPE_KEYS}
        norm = RewardNormalizationConfig(**recipe.pop("reward_normalization"))
        config = _pipeline_config(
            AgenticConfig,
            **recipe,
            adv_estimator="reinforce",  # the trajectory layout's estimator
            reward_normalization=norm,
            use_pg_clip_range=True,
            pg_clip_low=hp.clip_low,
            pg_clip_high=hp.clip_high,
            max_grad_norm=hp.max_grad_norm,
        )
        worker = object.__new__(ActorWorker)  # ROLL's __init__ joins a Ray cluster
        worker.pipeline_config = config
        # ROLL's strategy methods loss_func calls use no strategy state (InferenceStrategy
        # is abstract): bind them to nothing.
        worker.strategy = SimpleNamespace(
            op_compute_log_probs=partial(InferenceStrategy.op_compute_log_probs, None),
            op_compute_entropy=partial(InferenceStrategy.op_compute_entropy, None),
        )
        optimizer = torch.optim.AdamW(model.parameters(), lr=hp.lr, weight_decay=0.0)

        data = rows.to_data_proto()
        mask = data.batch["response_mask"][:, 1:]
        data.meta_info["batch_num_tokens"] = {"response_mask": mask.sum()}
        data.meta_info["global_valid_samples"] = {
            "response_mask": mask.any(-1).sum(),
        }
        steps = []
        for k in range(job.steps):
            with torch.no_grad():
                old = worker.strategy.op_compute_log_probs(
                    model(
                        data.batch["input_ids"], attention_mask=data.batch["attention_mask"]
                    ).logits,
                    data.batch["input_ids"],
                    data.batch["response_mask"],
                )
            data.batch["old_log_probs"] = old
            data.batch["ref_log_probs"] = old.clone()  # no reference model (kl_coef 0)
            if k == 0:
                data, _ = compute_response_level_rewards(data, config)
                kl_ctrl = get_kl_controller(init_kl_coef=0.0, target_kl=None, kl_horizon=1)
                data, _ = compute_token_reward(data, config, kl_ctrl)
                data = agentic_compute_advantage(
                    data,
                    gamma=config.gamma,
                    lambd=config.lambd,
                    adv_estimator=config.adv_estimator,
                    advantage_clip=config.advantage_clip,
                    whiten_advantages=config.whiten_advantages,
                    pipeline_config=config,
                )
            loss_total = 0.0
            size = len(data)
            for start in range(0, size, hp.micro_batch_size):
                micro = data.slice(start, min(start + hp.micro_batch_size, size))
                micro.meta_info = data.meta_info
                logits = model(
                    micro.batch["input_ids"], attention_mask=micro.batch["attention_mask"]
                ).logits
                loss, _ = worker.loss_func(micro, logits)
                loss.backward()
                loss_total += float(loss.detach())
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), hp.max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            steps.append(
                StepResult(loss=loss_total, grad_norm=float(grad_norm), params=snapshot(model))
            )
            logger.info("roll step %d: loss %.4f", k + 1, loss_total)
    return TrainerRun(
        steps=steps,
        stand_ins=list(missing),
        notes=[
            f"{len(data)} trajectory rows; advantages from ROLL's reinforce path "
            "(episode totals, batch mean/std, advantage_clip 20); loss token-mean over the "
            "global policy-token count (xpgym's ROLL recipe config)",
            "old log-probs: the learner's own at each step's start (ROLL's cache path)",
        ],
    )
