"""Settings for the whole test suite.

Hypothesis runs without its per-example deadline (200 ms by default): the deadline is a
wall-clock assertion that a busy machine fails ("Unreliable test timings"), and no property
test here is about speed (speed is measured in ``tests/benchmarks``).
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("xpgym", deadline=None)
settings.load_profile("xpgym")
