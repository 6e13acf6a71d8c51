"""Latency of the sandboxed Python tool (pytest-benchmark): ``pytest tests/benchmarks
--benchmark-only -k tool_latency``.

The default test run skips benchmarks (``--benchmark-skip`` in ``pyproject.toml``). Each
benchmark times one call of ``print(1)``: through `Sandbox.run_python`, through
`PythonTool.execute` (parsing and observation included), and, as the reference, a bare
``subprocess.run([sys.executable, "-c", "print(1)"])`` (the test's own interpreter, whose
start-up includes its ``site`` and ``.pth`` files); plus 16 calls at once from 16 threads.
pytest-benchmark reports min / median / max per call (or per batch of 16).

No target is asserted here. The targets (``docs/benchmarks.md``, "Sandboxed tool latency":
sandboxed p50 no slower than GEM's unsandboxed tool, at most 1.5x a bare spawn) are checked
by ``scripts/bench_tool_latency.py``, which also times GEM's tool in GEM's own virtualenv.
When the bare-spawn benchmark ran earlier in the session, the sandboxed ones record their
median's ratio to it in ``extra_info["over_bare_spawn"]``.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from xpgym.core.sandbox import Sandbox, SandboxUnavailableError
from xpgym.core.tools.python import PythonTool

ROUNDS = 50
CONCURRENCY = 16

_MEDIANS: dict[str, float] = {}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    try:
        box = Sandbox()
    except SandboxUnavailableError as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"no sandbox on this machine: {exc}")
    yield box
    box.close()


def _run(benchmark: Any, key: str, fn: Callable[[], Any]) -> None:
    benchmark.pedantic(fn, rounds=ROUNDS, warmup_rounds=3, iterations=1)
    median = benchmark.stats.stats.median
    _MEDIANS[key] = median
    benchmark.extra_info["median_ms"] = round(median * 1e3, 2)
    if not key.startswith("bare"):
        reference = _MEDIANS.get("bare_x16" if key.endswith("_x16") else "bare")
        if reference:
            benchmark.extra_info["over_bare_spawn"] = round(median / reference, 3)


def _concurrently(fn: Callable[[], Any]) -> Callable[[], None]:
    def batch() -> None:
        threads = [threading.Thread(target=fn) for _ in range(CONCURRENCY)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    return batch


def _bare() -> None:
    subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True, check=True)


def test_bare_spawn(benchmark: Any) -> None:
    """The reference: a fresh interpreter per call, no sandbox."""
    _run(benchmark, "bare", _bare)


def test_sandbox_run_python(benchmark: Any, sandbox: Sandbox) -> None:
    """`Sandbox.run_python("print(1)")`."""
    _run(benchmark, "sandbox", lambda: sandbox.run_python("print(1)"))


def test_python_tool_execute(benchmark: Any, sandbox: Sandbox) -> None:
    """`PythonTool.execute` of a parsed ``<python>print(1)</python>``."""
    tool = PythonTool(sandbox)
    action = "<python>print(1)</python>"
    _run(benchmark, "tool", lambda: tool.execute(tool.parse(action)))


def test_bare_spawn_16_concurrent(benchmark: Any) -> None:
    """16 bare spawns at once from 16 threads (one batch per round)."""
    _run(benchmark, "bare_x16", _concurrently(_bare))


def test_sandbox_16_concurrent(benchmark: Any, sandbox: Sandbox) -> None:
    """16 `run_python` calls at once from 16 threads (one batch per round)."""
    _run(benchmark, "sandbox_x16", _concurrently(lambda: sandbox.run_python("print(1)")))
