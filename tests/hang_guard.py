"""Waiting in tests without asserting on the clock (importable as `hang_guard`).

A test shows ordering by events (a barrier, a gate, a state it polls), never by how long
something took. Where it must wait for something that normally takes milliseconds, it waits
at most `HANG_GUARD_S`: reaching that limit means the code under test is broken, and the test
fails instead of hanging. The limit is never the thing asserted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

HANG_GUARD_S = 60.0
"""Seconds a test waits for an event before giving up (generous for a loaded machine)."""


def wait_until(condition: Callable[[], T], interval_s: float = 0.02) -> T:
    """Call `condition` until it returns a truthy value or `HANG_GUARD_S` pass.

    Returns:
        The last value `condition` returned: truthy once it held, falsy if the wait gave
        up. Assert on it (``assert wait_until(lambda: x in seen)``).
    """
    deadline = time.monotonic() + HANG_GUARD_S
    while not (value := condition()) and time.monotonic() < deadline:
        time.sleep(interval_s)
    return value
