"""Test harness (not a way to train): the import hook that applies the harness's patches in
every Python process of a run (`parity.e2e.openrlhf_cpu`).

`install` puts a finder at the front of ``sys.meta_path``. When a module of `PATCHES` is first
imported, the finder lets the normal machinery find and execute it, then calls its patch
function (`parity.e2e.openrlhf_cpu.patches` or `parity.e2e.openrlhf_cpu.observe`) on the fresh
module, before the importer gets it. When a module of `STAND_INS` is not installed, the finder
supplies a stand-in whose functions raise. A ``sitecustomize`` on the run's ``PYTHONPATH``
calls `install` at interpreter start-up (``site/sitecustomize.py``), so the hook is in the
launch process, every Ray worker and vLLM's engine-core and worker processes alike.

Standard library only: it runs in every process before anything else is imported.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from typing import Any

__all__ = ["PATCHES", "STAND_INS", "install"]

PATCHES: dict[str, str] = {
    "openrlhf.utils.config": "parity.e2e.openrlhf_cpu.patches:float32_params",
    "openrlhf.utils.utils": "parity.e2e.openrlhf_cpu.patches:float32_dtype",
    "openrlhf.utils.distributed_util": "parity.e2e.openrlhf_cpu.patches:tcp_store_sync_group",
    "openrlhf.utils.deepspeed.deepspeed": "parity.e2e.openrlhf_cpu.patches:deepspeed_on_cpu",
    "openrlhf.trainer.ppo_utils.replay_buffer": "parity.e2e.openrlhf_cpu.patches:cpu_buffer",
    "openrlhf.trainer.ray.vllm_engine": "parity.e2e.openrlhf_cpu.patches:float32_engine",
    "openrlhf.trainer.ray.vllm_worker_wrap": "parity.e2e.openrlhf_cpu.patches:reload_on_sync",
    "openrlhf.trainer.ppo_utils.experience_maker": (
        "parity.e2e.openrlhf_cpu.observe:observe_experiences"
    ),
    "openrlhf.trainer.ppo_trainer": "parity.e2e.openrlhf_cpu.observe:observe_step_logs",
}
"""Module -> ``"module:function"`` called with it right after it is executed."""

STAND_INS: dict[str, tuple[str, ...]] = {
    "flash_attn": (),
    "flash_attn.bert_padding": ("index_first_axis", "pad_input", "rearrange", "unpad_input"),
    "flash_attn.utils": (),
    "flash_attn.utils.distributed": ("all_gather",),
}
"""Module -> the functions OpenRLHF imports from it (``models/ring_attn_utils.py:3-4``),
supplied only where the module is not installed."""


def _unavailable(module: str, name: str) -> Any:
    def stand_in(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"{module}.{name} is a stand-in of parity.e2e.openrlhf_cpu (flash_attn does not "
            "run on a CPU): packing samples and ring attention are off in this harness"
        )

    stand_in.__name__ = name
    return stand_in


class _PatchingLoader(importlib.abc.Loader):
    """A module's own loader, followed by its patch."""

    def __init__(self, loader: Any, patch: str) -> None:
        self._loader = loader
        self._patch = patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        where, _, name = self._patch.partition(":")
        getattr(importlib.import_module(where), name)(module)

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, ... of the real loader
        if name == "_loader":  # not set yet (a copy): no recursion
            raise AttributeError(name)
        return getattr(self._loader, name)


class _StandInLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []  # a package: its submodules of STAND_INS import too
        for name in STAND_INS[module.__name__]:
            setattr(module, name, _unavailable(module.__name__, name))


class _Finder(importlib.abc.MetaPathFinder):
    """Finds `PATCHES`' modules through the other finders and wraps their loaders; supplies
    `STAND_INS`' modules that no other finder finds."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in PATCHES and fullname not in STAND_INS:
            return None
        spec = self._find_elsewhere(fullname, path, target)
        if fullname in STAND_INS:
            if spec is not None:
                return spec
            return importlib.machinery.ModuleSpec(fullname, _StandInLoader(), is_package=True)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader, PATCHES[fullname])
        return spec

    def _find_elsewhere(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None
    ) -> importlib.machinery.ModuleSpec | None:
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            if finder is self or find_spec is None:
                continue
            spec = find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once per process)."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
