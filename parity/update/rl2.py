"""RL2 (rl-square 0.0.2): its ``Actor.update`` on `to_tensor_dict`'s rows, one-process gloo.

What runs is RL2's own: ``Worker.prepare_model_optimizer`` (its ``torch.optim.AdamW`` with
the actor config's lr and weight decay, default betas (0.9, 0.999)), the PPO ``Trainer``'s
``prepare_scheduler`` (constant, no warm-up), the adapter's per-turn ReBN through
``RL2.trainer.ppo.compute_advantages`` as `xpgym.adapters.rl2.install_turn_advantages`
routes it (``adv.estimator=xpgym_rebn``, ``adv.gamma``), and ``Actor.update``: its
``data_manager`` packing of sequences into minibatches of at most ``max_length_per_device``
tokens, its ``sequence_parallelism_manager`` forward (the minibatch's sequences packed into
one row; eager attention keeps them apart through the restarting ``position_ids``), its
clipped loss with ``avg_level=token`` (each minibatch's sum over the step's action count:
one token mean over the batch), ``Worker.backward`` and ``optimizer_step``
(``clip_grad_norm_`` at ``max_grad_norm``, whose returned norm is the one before clipping).
Loss and grad norm are the metrics ``Actor.update`` logs (``wandb.log`` of ``rank0_log``).

RL2's trainer computes ``old_logps`` only with a KL loss or ``update_per_rollout > 1``;
otherwise ``Actor.update`` takes the current log-probs, detached, as ``log pi_old``: the
ratio is 1 at the start of every step (``parity.update.SEMANTICS["rl2"]``:
``old_logprobs="recompute"``).

Bypassed, because they need CUDA or are the multi-GPU plumbing around the same math:
``Worker.__init__`` / ``Actor.__init__`` (``"cuda"`` device meshes, flash-attention-2
loading, FSDP with bf16 mixed precision): the model is the warm float32 one with eager
attention, the meshes are the same ``(dp, sp, tp)`` mesh of size 1 on ``"cpu"`` over a
one-process gloo group, ``prepare_dp_model`` (FSDP) is the identity, and
``torch.cuda.current_device`` returns the CPU device while RL2 runs. Gradient checkpointing
and model/optimizer offloading are off (they move or recompute, the math is the same).
Stand-ins (`parity.shared.rl2_imports.rl2_importable`, shared with the end-to-end harness
`parity.e2e.rl2_cpu`): ``wandb``, ``ring_flash_attn`` (the sequence-parallel attention the
eager path never calls) and ``sglang`` / ``sglang_router`` (``RL2.workers`` imports the
rollout), plus the ``is_flash_attn_greater_or_equal_2_10`` name that RL2 0.0.2 imports from
transformers (gone in transformers 5). RL2 replaces transformers' flash-attention functions at
import; they are put back at the end of the run. The first run in a process creates a one-process
gloo group that stays for the process's lifetime (later runs reuse it).
"""

from __future__ import annotations

from contextlib import ExitStack
from types import SimpleNamespace
from typing import Any
from unittest import mock

from parity.shared.rl2_imports import rl2_importable
from parity.shared.trainer_code import NotRunnableError
from parity.update.job import StepResult, TrainerRun, UpdateJob

__all__ = ["run"]

PATCHED = ("RL2 prepare_dp_model (no FSDP)",)
"""What the run replaces besides `parity.shared.rl2_imports.rl2_importable` (module
docstring)."""


def run(job: UpdateJob) -> TrainerRun:
    """RL2's ``Actor.update`` for ``job.steps`` steps (module docstring)."""
    try:
        import RL2
    except ImportError as err:
        raise NotRunnableError(f"cannot import RL2 (rl-square): {err}") from err
    from xpgym.adapters.rl2 import install_turn_advantages, to_tensor_dict

    with ExitStack() as stack:
        try:
            stood_in = stack.enter_context(rl2_importable())
            import wandb
            from omegaconf import OmegaConf
            from RL2.trainer import ppo
            from RL2.trainer.base import Trainer
            from RL2.workers import Actor
            from RL2.workers import base as worker_base
        except ImportError as err:
            raise NotRunnableError(f"cannot import RL2's actor: {err}") from err
        logged: list[dict[str, float]] = []
        stack.enter_context(
            mock.patch.object(wandb, "log", lambda metrics, step=None: logged.append(metrics))
        )
        stack.enter_context(mock.patch.object(worker_base, "prepare_dp_model", _no_fsdp))
        install_turn_advantages()

        hp = job.hparams
        tensor_dict, cu_seqs = to_tensor_dict(job.episodes)
        lengths = tensor_dict["eos_mask"].argmax(-1) + 1
        config = OmegaConf.load(RL2.__path__[0] + "/trainer/config/ppo.yaml")
        config.merge_with(
            {
                "actor": {
                    "model_name": str(job.model_dir),
                    "gradient_checkpointing": False,
                    # about micro_batch_size rows per backward pass
                    "max_length_per_device": int(lengths.max()) * hp.micro_batch_size,
                    "temperature": 1.0,
                    "clip": hp.clip_low,
                    "lr": hp.lr,
                    "weight_decay": 0.0,
                    "max_grad_norm": hp.max_grad_norm,
                    "warmup_ratio": 0.0,
                    "offload_model": False,
                    "offload_optimizer": False,
                },
                "adv": {"estimator": "xpgym_rebn", "gamma": hp.gamma},
                "trainer": {"use_wandb": False},
            }
        )
        if hp.clip_low != hp.clip_high:
            raise NotRunnableError("RL2 0.0.2 has one symmetric clip (actor.clip)")
        actor = _actor(Actor, config.actor, job)
        trainer = SimpleNamespace(config=config, train_dataloader=range(job.steps))
        actor.scheduler = Trainer.prepare_scheduler(trainer, actor)
        ppo.compute_advantages(config.adv, tensor_dict, cu_seqs, 0)

        from parity.update._common import snapshot

        steps = []
        for step in range(job.steps):
            logged.clear()
            actor.update(dict(tensor_dict), step)
            metrics = next(m for m in logged if "actor/loss" in m)
            steps.append(
                StepResult(
                    float(metrics["actor/loss"]),
                    float(metrics["actor/grad_norm"]),
                    snapshot(actor.model),
                )
            )
    return TrainerRun(
        steps=steps,
        stand_ins=[*stood_in, *PATCHED],
        notes=[
            "RL2 Actor.update without FSDP on a (dp, sp, tp) = (1, 1, 1) CPU mesh over gloo, "
            "float32, eager attention on its packed minibatches",
            "AdamW (0.9, 0.999) from Worker.prepare_model_optimizer; loss and grad norm as "
            "Actor.update logs them",
        ],
    )


def _no_fsdp(model: Any, device_mesh: Any) -> Any:
    """``prepare_dp_model`` for one process without FSDP: the model itself."""
    return model


def _actor(actor_cls: Any, config: Any, job: UpdateJob) -> Any:
    """RL2's ``Actor`` on the warm model: ``Worker.__init__``'s state with the CPU mesh, then
    RL2's ``prepare_model_optimizer`` (module docstring)."""
    from torch.distributed.device_mesh import init_device_mesh

    from parity.update._common import load_model

    _ensure_process_group()
    actor = actor_cls.__new__(actor_cls)
    actor.config = config
    actor.train = True
    actor.model_device_mesh = init_device_mesh(
        "cpu", (1, 1, 1), mesh_dim_names=("ddp", "fsdp", "tp")
    )
    actor.device_mesh = init_device_mesh("cpu", (1, 1, 1), mesh_dim_names=("dp", "sp", "tp"))
    actor.fsdp_size = actor.dp_size = 1
    actor.model = load_model(job, attn_implementation="eager")
    actor.prepare_model_optimizer()
    return actor


def _ensure_process_group() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        return
    from parity.update._common import free_port

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1
    )
