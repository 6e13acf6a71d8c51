"""Test harness (not a way to train): the weight payload of the SGLang stand-in's
``/update_weights_from_tensor``, both ends.

RL2 0.0.2 pushes each tensor of the actor to SGLang as ``{"serialized_named_tensors": [s],
"flush_cache": last}`` (``workers/rollout.py:228-261``): ``s`` is the base64 text of
``MultiprocessingSerializer.serialize([(name, LocalSerializedTensor(values=[t]))])``, where
``t`` is ``MultiprocessingSerializer.serialize(tensor)``, one per tensor-parallel rank. SGLang's
serializer pickles a tensor as a handle to shared memory (CUDA IPC on a GPU), which only a
process on the same device can open. The stand-in takes the same structure with the tensors
by value: `MultiprocessingSerializer` here is ``torch.save`` into bytes, `LocalSerializedTensor`
a record of the serialized values, and the server reads it back with ``torch.load(...,
weights_only=True)`` (`decode_named_tensors`), which unpickles tensors, containers and
`LocalSerializedTensor` only. The harness puts these two names in RL2's rollout module in place
of SGLang's (`parity.e2e.rl2_cpu.patches.by_value_weights`): RL2's sending code runs as it is.
"""

from __future__ import annotations

import base64
import binascii
import io
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "LocalSerializedTensor",
    "MultiprocessingSerializer",
    "PayloadError",
    "decode_named_tensors",
]


class PayloadError(ValueError):
    """A weight payload the stand-in cannot read; the message says what is wrong."""


@dataclass
class LocalSerializedTensor:
    """SGLang's record of one tensor serialized per tensor-parallel rank (``values[rank]``)."""

    values: list[bytes]


class MultiprocessingSerializer:
    """SGLang's serializer interface, by value: ``torch.save`` bytes of tensors, containers
    and `LocalSerializedTensor` records."""

    @staticmethod
    def serialize(obj: Any) -> bytes:
        """`obj` (tensors, lists, tuples, bytes, strings, `LocalSerializedTensor`) as bytes."""
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        return buffer.getvalue()

    @staticmethod
    def deserialize(data: bytes) -> Any:
        """What `serialize` wrote; anything else but tensors, containers and
        `LocalSerializedTensor` is refused (``weights_only``).

        Raises:
            PayloadError: `data` is not such a payload.
        """
        try:
            with torch.serialization.safe_globals([LocalSerializedTensor]):
                return torch.load(io.BytesIO(data), weights_only=True)
        except Exception as error:
            raise PayloadError(
                "not a torch.save payload of tensors, containers and LocalSerializedTensor "
                f"records: {type(error).__name__}: {str(error)[:200]}"
            ) from error


def decode_named_tensors(entry: Any, rank: int = 0) -> list[tuple[str, torch.Tensor]]:
    """The ``(name, tensor)`` pairs of one ``serialized_named_tensors`` entry, each tensor the
    value of tensor-parallel `rank`.

    Raises:
        PayloadError: `entry` is not base64 text of a list of ``(str,
            LocalSerializedTensor)`` whose values hold a tensor at `rank`.
    """
    if not isinstance(entry, str):
        raise PayloadError(f"a serialized_named_tensors entry must be a string, got {entry!r:.80}")
    try:
        raw = base64.b64decode(entry, validate=True)
    except binascii.Error as error:
        raise PayloadError(f"a serialized_named_tensors entry is not base64: {error}") from error
    records = MultiprocessingSerializer.deserialize(raw)
    if not isinstance(records, list):
        raise PayloadError(f"expected a list of (name, LocalSerializedTensor), got {records!r:.80}")
    named = []
    for record in records:
        if not (
            isinstance(record, tuple)
            and len(record) == 2
            and isinstance(record[0], str)
            and isinstance(record[1], LocalSerializedTensor)
        ):
            raise PayloadError(f"expected (name, LocalSerializedTensor), got {record!r:.80}")
        name, serialized = record
        if not 0 <= rank < len(serialized.values):
            raise PayloadError(
                f"{name}: no value for tensor-parallel rank {rank} "
                f"({len(serialized.values)} values)"
            )
        tensor = MultiprocessingSerializer.deserialize(serialized.values[rank])
        if not isinstance(tensor, torch.Tensor):
            raise PayloadError(f"{name}: the value is not a tensor but {type(tensor).__name__}")
        named.append((name, tensor))
    return named
