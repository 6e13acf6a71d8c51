"""OpenRLHF 0.11.x: ``DeepspeedStrategy`` (ZeRO-0) on DeepSpeed's CPU accelerator, ``Actor``,
``PolicyLoss``, ``strategy.backward`` / ``optimizer_step`` on `to_experience`'s batch.

What runs is OpenRLHF's: the strategy's ``setup_distributed`` (gloo, one process; ``LOCAL_RANK
= -1`` or it calls ``torch.cuda.set_device``) and ``prepare`` (``deepspeed.initialize`` with
AdamW betas (0.9, 0.95), eps 1e-8, grad clip ``max_norm``, constant schedule), ``Actor``
around the warm model loaded in float32 with eager attention (``Actor`` takes a model
object; from a path it loads bf16 or fp16 only, and DeepSpeed's bf16 is off with
``args.ds.param_dtype="fp32"``: OpenRLHF's default is bf16), the
adapter's ReBN hook (`xpgym.adapters.openrlhf.turn_advantages`, what its
``install_turn_rebn`` puts into the experience maker), ``iter_grad_accum_global_norm`` (every
micro-batch normalised by the step's token count: one token-mean over the batch), the
``PolicyLoss`` the PPO actor builds (clip 0.2/0.2, no dual clip, token-level), and DeepSpeed's
gradient accumulation over micro-batches of ``job.hparams.micro_batch_size`` rows. The
grad norm is that of the accumulated gradients before the engine's step: DeepSpeed records
no norm in float32 ZeRO-0 (``clip_fp32_gradients`` discards it), so OpenRLHF's
``strategy.get_grad_norm`` (``get_global_grad_norm``) is 0 there. ``old_action_log_probs``
are the sampler's (``rollout_log_probs``) in every step. Stand-ins: ``flash_attn``
(``openrlhf.models`` imports it; the eager path never calls it). The first run in a
process creates a one-process gloo group that stays for the process's lifetime (DeepSpeed
keeps its communication backend in a module global; later runs reuse it). Two settings
OpenRLHF does not expose: DeepSpeed's ``torch_adam`` (``TorchAdamStrategy``), and no
shared-memory all-reduce op (`_setup_without_shm_op`: one process, and its build is a C++
compile of minutes); and ``Actor.packing_samples``
is set to its default False, which ``Actor.__init__`` leaves unset when given a model object.
"""

from __future__ import annotations

from contextlib import ExitStack
from types import SimpleNamespace
from typing import Any

from parity.shared.environment import set_environment
from parity.shared.trainer_code import NotRunnableError, stand_ins
from parity.update.job import StepResult, TrainerRun, UpdateJob

__all__ = ["run"]

STAND_INS = ("flash_attn", "flash_attn.bert_padding", "flash_attn.utils.distributed")


def run(job: UpdateJob) -> TrainerRun:
    """OpenRLHF's update for ``job.steps`` steps (module docstring)."""
    from parity.update._common import free_port

    env = {
        "DS_ACCELERATOR": "cpu",
        "LOCAL_RANK": "-1",
        "RANK": "0",
        "WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }
    # The environment is restored on exit; the one-process gloo group stays (DeepSpeed keeps
    # its backend in a module global).
    with ExitStack() as stack:
        stack.enter_context(set_environment(env))
        missing = stack.enter_context(stand_ins(STAND_INS, ("openrlhf",)))
        try:
            import deepspeed  # noqa: F401
            from openrlhf.models import Actor, PolicyLoss
            from openrlhf.utils.deepspeed import DeepspeedStrategy
            from openrlhf.utils.loss_utils import iter_grad_accum_global_norm

            from xpgym.adapters.openrlhf import to_experience, turn_advantages
        except ImportError as err:
            raise NotRunnableError(f"cannot import openrlhf / deepspeed: {err}") from err
        steps = _run(
            job,
            Actor,
            PolicyLoss,
            DeepspeedStrategy,
            iter_grad_accum_global_norm,
            to_experience,
            turn_advantages,
        )
    return TrainerRun(
        steps=steps,
        stand_ins=list(missing),
        notes=[
            "OpenRLHF ZeRO-0 on DeepSpeed's CPU accelerator, float32, AdamW (0.9, 0.95)",
            "DeepSpeed torch_adam; grad norm from the accumulated gradients (get_grad_norm "
            "is 0 in float32 ZeRO-0)",
        ],
    )


def _setup_without_shm_op(strategy: Any) -> None:
    """``strategy.setup_distributed()`` without DeepSpeed's shared-memory all-reduce op: one
    process never all-reduces, and the op is a C++ JIT compile of minutes on a fresh machine
    (DeepSpeed's ``TorchBackend`` runs without it when the op is marked incompatible)."""
    import deepspeed.ops

    compatible = deepspeed.ops.__compatible_ops__
    before = compatible.get("deepspeed_shm_comm")
    compatible["deepspeed_shm_comm"] = False
    try:
        strategy.setup_distributed()
    finally:
        if before is None:
            compatible.pop("deepspeed_shm_comm", None)
        else:
            compatible["deepspeed_shm_comm"] = before


def _run(
    job: UpdateJob,
    actor_cls: Any,
    policy_loss_cls: Any,
    strategy_cls: Any,
    global_norm: Any,
    to_experience: Any,
    turn_advantages: Any,
) -> list[StepResult]:
    from parity.update._common import ADAM_EPS, grad_norm, load_model, snapshot

    class TorchAdamStrategy(strategy_cls):  # type: ignore[misc, valid-type]
        """OpenRLHF's strategy with DeepSpeed's ``torch_adam`` option set in the optimizer
        section it writes: ``torch.optim.AdamW`` instead of FusedAdam, whose CPU build is a
        C++ JIT compile of minutes (same update rule, same hyper-parameters)."""

        def get_ds_train_config(self, optim_dict: Any = None, **kwargs: Any) -> Any:
            config = super().get_ds_train_config(optim_dict, **kwargs)
            if "optimizer" in config:
                config["optimizer"]["params"]["torch_adam"] = True
            return config

    hp = job.hparams
    episodes = list(job.episodes)
    args = SimpleNamespace(
        local_rank=-1,
        ds=SimpleNamespace(param_dtype="fp32"),
        train=SimpleNamespace(dynamic_batch_enable=False),
    )
    strategy = TorchAdamStrategy(
        seed=hp.seed,
        max_norm=hp.max_grad_norm,
        micro_train_batch_size=hp.micro_batch_size,
        train_batch_size=len(episodes),
        zero_stage=0,
        args=args,
    )
    _setup_without_shm_op(strategy)
    actor = actor_cls(load_model(job, attn_implementation="eager"))
    actor.packing_samples = False  # the model-object path of Actor.__init__ leaves it unset
    optim_cfg = {
        "optim": "adam",
        "adam": {"lr": hp.lr, "betas": (0.9, 0.95), "eps": ADAM_EPS, "weight_decay": 0.0},
        "lr_scheduler": "constant",
        "lr_warmup_ratio": 0.0,
        "max_norm": hp.max_grad_norm,
        "scheduler_steps": job.steps,
    }
    actor, optimizer, scheduler = strategy.prepare((actor, optim_cfg))
    actor.eval()  # dropout off, as the reference (the tiny model has none)
    micro = [
        to_experience(episodes[i : i + hp.micro_batch_size], pad_token_id=0)
        for i in range(0, len(episodes), hp.micro_batch_size)
    ]
    turn_advantages(micro, estimator="rebn", gamma=hp.gamma)
    policy_loss = policy_loss_cls(clip_eps_low=hp.clip_low, clip_eps_high=hp.clip_high)
    steps = []
    for _ in range(job.steps):
        loss_sum = 0.0
        for exp, info in global_norm(
            iter(micro), strategy, strategy.accumulated_gradient, lambda e: e.action_mask
        ):
            log_probs = actor(exp.sequences, exp.action_mask, attention_mask=exp.attention_mask)
            loss = policy_loss(
                log_probs,
                exp.rollout_log_probs,
                exp.advantages,
                action_mask=exp.action_mask,
                **info,
            )[0]
            strategy.backward(loss, actor, optimizer)
            norm = grad_norm(actor.model.module.parameters())  # the accumulated gradient
            strategy.optimizer_step(optimizer, actor, scheduler, name="actor")
            loss_sum += float(loss.detach()) / strategy.accumulated_gradient
        steps.append(StepResult(loss_sum, norm, snapshot(actor.model.module)))
    return steps
