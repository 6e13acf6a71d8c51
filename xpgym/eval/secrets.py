"""Keeping the API key out of everything an evaluation writes.

The HTTP policy reads the key from the environment and sends it only in the
``Authorization`` header. A server may still echo it back (in an error body that ends up in
an exception message or a log line); `mask` and `masked_logs` replace it with ``***``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["MASK", "mask", "masked_logs"]

MASK = "***"


def mask(text: str, secrets: Sequence[str]) -> str:
    """`text` with every occurrence of each secret replaced by `MASK`."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


@contextlib.contextmanager
def masked_logs(secrets: Sequence[str]) -> Iterator[None]:
    """Mask `secrets` in the message of every log record made meanwhile (any logger, any
    thread), through the log record factory; the previous factory is restored on exit."""
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: logging reports it when the record is emitted
            return record
        masked = mask(message, secrets)
        if masked != message:
            record.msg, record.args = masked, None
        return record

    logging.setLogRecordFactory(factory)
    try:
        yield
    finally:
        logging.setLogRecordFactory(previous)
