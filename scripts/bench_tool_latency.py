r"""Latency of running ``print(1)`` through a Python tool: xpgym's sandbox vs GEM vs a bare spawn.

Usage:
    python scripts/bench_tool_latency.py             # full run (about 1 minute on 2 cores)
    python scripts/bench_tool_latency.py --quick     # smoke run: 2 rounds, fewer calls
    python scripts/bench_tool_latency.py --no-gem    # without GEM (no virtualenv needed)

What is timed, one call each (wall clock from the call to its result):

* ``bare_spawn``: ``subprocess.run([python, "-c", "print(1)"], capture_output=True)`` with
  GEM's venv interpreter (what GEM's tool spawns, and GEM's own baseline reference), or
  without GEM the sandbox's interpreter: the floor for a tool that starts a process per call;
* ``gem_tool``: gem-llm 0.1.0's ``PythonCodeTool().execute_action("<python>print(1)</python>")``
  (unsandboxed: ``subprocess.run(["python", "-c", code])`` in a temp dir), in GEM's own
  virtualenv (``~/.cache/xpgym-bench/gem-venv``, created by ``scripts/bench_vs_gem.py``'s
  `ensure_gem_venv` on first use), timed inside a worker process of that venv;
* ``xpgym_sandbox``: ``Sandbox().run_python("print(1)")`` (bubblewrap, namespaces, rlimits);
* ``xpgym_tool``: ``PythonTool.execute(PythonTool.parse("<python>print(1)</python>"))``, the
  same through the tool (parsing and observation included);
* ``bwrap_spawn``: the naive design xpgym does not use: a fresh ``bwrap`` (same read-only
  mounts, ``--unshare-all``) starting a fresh ``python -I -S -c "print(1)"`` per call
  (``-S``: without ``site``, the fastest start this design can have).

Each is measured alone (one thread, `calls` calls) and with 16 concurrent callers (16 threads,
`calls_per_thread` calls each); p50 and p99 are taken over the calls of a round, and
throughput is calls per second of the concurrent round. Rounds are interleaved (every
measurement once per round, `rounds` rounds), so a noisy stretch on a shared machine hits
every configuration alike; the table shows the median over rounds with min-max.

Targets (``docs/benchmarks.md``): sandboxed p50 alone no slower than GEM's unsandboxed tool,
and at most 1.5x a bare spawn. Results go to ``results/bench_tool_latency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))

import bench_vs_gem  # noqa: E402  (the GEM virtualenv logic lives there)

from xpgym.core.sandbox import Sandbox, SandboxLimits  # noqa: E402
from xpgym.core.sandbox import host as sandbox_host  # noqa: E402
from xpgym.core.tools.python import PythonTool  # noqa: E402

DEFAULT_OUTPUT = REPO / "results" / "bench_tool_latency.json"
CONCURRENCY = 16
TARGET_OVER_GEM = 1.0
CEILING_OVER_BARE = 1.5
ORDER = ("bare_spawn", "gem_tool", "xpgym_sandbox", "xpgym_tool", "bwrap_spawn")

GEM_WORKER = r'''
"""Times GEM's PythonCodeTool: one JSON job per stdin line, one JSON answer per line."""
import contextlib, io, json, sys, threading, time

with contextlib.redirect_stdout(io.StringIO()):
    from gem.tools.python_code_tool import PythonCodeTool

tool = PythonCodeTool()


def call():
    start = time.perf_counter()
    observation = tool.execute_action("<python>print(1)</python>")[2]
    elapsed = time.perf_counter() - start
    if "1" not in observation:
        raise RuntimeError(f"unexpected GEM observation {observation!r}")
    return elapsed


for line in sys.stdin:
    job = json.loads(line)
    samples, lock = [], threading.Lock()

    def work():
        local = [call() for _ in range(job["calls"])]
        with lock:
            samples.extend(local)

    start = time.perf_counter()
    threads = [threading.Thread(target=work) for _ in range(job["threads"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps({"samples": samples, "wall": time.perf_counter() - start}), flush=True)
'''


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-quantile (0..1) of `values`, linear interpolation between order statistics."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def run_threads(call: Callable[[], Any], calls: int, threads: int) -> dict[str, Any]:
    """`threads` threads making `calls` calls each; every call's latency and the wall time."""
    samples: list[float] = []
    lock = threading.Lock()

    def work() -> None:
        local = []
        for _ in range(calls):
            start = time.perf_counter()
            call()
            local.append(time.perf_counter() - start)
        with lock:
            samples.extend(local)

    start = time.perf_counter()
    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return {"samples": samples, "wall": time.perf_counter() - start}


def summarize_round(result: dict[str, Any]) -> dict[str, float]:
    samples = result["samples"]
    return {
        "p50_ms": percentile(samples, 0.5) * 1e3,
        "p99_ms": percentile(samples, 0.99) * 1e3,
        "calls_per_s": len(samples) / result["wall"],
    }


class GemWorker:
    """A long-lived process in GEM's venv that times its tool on request."""

    def __init__(self, python: Path, workdir: str) -> None:
        script = Path(workdir) / "gem_worker.py"
        script.write_text(GEM_WORKER)
        self.proc = subprocess.Popen(
            [str(python), str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=workdir,  # GEM makes its temp dirs in the working directory
            env=bench_vs_gem.subprocess_env(python),
        )

    def run(self, calls: int, threads: int) -> dict[str, Any]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"calls": calls, "threads": threads}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the GEM worker died (see its stderr above)")
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def bwrap_spawn_command() -> list[str]:
    """A fresh bubblewrap sandbox (xpgym's read-only mounts) around a fresh interpreter."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SystemExit("bwrap is not installed (apt-get install bubblewrap)")
    mounts = sandbox_host.bwrap_mount_args(())
    python = sandbox_host.interpreter()
    namespaces = ["--unshare-all", "--die-with-parent", "--new-session"]
    return [bwrap, *namespaces, *mounts, "--", python, "-I", "-S", "-c", "print(1)"]


def measurements(
    args: argparse.Namespace, workdir: str
) -> tuple[dict[str, Callable[..., Any]], Callable[[], None]]:
    """Name -> ``run(calls, threads)`` for every configuration measured, and a cleanup."""
    python = args.bare_python
    sandbox = Sandbox(limits=SandboxLimits(), pool_size=args.pool_size)
    tool = PythonTool(sandbox)
    action = "<python>print(1)</python>"
    bwrap = bwrap_spawn_command()

    def bare() -> None:
        subprocess.run([python, "-c", "print(1)"], capture_output=True, check=True)

    def sandboxed() -> None:
        assert sandbox.run_python("print(1)").stdout == "1\n"

    def through_tool() -> None:
        assert tool.execute(tool.parse(action)).observation == "1\n"

    def bwrap_spawn() -> None:
        assert subprocess.run(bwrap, capture_output=True, check=True).stdout == b"1\n"

    runners: dict[str, Callable[..., Any]] = {
        "bare_spawn": lambda calls, threads: run_threads(bare, calls, threads),
        "xpgym_sandbox": lambda calls, threads: run_threads(sandboxed, calls, threads),
        "xpgym_tool": lambda calls, threads: run_threads(through_tool, calls, threads),
        "bwrap_spawn": lambda calls, threads: run_threads(bwrap_spawn, calls, threads),
    }
    cleanups = [sandbox.close]
    if args.gem_python is not None:
        worker = GemWorker(args.gem_python, workdir)
        runners["gem_tool"] = worker.run
        cleanups.append(worker.close)

    def cleanup() -> None:
        for close in cleanups:
            close()

    return {name: runners[name] for name in ORDER if name in runners}, cleanup


def aggregate(rounds: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    keys = rounds[0].keys()
    return {
        key: {
            "min": min(r[key] for r in rounds),
            "median": statistics.median(r[key] for r in rounds),
            "max": max(r[key] for r in rounds),
        }
        for key in keys
    }


def format_table(results: dict[str, Any]) -> str:
    """Markdown: one row per configuration, median (min-max) over rounds."""

    def cell(entry: dict[str, float] | None) -> str:
        if entry is None:
            return "-"
        return f"**{entry['median']:.1f}** ({entry['min']:.1f}-{entry['max']:.1f})"

    lines = [
        "| Measurement | alone p50 (ms) | alone p99 (ms) | 16 concurrent p50 (ms) | "
        "16 concurrent p99 (ms) | 16 concurrent calls/s |",
        "|---|---|---|---|---|---|",
    ]
    for name in ORDER:
        if name not in results:
            continue
        alone, conc = results[name]["alone"], results[name]["concurrent"]
        lines.append(
            f"| `{name}` | {cell(alone['p50_ms'])} | {cell(alone['p99_ms'])} | "
            f"{cell(conc['p50_ms'])} | {cell(conc['p99_ms'])} | {cell(conc['calls_per_s'])} |"
        )
    return "\n".join(lines)


def targets(results: dict[str, Any]) -> list[str]:
    """PASS/FAIL lines for the targets, on medians of the alone p50."""

    def p50(name: str) -> float | None:
        entry = results.get(name)
        return entry["alone"]["p50_ms"]["median"] if entry else None

    ours, gem, bare = p50("xpgym_sandbox"), p50("gem_tool"), p50("bare_spawn")
    lines = []
    if ours is not None and gem is not None:
        verdict = "PASS" if ours <= TARGET_OVER_GEM * gem else "FAIL"
        lines.append(f"{verdict}: sandbox p50 {ours:.2f} ms vs GEM's unsandboxed {gem:.2f} ms")
    if ours is not None and bare is not None:
        verdict = "PASS" if ours <= CEILING_OVER_BARE * bare else "FAIL"
        ratio = ours / bare
        lines.append(
            f"{verdict}: sandbox p50 is {ratio:.2f}x a bare spawn (ceiling {CEILING_OVER_BARE}x)"
        )
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--calls", type=int, default=50, help="calls per round, alone")
    parser.add_argument(
        "--calls-per-thread", type=int, default=8, help="calls per thread, 16 concurrent"
    )
    parser.add_argument("--pool-size", type=int, default=4, help="Sandbox(pool_size=...)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 rounds, 10 calls")
    parser.add_argument("--no-gem", action="store_true", help="skip GEM's tool")
    parser.add_argument(
        "--gem-venv", type=Path, default=bench_vs_gem.default_gem_venv(), help="GEM's venv"
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="JSON results")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.calls, args.calls_per_thread = 2, 10, 2
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.gem_python = None
    args.bare_python = sandbox_host.interpreter()
    if not args.no_gem:
        base = getattr(sys, "_base_executable", sys.executable)
        args.gem_python = bench_vs_gem.ensure_gem_venv(args.gem_venv.expanduser(), base)
        args.bare_python = str(args.gem_python)
    raw: dict[str, dict[str, list[dict[str, float]]]] = {}
    started = time.perf_counter()
    machine = bench_vs_gem.machine_info()
    with tempfile.TemporaryDirectory(prefix="bench-tool-latency-") as workdir:
        runners, cleanup = measurements(args, workdir)
        for run in runners.values():  # warm-up, untimed
            run(3, 1)
            run(1, CONCURRENCY)
        for round_index in range(args.rounds):
            for name, run in runners.items():
                alone = summarize_round(run(args.calls, 1))
                concurrent = summarize_round(run(args.calls_per_thread, CONCURRENCY))
                raw.setdefault(name, {"alone": [], "concurrent": []})
                raw[name]["alone"].append(alone)
                raw[name]["concurrent"].append(concurrent)
                print(
                    f"round {round_index + 1}/{args.rounds} {name}: alone p50 "
                    f"{alone['p50_ms']:.2f} ms, 16 concurrent p50 {concurrent['p50_ms']:.2f} ms",
                    flush=True,
                )
        cleanup()
    results = {
        name: {mode: aggregate(rounds) for mode, rounds in modes.items()}
        for name, modes in raw.items()
    }
    report = {
        "meta": {
            "machine": machine,
            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
            "elapsed_s": round(time.perf_counter() - started, 1),
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
        },
        "results": results,
        "rounds": raw,
        "targets": targets(results),
    }
    print()
    print(format_table(results))
    print()
    for line in report["targets"]:
        print(line)
    load = machine["loadavg_1_5_15min"][0], *report["meta"]["loadavg_at_end"]
    print(f"\nload average: {load[0]} at start, {load[1]} / {load[2]} / {load[3]} at end")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.output} ({report['meta']['elapsed_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
