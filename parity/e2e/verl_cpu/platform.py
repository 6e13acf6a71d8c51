"""Test harness (not a way to train): verl's ``cpu`` platform and the rollout replica.

verl imports this module in every one of its processes (driver, TaskRunner, workers,
rollout server) through ``VERL_USE_EXTERNAL_MODULES=parity.e2e.verl_cpu.platform``; with
``VERL_PLATFORM=cpu`` verl's ``get_platform()`` then returns `CpuPlatform`. Importing it
also registers the ``hf_cpu`` rollout (`parity.e2e.verl_cpu.rollout.register`), makes verl's
process-group backend string valid on CPU (`_single_gloo_backend`), and turns off verl's
patch of TRL's value-head model (`_without_trl_value_head`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch
import torch.distributed
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

from parity.e2e.verl_cpu.launch import PLATFORM


class _CpuDeviceModule(ModuleType):
    """``torch.cpu`` plus the ``torch.cuda`` calls verl makes on its device module (memory
    statistics are 0, caches and IPC are no-ops, the RNG is torch's CPU RNG)."""

    def __init__(self) -> None:
        super().__init__("parity.e2e.verl_cpu.device")

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    def empty_cache(self) -> None:
        """Nothing to free."""

    def ipc_collect(self) -> None:
        """No IPC handles on CPU."""

    def set_per_process_memory_fraction(self, fraction: float, device: Any = None) -> None:
        """No device memory to cap."""

    def memory_allocated(self, device: Any = None) -> int:
        return 0

    memory_reserved = max_memory_allocated = max_memory_reserved = memory_allocated

    def mem_get_info(self, device: Any = None) -> tuple[int, int]:
        import psutil

        memory = psutil.virtual_memory()
        return memory.available, memory.total

    def get_rng_state(self, device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    def set_rng_state(self, state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)

    def get_device_name(self, device: Any = None) -> str:
        return "cpu"


@PlatformRegistry.register(platform=PLATFORM)
class CpuPlatform(PlatformBase):
    """verl platform on the CPU: device ``cpu``, collective backend gloo.

    verl's resource pools and rollout replicas ask Ray for ``GPU`` resources; the launch gives
    Ray one logical GPU (``ray_init.num_gpus=1``), which the trainer worker takes.
    `current_device` is ``"cpu"`` (verl passes it to ``tensor.to(...)``).
    """

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return True

    def current_device(self) -> Any:  # verl's int index; "cpu" is what .to() needs here
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        """One device: nothing to select."""

    def synchronize(self, device_index: int | None = None) -> None:
        """CPU work is synchronous."""

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    def set_allocator_settings(self, settings: str) -> None:
        """No device allocator."""

    def empty_cache(self) -> None:
        """Nothing to free."""

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def profiler_start(self) -> None:
        """No device profiler."""

    def profiler_stop(self) -> None:
        """No device profiler."""

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


_DEVICE_MODULE = _CpuDeviceModule()


def _single_gloo_backend(init_process_group: Any) -> Any:
    """Wrap ``torch.distributed.init_process_group`` so that verl's backend string
    ``"cpu:gloo,cpu:gloo"`` (``cpu:gloo,{device}:{backend}`` with device ``cpu``, which torch
    rejects as a duplicate device) becomes plain ``"gloo"``; other backends pass unchanged."""

    @functools.wraps(init_process_group)
    def wrapper(*args: Any, backend: str | None = None, **kwargs: Any) -> Any:
        if backend == "cpu:gloo,cpu:gloo":
            backend = "gloo"
        return init_process_group(*args, backend=backend, **kwargs)

    wrapper.__wrapped_by_parity__ = True  # type: ignore[attr-defined]
    return wrapper


if not getattr(torch.distributed.init_process_group, "__wrapped_by_parity__", False):
    torch.distributed.init_process_group = _single_gloo_backend(
        torch.distributed.init_process_group
    )


def _without_trl_value_head() -> None:
    """verl 0.9.1 patches ``AutoModelForCausalLMWithValueHead`` whenever TRL is installed,
    and that class is gone from TRL 1.x (ImportError while building the actor). The patch
    concerns value-head (critic) models only, which these runs do not have: tell verl's
    model patcher that TRL is absent."""
    from verl.models.transformers import monkey_patch

    monkey_patch.is_trl_available = lambda: False


_without_trl_value_head()

from parity.e2e.verl_cpu.rollout import register  # noqa: E402  (needs the platform above)

register()
