"""Soak run: xpgym's processes and connections under load and random faults, for leaks.

For ``--duration-s`` seconds (default 600) it repeats one round of work, each round through
freshly built objects so that their construction and close are soaked too:

* a ``"process"`` vector env (2 workers, 4 sub-envs) and a ``"thread"`` one stepping
  ``game:GuessTheNumber-v0`` with random actions; with probability ``--fault-rate`` a worker
  process of the process env is SIGKILLed between two steps (the next step replaces it);
* sandboxed Python calls on one long-lived `Sandbox` (skipped, and said so in the report,
  where the sandbox cannot run); with probability ``--fault-rate`` its bubblewrap process is
  SIGKILLed between two calls (the next call starts a new zygote);
* a ``"ray"`` vector env (2 actors, 4 sub-envs) on a local Ray instance started once for the
  run (left out, and said so, where Ray is not installed or ``--no-ray``); with probability
  ``--fault-rate`` an actor process is SIGKILLed between two steps (the next step replaces
  it);
* a `RemoteEnv` episode against an env server in a child process; with probability
  ``--fault-rate`` the server is SIGKILLed mid-episode: the next step must end the episode as
  an infrastructure error (``remote_error``), and the server is started again on its port.

The first round injects every fault; later ones each with probability ``--fault-rate``.

Every ``--sample-every-s`` seconds (default 60) it samples this process's open file
descriptors, threads, child processes (all descendants, zombies included, that are there in
two readings half a second apart: `settled_children`), resident memory,
and the bytes under the run's private temp dir (``TMPDIR`` for this process and every child).
Ray's session directory (its own log files, a few per worker process it starts, kept for the
session; under that temp dir, or under ``RAY_TMPDIR`` where the caller set it) is sampled
apart, as ``ray_logs_mb``, and reported beside the verdict, not in it. It then fits a line
to each quantity over the second half of the run (least squares, per minute) and fails if a
slope is above that quantity's tolerance (`TOLERANCE_PER_MIN`) and the fitted rise over that
half above its jitter (`JITTER`): a steady state stays flat; a leak grows without bound. A
one-minute run can only catch fast leaks (its half is 30 s).

Prints a JSON report (samples, slopes, verdict) and writes it to ``--output`` if given; exits
1 if something grew. Usage::

    .venv/bin/python scripts/soak.py                            # 10 minutes
    .venv/bin/python scripts/soak.py --duration-s 60 --sample-every-s 10   # the CI version
"""

from __future__ import annotations

import argparse
import json
import multiprocessing.resource_tracker
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

METRICS = ("fds", "threads", "children", "rss_mb", "tmp_mb")
TOLERANCE_PER_MIN = {"fds": 1.0, "threads": 1.0, "children": 0.5, "rss_mb": 4.0, "tmp_mb": 0.5}
"""Largest slope (units per minute, over the second half) that counts as flat."""
JITTER = {"fds": 4.0, "threads": 2.0, "children": 2.0, "rss_mb": 8.0, "tmp_mb": 1.0}
"""Largest fitted rise over the second half that counts as noise (a connection still
closing, a call the sandbox builds ahead, an allocator's arena)."""

ENV_ID = "game:GuessTheNumber-v0"


def _bytes_under(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:  # removed while walking
                continue
    return total


SETTLE_S = 0.5
"""Seconds between the two readings of `settled_children`."""


def settled_children(process: Any, settle_s: float = SETTLE_S) -> set[int]:
    """The process ids of the descendants of `process` (a ``psutil.Process``; zombies
    included) that are there in two readings `settle_s` apart. A process starting or exiting
    at the moment of a sample (a closed vector env's worker on its way out, a worker Ray
    starts ahead) is not a leak: counted in one reading only, it made a one-minute run's
    last sample two or three higher than the others, enough to fit a slope. A leaked
    process stays, and a zombie nobody reaps too: both are counted."""
    first = {child.pid for child in process.children(recursive=True)}
    time.sleep(settle_s)
    return first & {child.pid for child in process.children(recursive=True)}


def ray_folder(tmp_dir: Path) -> Path:
    """Where a Ray instance started by this run keeps its session directories: Ray's rule on
    Linux, ``<RAY_TMPDIR>/ray`` where ``RAY_TMPDIR`` is set, else ``<TMPDIR>/ray``, which is
    ``<tmp_dir>/ray`` (the run sets ``TMPDIR`` to `tmp_dir`)."""
    return Path(os.environ.get("RAY_TMPDIR") or tmp_dir) / "ray"


def sample(tmp_dir: Path) -> dict[str, float]:
    """One sample of every quantity in `METRICS` for this process, and ``ray_logs_mb``: the
    bytes of Ray's session directories (`ray_folder`), which are Ray's own files (a few log
    files per worker process it starts, kept for the session), reported beside the verdict
    rather than in it; ``tmp_mb`` is the rest of the run's temp dir."""
    import psutil

    me = psutil.Process()
    ray = ray_folder(tmp_dir)
    ray_bytes = _bytes_under(ray)
    inside = ray.is_relative_to(tmp_dir)  # else Ray's files are not in the temp dir's bytes
    return {
        "fds": float(me.num_fds()),
        "threads": float(threading.active_count()),
        "children": float(len(settled_children(me))),
        "rss_mb": me.memory_info().rss / 2**20,
        "tmp_mb": (_bytes_under(tmp_dir) - (ray_bytes if inside else 0)) / 2**20,
        "ray_logs_mb": ray_bytes / 2**20,
    }


def slopes(
    samples: Sequence[dict[str, float]], metrics: Sequence[str] = METRICS
) -> dict[str, float]:
    """Least-squares slope per minute of each of `metrics` over the second half of
    `samples` (each has ``t_s``, seconds since the start); 0.0 with fewer than 3 samples
    there."""
    half = list(samples[len(samples) // 2 :])
    if len(half) < 3:
        return dict.fromkeys(metrics, 0.0)
    minutes = np.array([s["t_s"] for s in half]) / 60.0
    return {m: float(np.polyfit(minutes, [s[m] for s in half], 1)[0]) for m in metrics}


def grown(slope_per_min: dict[str, float], window_min: float) -> list[str]:
    """The metrics that grew over a second half of `window_min` minutes: slope above
    `TOLERANCE_PER_MIN` and a fitted rise (slope x window) above `JITTER`, so that a short
    run's window does not turn the jitter of one sample into a slope."""
    return [
        m
        for m in METRICS
        if slope_per_min[m] > TOLERANCE_PER_MIN[m] and slope_per_min[m] * window_min > JITTER[m]
    ]


def _worker_pids(before: set[int]) -> list[int]:
    import psutil

    return [p.pid for p in psutil.Process().children() if p.pid not in before]


def vector_round(rng: random.Random, fault_rate: float, faults: dict[str, int]) -> None:
    """A process and a thread vector env: reset, 6 steps, maybe a worker killed, close.
    `fault_rate` 1.0 always kills one."""
    import psutil

    import xpgym

    for mode in ("process", "thread"):
        before = {p.pid for p in psutil.Process().children()}
        vec = xpgym.make_vec(ENV_ID, num_envs=4, vectorization_mode=mode)
        try:
            vec.reset(seed=rng.randrange(2**31))
            for turn in range(6):
                if mode == "process" and turn == 3 and rng.random() < fault_rate:
                    os.kill(rng.choice(_worker_pids(before)), signal.SIGKILL)
                    faults["worker_killed"] += 1
                vec.step([f"\\boxed{{{rng.randint(1, 20)}}}" for _ in range(vec.num_envs)])
        finally:
            vec.close()


def sandbox_round(box: Any, rng: random.Random, fault_rate: float, faults: dict[str, int]) -> None:
    """Three sandboxed calls, maybe with the sandbox's bubblewrap killed between two (always
    with `fault_rate` 1.0)."""
    import psutil

    for call in range(3):
        if call == 1 and rng.random() < fault_rate:
            for child in psutil.Process().children():
                if child.name() == "bwrap":
                    child.kill()
                    faults["sandbox_killed"] += 1
        box.run_python("import sys; print(sum(range(1000)), file=sys.stdout)")


def ray_round(rng: random.Random, fault_rate: float, faults: dict[str, int]) -> None:
    """A Ray vector env: reset, 6 steps, maybe an actor killed, close."""
    import psutil

    from xpgym.core.vector.ray_backend import RayVectorEnv

    vec = RayVectorEnv([_GuessFactory()] * 4, num_actors=2)
    try:
        vec.reset(seed=rng.randrange(2**31))
        for turn in range(6):
            if turn == 3 and rng.random() < fault_rate:
                actors = [
                    p
                    for p in psutil.Process().children(recursive=True)
                    if p.name().startswith("ray::_ActorHost")
                ]
                if actors:
                    rng.choice(actors).kill()
                    faults["actor_killed"] += 1
            vec.step([f"\\boxed{{{rng.randint(1, 20)}}}" for _ in range(vec.num_envs)])
    finally:
        vec.close()


class _GuessFactory:
    """A picklable factory of `ENV_ID` (Ray pickles it to the actors)."""

    def __call__(self) -> Any:
        import xpgym

        return xpgym.make(ENV_ID)


SERVER_MAIN = """
import sys
from xpgym.remote import BackgroundServer
server = BackgroundServer(["game:*"], port=int(sys.argv[1])).start()
print(server.port, flush=True)
sys.stdin.read()  # serve until the soak closes stdin (or is gone)
server.stop()
"""


class ServerChild:
    """The env server in a child process on 127.0.0.1, which a fault kills and `start`
    brings back on the same port."""

    def __init__(self) -> None:
        self.port = 0
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER_MAIN, str(self.port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"the env server did not start (it said {line!r})")
        self.port = int(line)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """SIGKILL it and reap it."""
        if self.process is None:
            return
        self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()
        self.process = None


def remote_round(
    server: ServerChild, rng: random.Random, fault_rate: float, faults: dict[str, int]
) -> None:
    """One `RemoteEnv` episode (reset, up to 4 steps), then close. With probability
    `fault_rate` the server is killed after the first step; the next step must then end the
    episode as an infrastructure error, and the server is started again."""
    import xpgym
    from xpgym.core.errors import find_infra_cause

    env = xpgym.make(f"remote:{server.url}/{ENV_ID}", timeout=10.0, max_retries=0)
    try:
        env.reset(seed=rng.randrange(2**31))
        for turn in range(4):
            killed = turn == 1 and rng.random() < fault_rate
            if killed:
                server.kill()
                faults["server_killed"] += 1
            _, _, terminated, truncated, info = env.step(f"\\boxed{{{rng.randint(1, 20)}}}")
            if killed:
                if not truncated or find_infra_cause(info) is None:
                    raise AssertionError(
                        f"a step on a killed server was not an infra error: {info}"
                    )
                server.start()
                break
            if terminated or truncated:
                break
    finally:
        env.close()


def soak(
    duration_s: float, sample_every_s: float, fault_rate: float, seed: int, use_ray: bool = True
) -> dict[str, Any]:
    """Run the rounds for `duration_s`, sampling every `sample_every_s`; the report."""
    tmp_dir = Path(tempfile.mkdtemp(prefix="xpgym-soak-"))
    os.environ["TMPDIR"] = str(tmp_dir)  # for every child process too
    tempfile.tempdir = str(tmp_dir)
    from xpgym.core.sandbox import Sandbox, SandboxUnavailableError

    # Started by the first spawned worker and kept: running it now keeps it out of the
    # workers a fault may kill.
    multiprocessing.resource_tracker.ensure_running()

    rng = random.Random(seed)
    faults = {"worker_killed": 0, "sandbox_killed": 0, "actor_killed": 0, "server_killed": 0}
    rounds = 0
    samples: list[dict[str, float]] = []
    start = time.monotonic()
    next_sample = start
    try:
        box: Sandbox | None = Sandbox(pool_size=1)
        sandbox = "ok"
    except SandboxUnavailableError as exc:  # the other rounds still run
        box, sandbox = None, f"unavailable: {exc}"
    ray_state = _start_ray() if use_ray else "off (--no-ray)"
    server = ServerChild()
    try:
        server.start()
        while True:
            now = time.monotonic()
            if now >= next_sample:
                samples.append({"t_s": now - start, **sample(tmp_dir)})
                next_sample += sample_every_s
            if now - start >= duration_s:
                break
            rate = 1.0 if rounds == 0 else fault_rate  # every fault at least once
            vector_round(rng, rate, faults)
            if ray_state == "ok":
                ray_round(rng, rate, faults)
            if box is not None:
                sandbox_round(box, rng, rate, faults)
            remote_round(server, rng, rate, faults)
            rounds += 1
    finally:
        server.kill()
        if box is not None:
            box.close()
        if ray_state == "ok":
            import ray

            ray.shutdown()
        shutil.rmtree(tmp_dir, ignore_errors=True)
    slope_per_min = slopes(samples)
    half = samples[len(samples) // 2 :]
    window_min = (half[-1]["t_s"] - half[0]["t_s"]) / 60.0 if half else 0.0
    return {
        "duration_s": duration_s,
        "sample_every_s": sample_every_s,
        "fault_rate": fault_rate,
        "seed": seed,
        "rounds": rounds,
        "faults": faults,
        "sandbox": sandbox,
        "ray": ray_state,
        "samples": samples,
        "slope_per_min": slope_per_min,
        "tolerance_per_min": TOLERANCE_PER_MIN,
        "jitter": JITTER,
        "grown": grown(slope_per_min, window_min),
        "ray_logs_mb_per_min": slopes(samples, ["ray_logs_mb"])["ray_logs_mb"],
    }


def _start_ray() -> str:
    """Start a local Ray instance for the run: ``"ok"``, or why Ray rounds are left out."""
    try:
        import ray
    except ImportError:
        return 'unavailable: Ray is not installed (pip install "xpgym[ray]")'
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    return "ok"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--duration-s", type=float, default=600.0)
    parser.add_argument("--sample-every-s", type=float, default=60.0)
    parser.add_argument("--fault-rate", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--no-ray", action="store_true", help="leave the Ray rounds out")
    args = parser.parse_args(argv)
    report = soak(
        args.duration_s, args.sample_every_s, args.fault_rate, args.seed, use_ray=not args.no_ray
    )
    text = json.dumps(report, indent=2)
    print(text)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n")
    if report["grown"]:
        print(f"grew without bound: {report['grown']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
