"""Layer 3, Oat (oat-llm 0.2.x): ``PPOLearner.learning_step`` on `to_transition_data` rows.

The rows are xpgym's per-turn ``TransitionData`` (`xpgym.adapters.oat.to_transition_data`),
collated by Oat's own ``TransitionDataset``; the learner is xpgym's ``XpgymLearner``
(`xpgym.adapters.oat.oat_classes`: Oat's ``PPOLearner`` with the ReBN advantage hook) with
``critic_type="grpo"`` (per-row token mean, then the mean over rows). One call of
``learning_step`` on the whole batch is one optimizer step: Oat's DeepSpeed engine
accumulates the gradients of ``train_batch_size // train_batch_size_per_device``
micro-batches and steps once (``gradient_accumulation_steps``).

What runs on CPU and what is a stand-in:

- ``oat.algorithms.ppo`` imports vLLM, launchpad, DeepSpeed and a few tools at module level
  that none of ``learning_step`` uses: empty modules (`parity.shared.trainer_code`).
- ``torch.cuda.current_device()`` (``learning_step``'s device) returns ``"cpu"`` in the run.
- The DeepSpeed engine and Oat's ``DeepspeedStrategy`` are replaced by `_Engine` and
  `_Strategy`: ``backward`` divides the loss by the accumulation steps (DeepSpeed's
  ``scale_wrt_gas``), ``step`` clips to ``max_norm`` and steps ``torch.optim.AdamW`` at the
  accumulation boundary only, ``get_gradient_norm`` is the global L2 norm before clipping.

Oat's semantics that differ from a PPO update on the sampler's log-probs (docs/parity.md,
"Layer 3: Oat and ROLL"): the ratio's old log-probs are the learner's own, recomputed at the
start of every ``learning_step`` (so the ratio is 1 in every step of this one-step-per-call
setup and the PPO clip never binds); the sampler's log-probs enter only through truncated
importance sampling, ``min(exp(old - sampler), tis_c)`` per token (``tis_c`` 2.0).
"""

from __future__ import annotations

import logging
from typing import Any
from unittest import mock

from parity.shared.trainer_code import NotRunnableError, stand_ins
from parity.update._common import snapshot
from parity.update.job import StepResult, TrainerRun, UpdateJob

__all__ = ["METRICS", "STAND_INS", "learning_steps", "run"]

logger = logging.getLogger(__name__)

STAND_INS = (
    "vllm",
    "vllm.lora",
    "vllm.lora.request",
    "launchpad",
    "deepspeed",
    "deepspeed.ops",
    "deepspeed.ops.adam",
    "deepspeed.runtime",
    "deepspeed.runtime.zero",
    "deepspeed.runtime.zero.partition_parameters",
    "deepspeed.utils",
    "tree",
    "tyro",
    "pyarrow.plasma",
    "mosec",
    "bitsandbytes",
    "openai",
    "httpx",
    "einops",
    "scipy",
    "scipy.special",
    "scipy.optimize",
    "Levenshtein",
)
"""Modules ``oat.algorithms.ppo`` imports at the top that ``learning_step`` never calls."""

METRICS = (
    "logprobs_diff_max",
    "logprobs_diff_min",
    "sampler_learner_prob_diff_max",
    "sampler_learner_prob_diff_min",
    "kl_sample_train_v1",
    "kl_sample_train_v2",
    "pg_clipfrac",
)
"""Oat's ``learning_step`` metrics `learning_steps` returns. ``logprobs_diff_*``: the
learner's log-probs minus its own old log-probs (recomputed at the step's start), over the
policy tokens of each micro-batch when it is trained; ``sampler_learner_prob_diff_*``:
``exp(sampler) - exp(old)``; ``kl_sample_train_v1``: mean of ``sampler - old`` over policy
tokens, ``_v2`` half the mean square."""


class _Engine:
    """The DeepSpeed-engine part Oat's learner calls: forward, ``backward``, ``step``.

    `loss` is what the step back-propagated in total: the sum of ``loss / accumulation``.
    """

    def __init__(self, model: Any, optimizer: Any, accumulation: int, max_norm: float) -> None:
        self.module = model
        self.optimizer = optimizer
        self.accumulation = accumulation
        self.max_norm = max_norm
        self.micro_steps = 0
        self.loss = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def backward(self, loss: Any) -> None:
        scaled = loss / self.accumulation
        scaled.backward()
        self.loss += float(scaled.detach())

    def step(self) -> None:
        import torch

        self.micro_steps += 1
        if self.micro_steps % self.accumulation:
            return
        torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.max_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


class _Strategy:
    """The ``DeepspeedStrategy`` methods ``learning_step`` and ``TransitionDataset`` call,
    for one rank."""

    def __init__(self, engine: _Engine) -> None:
        from types import SimpleNamespace

        self.args = SimpleNamespace(dry_run=False)
        self.grad_acc_step = engine.accumulation
        self.world_size = 1

    def is_rank_0(self) -> bool:
        return True

    def backward(self, loss: Any, model: _Engine, optimizer: Any, **_: Any) -> None:
        model.backward(loss)

    def optimizer_step(self, optimizer: Any, model: _Engine, scheduler: Any, **_: Any) -> None:
        model.step()

    def get_gradient_norm(self, model: _Engine, **_: Any) -> float:
        import torch

        grads = [p.grad.pow(2).sum() for p in model.module.parameters() if p.grad is not None]
        return float(torch.stack(grads).sum().sqrt())

    def all_reduce(self, tensor: Any, op: str = "sum") -> Any:
        return tensor


def _micro_batch(rows: int, largest: int) -> int:
    """The largest divisor of `rows` not above `largest`: Oat's learner indexes whole
    micro-batches only (``torch.arange(i, i + train_batch_size_per_device)``)."""
    return max(size for size in range(1, min(rows, largest) + 1) if rows % size == 0)


def run(job: UpdateJob) -> TrainerRun:
    """`UpdateJob.steps` calls of Oat's ``learning_step`` on the job's episodes.

    Raises:
        NotRunnableError: oat-llm is not installed, or the job asks for a KL or entropy term.
    """
    return learning_steps(job)[0]


def learning_steps(
    job: UpdateJob, *, accumulate: bool = True
) -> tuple[TrainerRun, list[dict[str, float]]]:
    """`run`, and Oat's own metrics of each ``learning_step`` (the `METRICS` of its infos).

    Args:
        job: The layer-3 job.
        accumulate: DeepSpeed's gradient accumulation: one optimizer step per
            ``learning_step``. False: an optimizer step after every micro-batch (a
            stand-in without accumulation), the setting in which Oat's ``logprobs_diff``
            measures how far the earlier micro-batches of the step moved the policy.

    Raises:
        NotRunnableError: as `run`.
    """
    try:
        from xpgym.adapters.oat import oat_classes, to_transition_data
    except ImportError as err:
        raise NotRunnableError(f"oat-llm is not installed: {err}") from err
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hp = job.hparams
    if hp.kl_coef or hp.entropy_coef:
        raise NotRunnableError(
            "this runner has no reference model (Oat's beta) and Oat has no entropy bonus"
        )
    torch.manual_seed(hp.seed)
    tokenizer = AutoTokenizer.from_pretrained(job.model_dir)
    model = AutoModelForCausalLM.from_pretrained(job.model_dir, dtype=torch.float32)
    model.train()
    rows = to_transition_data(job.episodes, gamma=hp.gamma, tokenizer=tokenizer)
    micro = _micro_batch(len(rows), hp.micro_batch_size)
    accumulation = len(rows) // micro if accumulate else 1
    notes = [
        f"{len(rows)} per-turn rows, micro-batch {micro}, "
        f"{len(rows) // micro // accumulation} optimizer step(s) per learning_step",
        "old log-probs: the learner's own at each step's start; sampler log-probs only in "
        "TIS min(exp(old - sampler), 2.0); per-row token mean, then mean over rows",
    ]
    if hp.clip_low != hp.clip_high:
        notes.append(f"Oat's clip is symmetric: cliprange {hp.clip_low} (clip_high ignored)")

    with stand_ins(STAND_INS, ("oat",)) as missing:
        from oat.utils.data import TransitionDataset
        from oat.utils.ops import masked_mean

        args_cls, _, learner_cls = oat_classes()
        args = args_cls(
            critic_type="grpo",
            norm_return=True,
            gamma=hp.gamma,
            train_batch_size=len(rows),
            train_batch_size_per_device=micro,
            rollout_batch_size=len(rows),
            num_ppo_epochs=1,
            learning_rate=hp.lr,
            l2=0.0,
            max_norm=hp.max_grad_norm,
            cliprange=hp.clip_low,
            beta=0.0,
            use_fused_lm_head=False,
        )
        optimizer = torch.optim.AdamW(
            model.parameters(),
            lr=args.learning_rate,
            betas=(args.adam_beta_1, args.adam_beta_2),
            weight_decay=args.l2,
        )
        engine = _Engine(model, optimizer, accumulation, args.max_norm)
        strategy = _Strategy(engine)
        learner = object.__new__(learner_cls)  # Oat's __init__ starts DeepSpeed and actors
        learner.args, learner.strategy, learner.model = args, strategy, engine
        learner.optimizer, learner.scheduler = optimizer, None
        learner.ref_model = learner.critic = None
        learner.masked_aggregator = masked_mean  # critic_type grpo (PPOLearner._init)
        dataset = TransitionDataset(rows, tokenizer, strategy)
        batch = dataset.collate_fn([dataset[i] for i in range(len(dataset))])

        np.random.seed(hp.seed)  # learning_step permutes micro-batches with np.random
        steps, metrics = [], []
        with mock.patch.object(torch.cuda, "current_device", return_value="cpu"):
            for k in range(job.steps):
                engine.loss = 0.0
                infos = learner.learning_step(batch)
                steps.append(
                    StepResult(
                        loss=engine.loss,
                        grad_norm=float(infos["policy_grad_norm"]),
                        params=snapshot(model),
                    )
                )
                metrics.append({name: float(infos[name]) for name in METRICS})
                logger.info("oat step %d: loss %.4f", k + 1, engine.loss)
    for k, step in enumerate(metrics, 1):
        gap = max(
            abs(step["sampler_learner_prob_diff_max"]), abs(step["sampler_learner_prob_diff_min"])
        )
        notes.append(
            f"step {k}: Oat's logprobs_diff_max {step['logprobs_diff_max']:.3g} (learner vs its "
            f"own old log-probs), sampler-learner |prob diff| max {gap:.3g}"
        )
    stand_in_names = [*missing, "torch.cuda.current_device", "DeepSpeed engine/strategy"]
    return TrainerRun(steps=steps, stand_ins=stand_in_names, notes=notes), metrics
