"""A trainer's CUDA calls on a CPU, for the end-to-end harnesses (`parity.e2e.openrlhf_cpu`,
`parity.e2e.oat_cpu`): the ``torch.cuda`` shim and DeepSpeed's CPU accelerator without its
compiled ops. Both change process-wide state: a harness applies them in the processes that run
the trainer's code, never in a test process.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["deepspeed_without_compiled_ops", "shim_torch_cuda"]


def shim_torch_cuda(logical_devices: int | None = None) -> None:
    """The ``torch.cuda`` calls the trainers make, on the CPU: ``current_device()`` is
    ``"cpu"`` (it is passed to ``.to()``), ``current_stream()`` is None (passed as a
    broadcast's stream), ``set_device``, ``synchronize`` and ``empty_cache`` do nothing,
    ``memory_allocated()`` is 0. ``is_available()`` stays False, so code that asks is not
    misled.

    Args:
        logical_devices: What ``device_count()`` says, for a trainer that sizes its launch by
            it (Oat: ``args.py:313``, ``interface.py:38``); None leaves it alone (0 on a CPU).

    Replaces, in OpenRLHF 0.11.2: ``trainer/ray/ppo_actor.py:148,171,417,436,489,600,604-605,
    627``, ``trainer/ray/launcher.py:64-65,136,190``, ``utils/deepspeed/deepspeed.py:97,398,
    614,633-634``, ``utils/distributed_util.py:10``; in Oat 0.2.4: ``utils/deepspeed.py:259,
    575,592,614,617,632,636,653``, ``learners/base.py:273,496,766,798,808,813,818,826,831``,
    ``algorithms/ppo.py:227-228,287,363,448``, ``args.py:313``, ``interface.py:38``.
    """
    cuda: Any = torch.cuda
    cuda.current_device = lambda: "cpu"
    cuda.current_stream = lambda device=None: None
    cuda.set_device = lambda device: None
    cuda.synchronize = lambda device=None: None
    cuda.empty_cache = lambda: None
    cuda.memory_allocated = lambda device=None: 0
    if logical_devices is not None:
        cuda.device_count = lambda: logical_devices


def deepspeed_without_compiled_ops() -> None:
    """Mark DeepSpeed's shared-memory all-reduce op unavailable: on its CPU accelerator
    (``DS_ACCELERATOR=cpu``) ``deepspeed.init_distributed`` would otherwise compile it (a C++
    build of minutes). Optimizers are the harness's business: FusedAdam and DeepSpeedCPUAdam
    are compiled ops too, so each harness has its trainer use ``torch.optim.AdamW``."""
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
