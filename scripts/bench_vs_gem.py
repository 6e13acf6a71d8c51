r"""Benchmark xpgym against GEM (gem-llm==0.1.0) on the same workloads, in one run.

Usage:
    python scripts/bench_vs_gem.py                 # full run (about 7 minutes on 2 cores)
    python scripts/bench_vs_gem.py --quick         # smoke run: 10x fewer steps, 3 repeats
    python scripts/bench_vs_gem.py --no-gem        # xpgym only (no GEM virtualenv needed)
    python scripts/bench_vs_gem.py --only single_guess   # one measurement (repeatable)

GEM lives in its own virtualenv (created on first use under ``--gem-venv``, default
``~/.cache/xpgym-bench/gem-venv``, or ``$XPGYM_BENCH_CACHE/gem-venv``; reused afterwards).
Every measurement runs in a fresh subprocess of the library's own interpreter, with that
venv's ``bin`` first on ``PATH`` and bytecode caching on for both (see `subprocess_env`);
the worker code (`WORKER_SOURCE`) imports nothing but the library under test, since GEM's
venv has no xpgym.

Workloads (same method as GEM's baseline in ``docs/benchmarks.md``; `repeats` each,
reported as min / median / max):

* import: wall time of ``python -c "import <lib>"`` (after one untimed run), and of
  ``python -c pass`` for reference;
* single env ``game:GuessTheNumber-v0-easy`` (both libraries: 1..10 in 4 turns), `steps`
  steps, reset on episode end;
* 64 such envs in a vector env (sync, thread; process for xpgym), `batch_steps` batch steps,
  SAME_STEP autoreset for both (GEM's default; xpgym's default NEXT_STEP is an extra row);
  the thread rows are xpgym's ``vectorization_mode="thread"`` and GEM's thread pool (its
  ``async_mode=True``; their keys, ``vec_guess_async`` and ``cpu_async``, keep GEM's name);
* CPU-heavy env: xpgym's ``tests/benchmarks/cpu_heavy_env.py`` (``bench:LatinSquare-v0``,
  reset about 300-500 us) in sync, thread and process vector envs; GEM's
  ``game:Sudoku-v0-easy`` (reset about 374 us) in sync and thread as its reference point.

Actions are random ``\boxed{...}`` strings drawn from ``random.Random(0)`` before timing.
Each subprocess warms up untimed (a tenth of the steps) and then times one repeat; the
repeats run in interleaved rounds (every measurement once per round), so that a noisy
stretch on a shared machine hits all configurations alike.
Results go to ``results/bench_vs_gem.json``; the table printed at the end is Markdown.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO / "tests" / "benchmarks"
DEFAULT_OUTPUT = REPO / "results" / "bench_vs_gem.json"
GEM_REQUIREMENT = "gem-llm==0.1.0"
GEM_VERSION = "0.1.0"
GUESS_ID = "game:GuessTheNumber-v0-easy"
CPU_ID = {"xpgym": "bench:LatinSquare-v0", "gem": "game:Sudoku-v0-easy"}
CPU_ACTION = {"xpgym": (3, 8), "gem": (3, 4)}  # (numbers per \boxed{}, each uniform 1..max)
LIBS = ("xpgym", "gem")

TARGET_IMPORT_MS = 150.0
TARGET_SYNC_OVER_SINGLE = 0.80
TARGET_THREAD_OVER_SYNC = 1.0
TARGET_THREAD_OVER_GEM_THREAD = 2.0
TARGET_PROCESS_OVER_SYNC = 1.0
TARGET_AHEAD_OF_GEM = 1.0
NOT_A_LIBRARY_ROW = ("python_startup",)
"""Rows that measure the venv, not the library: left out of "every row ahead of GEM"."""


def cache_dir() -> Path:
    """``$XPGYM_BENCH_CACHE``, else ``~/.cache/xpgym-bench``."""
    return Path(os.environ.get("XPGYM_BENCH_CACHE", "~/.cache/xpgym-bench")).expanduser()


def default_gem_venv() -> Path:
    """GEM's virtualenv: ``<cache_dir()>/gem-venv``."""
    return cache_dir() / "gem-venv"


# ---------------------------------------------------------------------------------------
# Worker: runs in the library's own interpreter; must import nothing but that library.
# ---------------------------------------------------------------------------------------

WORKER_SOURCE = r'''
"""bench_vs_gem worker: python worker.py '<job json>' <output path>."""
import contextlib
import io
import json
import random
import sys
import time


def actions(count, arity, high, seed=0):
    rng = random.Random(seed)
    return [
        "\\boxed{" + " ".join(str(rng.randint(1, high)) for _ in range(arity)) + "}"
        for _ in range(count)
    ]


def load(job):
    if job["lib"] == "gem":
        with contextlib.redirect_stdout(io.StringIO()):
            import gem
        return gem
    import xpgym
    if job["env_id"].startswith("bench:"):
        sys.path.insert(0, job["bench_dir"])
        import cpu_heavy_env
        cpu_heavy_env.register()
    return xpgym


def make_vec(lib, job):
    n, mode = job["num_envs"], job["mode"]
    if job["lib"] == "gem":
        with contextlib.redirect_stdout(io.StringIO()):  # GEM prints on make_vec
            vec = lib.make_vec([job["env_id"]] * n, async_mode=mode == "async", seed=0)
        if mode == "async":  # GEM's AsyncVectorEnv has no close()
            return vec, vec.thread_pool_executer.shutdown
        return vec, lambda: None
    # "async" is GEM's name for its thread pool; xpgym's is "thread" ("async" is refused)
    vec = lib.make_vec(
        job["env_id"], n, vectorization_mode="thread" if mode == "async" else mode,
        vector_kwargs={"autoreset_mode": job["autoreset"]},
    )
    return vec, vec.close


def env_config(env):
    env = getattr(env, "unwrapped", env)
    return {k: getattr(env, k, None) for k in ("min_number", "max_number", "max_turns")}


def run_single(lib, job):
    env = lib.make(job["env_id"])
    steps = job["steps"]
    acts = actions(steps, *job["action"])

    def loop(todo):
        episodes = 0
        step, reset = env.step, env.reset
        for action in todo:
            _, _, terminated, truncated, _ = step(action)
            if terminated or truncated:
                reset()
                episodes += 1
        return episodes

    env.reset(seed=0)
    loop(acts[: max(steps // 10, 100)])  # warm-up
    samples, episodes = [], []
    for _ in range(job["repeats"]):
        env.reset(seed=0)
        start = time.perf_counter()
        episodes.append(loop(acts))
        samples.append(steps / (time.perf_counter() - start))
    return {"samples": samples, "extra": {"episodes": episodes, "env_config": env_config(env)}}


def run_vec(lib, job):
    n, batch_steps = job["num_envs"], job["batch_steps"]
    flat = actions(n * batch_steps, *job["action"])
    batches = [flat[i * n : (i + 1) * n] for i in range(batch_steps)]
    start = time.perf_counter()
    vec, close = make_vec(lib, job)
    construct_s = time.perf_counter() - start
    try:
        vec.reset(seed=0)
        for batch in batches[: max(batch_steps // 10, 20)]:  # warm-up
            vec.step(batch)
        samples = []
        for _ in range(job["repeats"]):
            vec.reset(seed=0)
            step = vec.step
            start = time.perf_counter()
            for batch in batches:
                step(batch)
            samples.append(n * batch_steps / (time.perf_counter() - start))
    finally:
        close()
    return {"samples": samples, "extra": {"construct_s": construct_s}}


def run_reset(lib, job):
    env = lib.make(job["env_id"])
    env.reset(seed=0)
    for _ in range(50):  # warm-up
        env.reset()
    samples = []
    for _ in range(job["repeats"]):
        start = time.perf_counter()
        for _ in range(job["resets"]):
            env.reset()
        samples.append((time.perf_counter() - start) / job["resets"] * 1e6)
    return {"samples": samples, "extra": {}}


def main():
    job = json.loads(sys.argv[1])
    lib = load(job)
    result = {"single": run_single, "vec": run_vec, "reset": run_reset}[job["kind"]](lib, job)
    result["python"] = sys.version.split()[0]
    with open(sys.argv[2], "w") as out:
        json.dump(result, out)


if __name__ == "__main__":  # the process backend's spawned workers re-import this file
    main()
'''


# ---------------------------------------------------------------------------------------
# Plan: which measurements, with which parameters.
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One measurement of one library, run in one subprocess."""

    key: str
    """Measurement key in the results (e.g. ``"vec_guess_sync"``)."""
    lib: str
    kind: str
    """``"import"``, ``"single"``, ``"vec"`` or ``"reset"``."""
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.lib}: {self.key}"


@dataclass(frozen=True)
class Measurement:
    """How one measurement key is shown in the table."""

    key: str
    label: str
    unit: str
    higher_is_better: bool


MEASUREMENTS: tuple[Measurement, ...] = (
    Measurement("import", "`import <lib>`, fresh process (wall)", "ms", False),
    Measurement("python_startup", "`python -c pass`, reference (wall)", "ms", False),
    Measurement(
        "import_above_startup", "`import <lib>` minus median `python -c pass`", "ms", False
    ),
    Measurement("single_guess", "GuessTheNumber-easy, single env", "steps/s", True),
    Measurement("vec_guess_sync", "GuessTheNumber-easy, 64 envs, sync", "env-steps/s", True),
    Measurement("vec_guess_async", "GuessTheNumber-easy, 64 envs, thread", "env-steps/s", True),
    Measurement("vec_guess_process", "GuessTheNumber-easy, 64 envs, process", "env-steps/s", True),
    Measurement(
        "vec_guess_sync_next_step",
        "GuessTheNumber-easy, 64 envs, sync, NEXT_STEP (xpgym default)",
        "env-steps/s",
        True,
    ),
    Measurement("cpu_reset", "CPU-heavy env: one reset", "us", False),
    Measurement("cpu_single", "CPU-heavy env, single env", "steps/s", True),
    Measurement("cpu_sync", "CPU-heavy env, 64 envs, sync", "env-steps/s", True),
    Measurement("cpu_async", "CPU-heavy env, 64 envs, thread", "env-steps/s", True),
    Measurement("cpu_process", "CPU-heavy env, 64 envs, process", "env-steps/s", True),
)


JOB_KEYS: tuple[str, ...] = tuple(m.key for m in MEASUREMENTS if m.key != "import_above_startup")
"""The keys of measurements that are run (``import_above_startup`` is derived)."""


def plan(
    *,
    steps: int,
    batch_steps: int,
    cpu_batch_steps: int,
    num_envs: int,
    resets: int,
    libs: Sequence[str] = LIBS,
) -> list[Job]:
    """The jobs of one round, each workload measured for every library back to back."""
    common = {"bench_dir": str(BENCH_DIR)}
    guess = {**common, "env_id": GUESS_ID, "action": (1, 10)}
    jobs: list[Job] = []

    def add(key: str, kind: str, only: Iterable[str] = LIBS, **params: Any) -> None:
        for lib in libs:
            if lib in only:
                cpu = {"env_id": CPU_ID[lib], "action": CPU_ACTION[lib]}
                merged = {**common, **(cpu if key.startswith("cpu") else {}), **params}
                jobs.append(Job(key, lib, kind, merged))

    add("import", "import")
    add("python_startup", "import")
    add("single_guess", "single", **guess, steps=steps)
    vec = {**guess, "num_envs": num_envs, "batch_steps": batch_steps, "autoreset": "SameStep"}
    add("vec_guess_sync", "vec", **vec, mode="sync")
    add("vec_guess_async", "vec", **vec, mode="async")
    add("vec_guess_process", "vec", ("xpgym",), **vec, mode="process")
    add(
        "vec_guess_sync_next_step",
        "vec",
        ("xpgym",),
        **{**vec, "autoreset": "NextStep"},
        mode="sync",
    )
    add("cpu_reset", "reset", resets=resets)
    add("cpu_single", "single", steps=steps)
    cpu_vec = {"num_envs": num_envs, "batch_steps": cpu_batch_steps, "autoreset": "SameStep"}
    add("cpu_sync", "vec", **cpu_vec, mode="sync")
    add("cpu_async", "vec", **cpu_vec, mode="async")
    add("cpu_process", "vec", ("xpgym",), **cpu_vec, mode="process")
    return jobs


# ---------------------------------------------------------------------------------------
# Pure parts: statistics, ratios, targets and the table (unit-tested without a network).
# ---------------------------------------------------------------------------------------


def describe(samples: Sequence[float]) -> dict[str, Any]:
    """``{"min", "median", "max", "samples"}`` of a non-empty list of samples."""
    if not samples:
        raise ValueError("no samples")
    return {
        "min": min(samples),
        "median": statistics.median(samples),
        "max": max(samples),
        "samples": list(samples),
    }


def _shifted(entry: Mapping[str, Any], delta: float) -> dict[str, Any]:
    """`entry`'s min/median/max (and samples) plus `delta`."""
    return describe([x + delta for x in entry["samples"]])


def _median(results: Mapping[str, Any], key: str, lib: str) -> float | None:
    entry = results.get("measurements", {}).get(key, {}).get(lib)
    return None if entry is None else float(entry["median"])


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def _ahead(results: Mapping[str, Any], m: Measurement) -> float | None:
    """How many times better xpgym's median is than GEM's (> 1: xpgym is ahead), whichever
    direction is better: ours/GEM for rates, GEM/ours for times."""
    ours, gem = _median(results, m.key, "xpgym"), _median(results, m.key, "gem")
    return _ratio(ours, gem) if m.higher_is_better else _ratio(gem, ours)


def summarize(results: Mapping[str, Any]) -> dict[str, Any]:
    """Rows, ratios and target verdicts from a results dict.

    Args:
        results: ``{"measurements": {key: {lib: describe(...)}}}`` (other keys ignored).

    Returns:
        ``{"rows": [...], "ratios": [...], "targets": [...]}``. A row has the measurement's
        `key`, `label`, `unit`, `higher_is_better`, the per-library stats (or `None`),
        ``ours_over_gem`` (ratio of medians) and ``ahead`` (`_ahead`: > 1 when xpgym is
        better, whichever direction is better). A ratio has `name`, `lib` and `value`. A target
        has `name`, `value`, `threshold`, `comparison` and `met` (`None`: not measured).
    """
    measurements = dict(results.get("measurements", {}))
    derived = {
        lib: _shifted(measurements["import"][lib], -measurements["python_startup"][lib]["median"])
        for lib in LIBS
        if lib in measurements.get("import", {}) and lib in measurements.get("python_startup", {})
    }
    if derived:
        measurements["import_above_startup"] = derived
        results = {**results, "measurements": measurements}
    rows = []
    for m in MEASUREMENTS:
        if m.key not in measurements:
            continue
        per_lib = {lib: measurements[m.key].get(lib) for lib in LIBS}
        rows.append(
            {
                "key": m.key,
                "label": m.label,
                "unit": m.unit,
                "higher_is_better": m.higher_is_better,
                **per_lib,
                "ours_over_gem": _ratio(
                    _median(results, m.key, "xpgym"), _median(results, m.key, "gem")
                ),
                "ahead": _ahead(results, m),
            }
        )
    ratio_specs = [
        ("sync / single (GuessTheNumber)", "vec_guess_sync", "single_guess"),
        ("thread / sync (GuessTheNumber)", "vec_guess_async", "vec_guess_sync"),
        ("process / sync (GuessTheNumber)", "vec_guess_process", "vec_guess_sync"),
        ("thread / sync (CPU-heavy)", "cpu_async", "cpu_sync"),
        ("process / sync (CPU-heavy)", "cpu_process", "cpu_sync"),
    ]
    ratios = []
    for name, top, bottom in ratio_specs:
        for lib in LIBS:
            value = _ratio(_median(results, top, lib), _median(results, bottom, lib))
            if value is not None:
                ratios.append({"name": name, "lib": lib, "value": value})
    xp = "xpgym"
    checks = [
        ("`import xpgym` <= 150 ms", _median(results, "import", xp), TARGET_IMPORT_MS, "<="),
        (
            "sync >= 80% of single-env rate",
            _ratio(_median(results, "vec_guess_sync", xp), _median(results, "single_guess", xp)),
            TARGET_SYNC_OVER_SINGLE,
            ">=",
        ),
        (
            "thread not slower than sync (pure-Python env)",
            _ratio(_median(results, "vec_guess_async", xp), _median(results, "vec_guess_sync", xp)),
            TARGET_THREAD_OVER_SYNC,
            ">=",
        ),
        (
            "thread >= 2x GEM's thread pool",
            _ratio(
                _median(results, "vec_guess_async", xp), _median(results, "vec_guess_async", "gem")
            ),
            TARGET_THREAD_OVER_GEM_THREAD,
            ">=",
        ),
        (
            "process faster than sync (CPU-heavy env)",
            _ratio(_median(results, "cpu_process", xp), _median(results, "cpu_sync", xp)),
            TARGET_PROCESS_OVER_SYNC,
            ">",
        ),
    ]
    aheads = [
        row["ahead"]
        for row in rows
        if row["ahead"] is not None and row["key"] not in NOT_A_LIBRARY_ROW
    ]
    checks.append(
        (
            "every row ahead of GEM (the closest row)",
            min(aheads, default=None),
            TARGET_AHEAD_OF_GEM,
            ">=",
        )
    )
    targets = []
    for name, value, threshold, comparison in checks:
        met = None
        if value is not None:
            met = {"<=": value <= threshold, ">=": value >= threshold, ">": value > threshold}[
                comparison
            ]
        targets.append(
            {
                "name": name,
                "value": value,
                "threshold": threshold,
                "comparison": comparison,
                "met": met,
            }
        )
    return {"rows": rows, "ratios": ratios, "targets": targets}


def _fmt_number(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}"


def _fmt_stats(entry: Mapping[str, Any] | None) -> str:
    if entry is None:
        return "n/a"
    return " / ".join(
        ("**" + _fmt_number(entry[k]) + "**") if k == "median" else _fmt_number(entry[k])
        for k in ("min", "median", "max")
    )


def format_table(summary: Mapping[str, Any]) -> str:
    """Markdown tables: measurements (min / **median** / max), ratios, and targets."""
    lines = [
        "| Measurement | Unit | xpgym min / median / max | GEM min / median / max | ours/GEM "
        "| xpgym ahead |",
        "|---|---|---|---|---|---|",
    ]
    for row in summary["rows"]:
        ratio, ahead = row["ours_over_gem"], row["ahead"]
        direction = "higher" if row["higher_is_better"] else "lower"
        ratio_text = "n/a" if ratio is None else f"{ratio:.2f}x ({direction} is better)"
        ahead_text = "n/a" if ahead is None else f"{ahead:.2f}x"
        lines.append(
            f"| {row['label']} | {row['unit']} | {_fmt_stats(row['xpgym'])} | "
            f"{_fmt_stats(row['gem'])} | {ratio_text} | {ahead_text} |"
        )
    lines += ["", "| Ratio of medians | xpgym | GEM |", "|---|---|---|"]
    names = list(dict.fromkeys(r["name"] for r in summary["ratios"]))
    for name in names:
        by_lib = {r["lib"]: r["value"] for r in summary["ratios"] if r["name"] == name}
        cells = [f"{by_lib[lib]:.2f}" if lib in by_lib else "n/a" for lib in LIBS]
        lines.append(f"| {name} | {cells[0]} | {cells[1]} |")
    lines += ["", "| Target | Measured | Needed | Met |", "|---|---|---|---|"]
    for target in summary["targets"]:
        value, threshold = target["value"], target["threshold"]
        is_ms = target["name"].startswith("`import")
        measured = "n/a" if value is None else (f"{value:.0f} ms" if is_ms else f"{value:.2f}x")
        needed = f"{threshold:.0f} ms" if is_ms else f"{threshold:.2f}x"
        verdict = {True: "yes", False: "**no**", None: "not measured"}[target["met"]]
        lines.append(
            f"| {target['name']} | {measured} | {target['comparison']} {needed} | {verdict} |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# Running: virtualenvs, subprocesses, progress.
# ---------------------------------------------------------------------------------------


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def subprocess_env(python: Path, source: Path | None = None) -> dict[str, str]:
    """The environment for a worker: its venv's ``bin`` first on PATH, PYTHONPATH only
    `source` (none without it), and bytecode caching on (into ``<cache_dir()>/pycache``),
    for both libraries alike.

    xpgym's workers get ``source=REPO``, so they measure the xpgym of this checkout (a git
    worktree, say), not whichever checkout the venv's editable install points at.

    Bytecode caching matters for import times: with ``PYTHONDONTWRITEBYTECODE=1`` (set on
    some machines) an editable install such as xpgym's has no ``.pyc`` files and every
    import compiles it from source, while pip-installed GEM has them. With a shared
    ``PYTHONPYCACHEPREFIX`` the untimed first run compiles and later runs load bytecode,
    as from a regular installation, without writing into the source tree.
    """
    dropped = ("PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    if source is not None:
        env["PYTHONPATH"] = str(source)
    env["VIRTUAL_ENV"] = str(python.parent.parent)
    env["PYTHONPYCACHEPREFIX"] = str(cache_dir() / "pycache")
    return env


def ensure_gem_venv(venv: Path, base_python: str) -> Path:
    """Create `venv` with `GEM_REQUIREMENT` unless it already has it; return its python."""
    python = venv_python(venv)
    check = (
        f"import importlib.metadata as m, sys; sys.exit(m.version('gem-llm') != {GEM_VERSION!r})"
    )
    if python.exists() and subprocess.run([str(python), "-c", check], check=False).returncode == 0:
        print(f"reusing {GEM_REQUIREMENT} in {venv}")
        return python
    print(f"creating {venv} with {GEM_REQUIREMENT} (about 30 s)...")
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", GEM_REQUIREMENT], check=True)
    return python


def time_import(
    python: Path,
    code: str,
    repeats: int,
    cwd: str,
    *,
    warmup: bool = True,
    source: Path | None = None,
) -> list[float]:
    """Wall ms of ``python -c code`` in fresh processes (after one untimed run if `warmup`);
    `source` as in `subprocess_env`."""
    env = subprocess_env(python, source)
    command = [str(python), "-c", code]
    if warmup:
        subprocess.run(command, check=True, env=env, cwd=cwd, capture_output=True)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(command, check=True, env=env, cwd=cwd, capture_output=True)
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def run_job(
    job: Job, python: Path, workdir: str, *, repeats: int = 1, warmup: bool = True
) -> dict[str, Any]:
    """Run one job (`repeats` timed repeats) in a fresh `python` subprocess.

    Returns:
        ``{"samples": [...], "extra": {...}}``.
    """
    source = REPO if job.lib == "xpgym" else None
    if job.kind == "import":
        code = "pass" if job.key == "python_startup" else f"import {job.lib}"
        samples = time_import(python, code, repeats, workdir, warmup=warmup, source=source)
        return {"samples": samples, "extra": {}}
    worker = Path(workdir) / "bench_worker.py"
    output = Path(workdir) / "result.json"
    spec = json.dumps({**job.params, "repeats": repeats, "lib": job.lib, "kind": job.kind})
    proc = subprocess.run(
        [str(python), str(worker), spec, str(output)],
        env=subprocess_env(python, source),
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{job.label} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    result = json.loads(output.read_text())
    output.unlink()
    return {"samples": result["samples"], "extra": {**result["extra"], "python": result["python"]}}


@contextlib.contextmanager
def progress(total: int) -> Iterator[Callable[[str], None]]:
    """Yields ``report(line)``: a tqdm bar on a terminal if tqdm is installed, else one
    printed line per measurement."""
    try:
        if not sys.stderr.isatty():  # a bar is noise in a log file: print lines instead
            raise ImportError
        from tqdm import tqdm
    except ImportError:
        count = 0

        def report(line: str) -> None:
            nonlocal count
            count += 1
            print(f"[{count}/{total}] {line}", flush=True)

        yield report
        return
    with tqdm(total=total, unit="job", dynamic_ncols=True) as bar:

        def report(line: str) -> None:
            bar.write(line)
            bar.update(1)

        yield report


def machine_info() -> dict[str, Any]:
    """nproc, load average (other processes skew results), CPU model, OS, Python version."""
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": os.cpu_count(),
        "loadavg_1_5_15min": [round(x, 2) for x in os.getloadavg()],
        "cpu_model": model,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def check_same_workload(results: Mapping[str, Any]) -> list[str]:
    """Notes on whether both GuessTheNumber-easy envs have the same range and turns."""
    single = results.get("measurements", {}).get("single_guess", {})
    configs = {lib: single[lib]["extra"][0].get("env_config") for lib in LIBS if lib in single}
    if len(configs) < 2:
        return []
    if configs["xpgym"] == configs["gem"]:
        return [f"{GUESS_ID}: same settings in both libraries: {configs['xpgym']}"]
    return [f"{GUESS_ID} DIFFERS: xpgym {configs['xpgym']} vs GEM {configs['gem']}"]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per measurement")
    parser.add_argument("--steps", type=int, default=20_000, help="single-env steps per repeat")
    parser.add_argument(
        "--batch-steps", type=int, default=2_000, help="vector batch steps per repeat"
    )
    parser.add_argument(
        "--cpu-batch-steps",
        type=int,
        default=None,
        help="batch steps, CPU-heavy env (default: --batch-steps)",
    )
    parser.add_argument("--num-envs", type=int, default=64, help="sub-envs per vector env")
    parser.add_argument("--resets", type=int, default=2_000, help="resets per repeat (reset cost)")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 10x fewer steps, 3 repeats"
    )
    parser.add_argument("--gem-venv", type=Path, default=default_gem_venv(), help="GEM's venv")
    parser.add_argument("--no-gem", action="store_true", help="measure xpgym only")
    parser.add_argument(
        "--only",
        action="append",
        choices=JOB_KEYS,
        metavar="KEY",
        help=f"measure only this key (repeatable; one of {', '.join(JOB_KEYS)})",
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="JSON results file")
    args = parser.parse_args(argv)
    if args.cpu_batch_steps is None:
        args.cpu_batch_steps = args.batch_steps
    if args.quick:
        args.repeats = min(args.repeats, 3)
        args.steps = max(args.steps // 10, 100)
        args.batch_steps = max(args.batch_steps // 10, 20)
        args.cpu_batch_steps = max(args.cpu_batch_steps // 10, 20)
        args.resets = max(args.resets // 10, 50)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run every measurement, print the tables, write the JSON; exit 0 (targets or not)."""
    args = parse_args(argv)
    ours = Path(sys.executable)
    pythons = {"xpgym": ours}
    libs: tuple[str, ...] = ("xpgym",)
    if not args.no_gem:
        base = getattr(sys, "_base_executable", sys.executable)
        pythons["gem"] = ensure_gem_venv(args.gem_venv.expanduser(), base)
        libs = LIBS
    jobs = plan(
        steps=args.steps,
        batch_steps=args.batch_steps,
        cpu_batch_steps=args.cpu_batch_steps,
        num_envs=args.num_envs,
        resets=args.resets,
        libs=libs,
    )
    if args.only:
        jobs = [job for job in jobs if job.key in args.only]
    results: dict[str, Any] = {
        "meta": {
            "machine": machine_info(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "pythons": {lib: str(p) for lib, p in pythons.items()},
            "gem_requirement": GEM_REQUIREMENT,
            "cpu_heavy_env": CPU_ID,
        },
        "measurements": {},
    }
    started = time.perf_counter()
    samples: dict[tuple[str, str], list[float]] = {(job.key, job.lib): [] for job in jobs}
    extras: dict[tuple[str, str], list[dict[str, Any]]] = {(job.key, job.lib): [] for job in jobs}
    with (
        tempfile.TemporaryDirectory(prefix="bench-vs-gem-") as workdir,
        progress(len(jobs) * args.repeats) as report,
    ):
        (Path(workdir) / "bench_worker.py").write_text(WORKER_SOURCE)
        # Interleaved rounds: every job once per round, so that a noisy stretch of time
        # (other processes on the machine) hits every configuration alike.
        for round_index in range(args.repeats):
            for job in jobs:
                python = pythons[job.lib]
                result = run_job(job, python, workdir, warmup=round_index == 0)
                samples[job.key, job.lib] += result["samples"]
                extras[job.key, job.lib].append(result["extra"])
                value = _fmt_number(result["samples"][0])
                report(
                    f"round {round_index + 1}/{args.repeats} {job.label}: {value} {_unit(job.key)}"
                )
    for (key, lib), values in samples.items():
        entry = {**describe(values), "extra": extras[key, lib]}
        results["measurements"].setdefault(key, {})[lib] = entry
    results["meta"]["elapsed_s"] = round(time.perf_counter() - started, 1)
    results["meta"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    summary = summarize(results)
    results["summary"] = {"ratios": summary["ratios"], "targets": summary["targets"]}
    results["notes"] = check_same_workload(results)
    print()
    print(format_table(summary))
    for note in results["notes"]:
        print(f"\nnote: {note}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2))
    load = (results["meta"]["machine"]["loadavg_1_5_15min"][0], *results["meta"]["loadavg_at_end"])
    print(
        f"\nload average: {load[0]} at start, {load[1]:.2f} / {load[2]:.2f} / {load[3]:.2f} at end"
    )
    print(f"wrote {args.output} ({results['meta']['elapsed_s']} s)")
    return 0


def _unit(key: str) -> str:
    return next((m.unit for m in MEASUREMENTS if m.key == key), "")


if __name__ == "__main__":
    sys.exit(main())
