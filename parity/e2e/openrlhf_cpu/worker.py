"""Test harness (not a way to train): Ray's ``worker_process_setup_hook`` of the run.

`setup` runs at the start of every Ray worker (OpenRLHF's ``PPOTrainer``, ``PolicyModelActor``
and ``RolloutRayActor``): it makes sure the import hook is in (the ``sitecustomize`` put it
there already; `parity.e2e.openrlhf_cpu.imports`), applies the ``torch.cuda`` shim
(`parity.shared.cpu_torch.shim_torch_cuda`), then runs the recipe's own setup hook,
named by the launch in `RECIPE_HOOK_ENV` (``recipes/train_openrlhf.py``'s
``ray_runtime_env``: xpgym's ``install_turn_rebn``), as the recipe's run would.
"""

from __future__ import annotations

import importlib
import os

__all__ = ["RECIPE_HOOK_ENV", "setup"]

RECIPE_HOOK_ENV = "PARITY_OPENRLHF_RECIPE_HOOK"
"""Environment variable with the recipe's ``worker_process_setup_hook`` (``module.function``)."""


def setup() -> None:
    """Prepare one Ray worker of the run (module docstring)."""
    from parity.e2e.openrlhf_cpu import imports

    imports.install()
    from parity.shared.cpu_torch import shim_torch_cuda

    shim_torch_cuda()
    hook = os.environ.get(RECIPE_HOOK_ENV)
    if hook:
        module, _, name = hook.rpartition(".")
        getattr(importlib.import_module(module), name)()
