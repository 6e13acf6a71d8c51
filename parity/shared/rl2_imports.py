"""RL2 (rl-square 0.0.2) importable and runnable on a CPU, for a block of code: the import
stand-ins and the three process-wide changes that its layer-3 runner (`parity.update.rl2`) and
its end-to-end harness (`parity.e2e.rl2_cpu`) both need.

RL2 imports, at the top of the modules its actor and trainer load, packages that do not run or
are not installed on a CPU machine: ``wandb`` (logging), ``ring_flash_attn`` (sequence-parallel
flash attention, ``utils/sequence_parallelism.py:11-15``) and ``sglang`` / ``sglang_router``
(the rollout server, ``workers/rollout.py:10-11``, ``utils/sglang.py:10-13``). `STAND_INS` are
those modules; `rl2_importable` gives each missing one an empty stand-in module
(`parity.shared.trainer_code.stand_ins`). Besides, for the block:

- ``transformers.modeling_flash_attention_utils.is_flash_attn_greater_or_equal_2_10``, which
  RL2 0.0.2 imports (``utils/sequence_parallelism.py:8-10``, used at ``:51``) and
  transformers 5 no longer has, is defined (True) where missing;
- ``torch.cuda.current_device`` returns ``"cpu"`` (RL2 moves every batch, count and buffer
  there: ``utils/sequences.py:149,221``, ``utils/sequence_parallelism.py:99,111,166``,
  ``utils/comm.py:43``, ``workers/rollout.py:229``);
- ``ring_flash_attn``'s ``llama3_flash_attn_prepare_cu_seqlens`` as RL2's sequence-parallel
  forward calls it (``utils/sequence_parallelism.py:125-130``) is `one_rank_cu_seqlens`;
- RL2's import replaces transformers' flash-attention functions
  (``utils/sequence_parallelism.py:76-77``): they are put back at the end.

On exit everything is as before: the stand-ins and every ``RL2`` module imported in the block
are forgotten, so a later block imports RL2 afresh.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any
from unittest import mock

from parity.shared.trainer_code import stand_ins

__all__ = ["FLASH_VERSION_NAME", "STAND_INS", "one_rank_cu_seqlens", "rl2_importable"]

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
"""Modules RL2 0.0.2 imports at the top of its actor, rollout and trainer modules."""

FLASH_VERSION_NAME = "is_flash_attn_greater_or_equal_2_10"

PATCHED = (
    "torch.cuda.current_device (cpu)",
    "ring_flash_attn prepare_cu_seqlens (one rank)",
)
"""What `rl2_importable` changes besides the import stand-ins (module docstring)."""


@contextmanager
def rl2_importable() -> Iterator[list[str]]:
    """RL2 importable on a CPU for the block (module docstring).

    Yields:
        What was stood in: the missing modules of `STAND_INS`, the transformers name where it
        was missing, and `PATCHED`.
    """
    import torch
    import transformers.modeling_flash_attention_utils as flash_utils
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    attention_before = ALL_ATTENTION_FUNCTIONS.get("flash_attention_2")
    flash_forward_before = flash_utils._flash_attention_forward
    with ExitStack() as stack:
        missing = stack.enter_context(stand_ins(STAND_INS, ("RL2",)))
        stack.callback(setattr, flash_utils, "_flash_attention_forward", flash_forward_before)
        if not hasattr(flash_utils, FLASH_VERSION_NAME):
            stack.enter_context(
                mock.patch.object(flash_utils, FLASH_VERSION_NAME, True, create=True)
            )
            missing.append(f"transformers.modeling_flash_attention_utils.{FLASH_VERSION_NAME}")
        stack.callback(_restore_attention, ALL_ATTENTION_FUNCTIONS, attention_before)
        stack.enter_context(mock.patch.object(torch.cuda, "current_device", return_value="cpu"))
        from RL2.utils import sequence_parallelism

        stack.enter_context(
            mock.patch.object(
                sequence_parallelism, "llama3_flash_attn_prepare_cu_seqlens", one_rank_cu_seqlens
            )
        )
        yield [*missing, *PATCHED]


def one_rank_cu_seqlens(
    cu_seqlens: Any, causal: bool, rank: int, world_size: int
) -> tuple[Any, Any, int, int, slice]:
    """``ring_flash_attn``'s ``llama3_flash_attn_prepare_cu_seqlens`` for one sequence-parallel
    rank: every query and key of the packed row is local. RL2's forward stores the result for
    its flash-attention function only, which eager attention never calls.

    Raises:
        ValueError: `world_size` is not 1.
    """
    if world_size != 1:
        raise ValueError(f"one sequence-parallel rank only, got world_size={world_size}")
    longest = int((cu_seqlens[1:] - cu_seqlens[:-1]).max())
    return cu_seqlens, cu_seqlens, longest, longest, slice(None)


def _restore_attention(functions: Any, before: Any) -> None:
    if before is None:
        functions.pop("flash_attention_2", None)
    else:
        functions["flash_attention_2"] = before
