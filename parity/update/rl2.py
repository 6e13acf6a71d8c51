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
Stand-ins: ``wandb``, ``ring_flash_attn`` (the sequence-parallel attention the eager path
never calls) and ``sglang`` / ``sglang_router`` (``RL2.workers`` imports the rollout), plus
the ``is_flash_attn_greater_or_equal_2_10`` name that RL2 0.0.2 imports from transformers
(gone in transformers 5). RL2 replaces transformers' flash-attention functions at import;
they are put back at the end of the run. The first run in a process creates a one-process
gloo group that stays for the process's lifetime (later runs reuse it).
"""

from __future__ import annotations

from contextlib import ExitStack
from types import SimpleNamespace
from typing import Any
from unittest import mock

from parity.shared.trainer_code import NotRunnableError, stand_ins
from parity.update.job import StepResult, TrainerRun, UpdateJob

__all__ = ["run"]


STAND_INS = (
    "wandb",
    "ring_flash_attn",
    "ring_flash_attn.llama3_flash_attn_varlen",
    "ring_flash_attn.adapters",
    "ring_flash_attn.adapters.hf_adapter",
    "sglang",
    "sglang.srt",
    "sglang.srt.utils",
    "sglang.srt.model_executor",
    "sglang.srt.model_executor.model_runner",
    "sglang.srt.patch_torch",
    "sglang.srt.server_args",
    "sglang.srt.entrypoints",
    "sglang.srt.entrypoints.http_server",
    "sglang_router",
    "sglang_router.launch_router",
)
FLASH_VERSION_NAME = "is_flash_attn_greater_or_equal_2_10"
PATCHED = (
    "torch.cuda.current_device (cpu)",
    "RL2 prepare_dp_model (no FSDP)",
    "ring_flash_attn prepare_cu_seqlens (one rank)",
)
"""What the run replaces while RL2 runs besides the import stand-ins (module docstring)."""


def run(job: UpdateJob) -> TrainerRun:
    """RL2's ``Actor.update`` for ``job.steps`` steps (module docstring)."""
    try:
        import RL2
    except ImportError as err:
        raise NotRunnableError(f"cannot import RL2 (rl-square): {err}") from err
    import torch
    import transformers.modeling_flash_attention_utils as flash_utils
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    from xpgym.adapters.rl2 import install_turn_advantages, to_tensor_dict

    attention_before = ALL_ATTENTION_FUNCTIONS.get("flash_attention_2")
    flash_forward_before = flash_utils._flash_attention_forward
    with ExitStack() as stack:
        missing = stack.enter_context(stand_ins(STAND_INS, ("RL2",)))
        # RL2's import replaces transformers' flash-attention functions: put them back
        stack.callback(setattr, flash_utils, "_flash_attention_forward", flash_forward_before)
        if not hasattr(flash_utils, FLASH_VERSION_NAME):
            stack.enter_context(
                mock.patch.object(flash_utils, FLASH_VERSION_NAME, True, create=True)
            )
            missing.append(f"transformers.modeling_flash_attention_utils.{FLASH_VERSION_NAME}")
        stack.callback(_restore_attention, ALL_ATTENTION_FUNCTIONS, attention_before)
        stack.enter_context(mock.patch.object(torch.cuda, "current_device", return_value="cpu"))
        try:
            import wandb
            from omegaconf import OmegaConf
            from RL2.trainer import ppo
            from RL2.trainer.base import Trainer
            from RL2.utils import sequence_parallelism
            from RL2.workers import Actor
            from RL2.workers import base as worker_base
        except ImportError as err:
            raise NotRunnableError(f"cannot import RL2's actor: {err}") from err
        logged: list[dict[str, float]] = []
        stack.enter_context(
            mock.patch.object(wandb, "log", lambda metrics, step=None: logged.append(metrics))
        )
        stack.enter_context(mock.patch.object(worker_base, "prepare_dp_model", _no_fsdp))
        stack.enter_context(
            mock.patch.object(
                sequence_parallelism, "llama3_flash_attn_prepare_cu_seqlens", _one_rank_cu_seqlens
            )
        )
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
        stand_ins=[*missing, *PATCHED],
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


def _one_rank_cu_seqlens(
    cu_seqlens: Any, causal: bool, rank: int, world_size: int
) -> tuple[Any, Any, int, int, slice]:
    """``ring_flash_attn``'s ``llama3_flash_attn_prepare_cu_seqlens`` for one sequence-parallel
    rank: every query and key of the packed row is local. RL2's forward stores the result for
    its flash-attention function only, which eager attention never calls."""
    if world_size != 1:
        raise ValueError("one sequence-parallel rank only")
    longest = int((cu_seqlens[1:] - cu_seqlens[:-1]).max())
    return cu_seqlens, cu_seqlens, longest, longest, slice(None)


def _restore_attention(functions: Any, before: Any) -> None:
    if before is None:
        functions.pop("flash_attention_2", None)
    else:
        functions["flash_attention_2"] = before


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
