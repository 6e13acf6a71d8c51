"""What every layer-3 runner (and the reference run) needs: the model, the optimizer the
job asks for, a parameter snapshot and the gradient norm.

Importing this module imports torch.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any

import torch

from parity.update.job import UpdateHParams, UpdateJob

__all__ = ["ADAM_EPS", "adamw", "free_port", "grad_norm", "load_model", "snapshot"]

ADAM_EPS = 1e-8
"""AdamW eps (torch's default; verl, OpenRLHF, RL2 and TRL keep it)."""


def free_port() -> int:
    """A free TCP port on the loopback interface (for a one-process gloo group)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def load_model(job: UpdateJob, attn_implementation: str = "eager") -> Any:
    """The warm model of `job` in float32 on ``job.device``, in eval mode (dropout off: the
    trainers' and the reference's forward passes are the same function of the weights),
    torch seeded with ``job.hparams.seed``."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(job.hparams.seed)
    model = AutoModelForCausalLM.from_pretrained(
        job.model_dir, dtype=torch.float32, attn_implementation=attn_implementation
    )
    return model.to(job.device).eval()


def adamw(
    params: Iterable[torch.nn.Parameter], hparams: UpdateHParams, betas: tuple[float, float]
) -> torch.optim.AdamW:
    """AdamW with the job's lr, `betas`, `ADAM_EPS` and no weight decay (for a runner whose
    trainer leaves the optimizer to the caller)."""
    return torch.optim.AdamW(params, lr=hparams.lr, betas=betas, eps=ADAM_EPS, weight_decay=0.0)


def snapshot(model: torch.nn.Module, prefix: str = "") -> dict[str, torch.Tensor]:
    """Float32 CPU copies of the trainable parameters of `model`, by the model's own names.

    `prefix` is stripped from the names (a trainer that wraps the model, e.g. OpenRLHF's
    ``Actor`` holds it as ``model.``)."""
    return {
        name.removeprefix(prefix): p.detach().to("cpu", torch.float32).clone()
        for name, p in model.named_parameters()
        if p.requires_grad
    }


def grad_norm(params: Iterable[torch.nn.Parameter]) -> float:
    """Global L2 norm of the gradients of `params` (those without a gradient count 0)."""
    grads = [p.grad.detach().double() for p in params if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))) if grads else 0.0
