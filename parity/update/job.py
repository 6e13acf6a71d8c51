"""The contract between `parity.update` and each trainer's layer-3 runner.

Layer 3 gives every trainer the same warm weights and the same episodes, converts the
episodes with that trainer's xpgym adapter, and runs **the trainer's own** policy-loss,
backward and optimizer-step code for `UpdateJob.steps` steps. A runner is a module
``parity/update/<trainer>.py`` with one function::

    def run(job: UpdateJob) -> TrainerRun

It raises `parity.tokens.core.NotRunnableError` (with the reason) where the trainer cannot run
here, and never changes `job`. `parity.update` compares each `TrainerRun` with the reference
trainer configured with that trainer's documented semantics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from xpgym.core.trajectory import Episode

if TYPE_CHECKING:
    import torch

__all__ = ["StepResult", "TrainerRun", "UpdateHParams", "UpdateJob"]


@dataclass(frozen=True)
class UpdateHParams:
    """The optimisation settings every trainer is configured with (GEM paper, Appendix F).

    `lr` for AdamW with no weight decay and constant schedule; `clip_low`/`clip_high` the PPO
    ratio clip (``1 - clip_low <= ratio <= 1 + clip_high``); `max_grad_norm` the global-norm
    clip (the grad norm a runner reports is the norm *before* clipping, as every trainer
    logs it); `kl_coef` and `entropy_coef` 0 (no reference model, no entropy bonus); `gamma`
    the per-turn discount of the episode returns; `micro_batch_size` rows per backward pass
    (gradients of one step are accumulated over all micro-batches of the batch).
    """

    lr: float = 1e-4
    clip_low: float = 0.2
    clip_high: float = 0.2
    max_grad_norm: float = 1.0
    kl_coef: float = 0.0
    entropy_coef: float = 0.0
    gamma: float = 0.9
    micro_batch_size: int = 4
    seed: int = 0


@dataclass(frozen=True)
class UpdateJob:
    """One layer-3 run: start from `model_dir`, update on `episodes` for `steps` steps.

    `model_dir` is a Hugging Face model directory (the warm tiny model of
    `parity.shared.warm_model.warm_model_dir`, float32, with its tokenizer). `episodes` carry
    the policy's token ids and its per-token sampling log-probs, so the first step's importance
    ratio is 1 wherever the trainer recomputes the same log-probs. Every step reuses the same
    batch (the episodes do not change between steps), which makes step 2..K test the clipped
    ratio path. `device` is where the model runs (``"cpu"``; ``"cuda"`` for the runners in
    `parity.update.CUDA_RUNNERS`, `parity.curves.gpu_check`).
    """

    model_dir: Path
    episodes: Sequence[Episode]
    steps: int = 3
    hparams: UpdateHParams = field(default_factory=UpdateHParams)
    device: str = "cpu"


@dataclass
class StepResult:
    """What one optimizer step did.

    `loss` is the scalar the trainer back-propagated (summed over micro-batches as the
    trainer aggregates it), `grad_norm` the global L2 norm of the gradients before clipping,
    `params` every trainable parameter after the step, by the model's own parameter names,
    as float32 CPU tensors (copies).
    """

    loss: float
    grad_norm: float
    params: dict[str, torch.Tensor]


@dataclass
class TrainerRun:
    """A trainer's K steps, the stand-ins its import needed, and notes for the report."""

    steps: list[StepResult]
    stand_ins: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
