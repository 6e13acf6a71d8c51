"""Benchmarks for remote envs: a session load test and a blocking-env backend comparison.

Both use `SleepEnv` (``bench:Sleep-v0``): every step sleeps ``sleep`` seconds and the
episode terminates after ``turns`` steps, so all time is waiting, as for an env that calls a
sandbox, a browser or a judge model.

* ``load``: start ``python -m xpgym serve`` in a subprocess, open ``--sessions`` sessions
  from as many client threads (one `RemoteEnv` each), reset, and step each ``--turns``
  times. Reports sessions held at the peak (``/health``), step latency p50/p99 and errors.
  Compare with OpenEnv's published figure: 2,048 sessions at >= 95% success on 8 cores with
  a 10 s sleeping env.
* ``blocking``: SkyRL-style: ``--episodes`` episodes of ``--turns`` steps that sleep
  ``--sleep`` s each, run as one vector env of ``--episodes`` sub-envs per backend (thread,
  process, remote, ray; ``--backends`` picks some). Each vector env is built once and runs
  the episodes ``--repeats`` times (reset, then ``turns`` batch steps). Reports wall time
  (min / median / max over the repeats) against the ideal ``turns x sleep``.
  ``--threads N`` sets the threads per process worker / Ray actor (default: the backend's,
  every hosted sub-env; ``--threads 1`` steps a worker's sub-envs one after another).

Both print JSON and write it to ``--output`` (default ``results/bench_remote_<bench>.json``).

Usage::

    .venv/bin/python scripts/bench_remote.py load --sessions 256 --sleep 1 --turns 3
    .venv/bin/python scripts/bench_remote.py blocking --episodes 256 --sleep 0.5 --turns 3
    .venv/bin/python scripts/bench_remote.py blocking --backends process ray --repeats 5
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

import xpgym
from xpgym.core.env import Env

SCRIPTS = Path(__file__).resolve().parent
ENV_ID = "bench:Sleep-v0"
BACKENDS = ("thread", "process", "remote", "ray")


class SleepEnv(Env[str]):
    """Each step sleeps `sleep` seconds; the episode terminates after `turns` steps."""

    def __init__(self, sleep: float = 0.5, turns: int = 3) -> None:
        self.sleep, self.turns, self.turn = sleep, turns, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.turn = 0
        return "start", {}

    def step(self, action: str):
        time.sleep(self.sleep)
        self.turn += 1
        return f"turn {self.turn}", 0.0, self.turn >= self.turns, False, {}

    def sample_random_action(self) -> str:
        return "x"

    def get_state(self) -> dict[str, Any]:
        return {"turn": self.turn}

    def set_state(self, state: dict[str, Any]) -> None:
        self.turn = state["turn"]


xpgym.register(ENV_ID, "bench_remote:SleepEnv", override=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _health(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/health", timeout=5) as response:
        return json.loads(response.read())


class ServerProcess:
    """``python -m xpgym serve --import bench_remote --env bench:*`` on a free port.

    `extra_args` go to the serve command as they are (e.g. raised limits).
    """

    def __init__(self, max_sessions: int, extra_args: tuple[str, ...] = ()) -> None:
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "PYTHONPATH": f"{SCRIPTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        }
        cmd = [sys.executable, "-m", "xpgym", "serve", "--import", "bench_remote"]
        cmd += ["--env", "bench:*", "--port", str(port), "--max-sessions", str(max_sessions)]
        cmd += extra_args
        self.proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                _health(self.url)
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.proc.kill()
                    raise RuntimeError("server did not start") from None
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def load_test(args: argparse.Namespace) -> dict[str, Any]:
    """Many concurrent sessions of a sleeping env against one server subprocess."""
    from xpgym.remote import RemoteEnv

    server = ServerProcess(args.sessions)
    latencies: list[float] = []
    errors: list[str] = []
    ok_sessions = 0
    lock = threading.Lock()
    barrier = threading.Barrier(args.sessions + 1)

    def client() -> None:
        nonlocal ok_sessions
        env = RemoteEnv(server.url, ENV_ID, timeout=args.sleep * 4 + 30, sleep=args.sleep)
        mine, failed = [], None
        try:
            env.reset(seed=0)
        except Exception as exc:
            failed = f"reset: {exc}"
        barrier.wait()
        if failed is None:
            for _ in range(args.turns):
                start = time.perf_counter()
                *_, truncated, info = env.step("x")
                mine.append(time.perf_counter() - start)
                if truncated and "error" in info:
                    failed = f"step: {info['error']}"
                    break
        barrier.wait()  # hold every session open until all clients are done
        env.close()
        with lock:
            latencies.extend(mine)
            if failed is None:
                ok_sessions += 1
            else:
                errors.append(failed)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(args.sessions)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    barrier.wait(timeout=args.time_limit)
    held = _health(server.url)["sessions"]
    barrier.wait(timeout=args.time_limit)
    for t in threads:
        t.join(args.time_limit)
    wall = time.perf_counter() - start
    server.stop()
    lat = np.array(latencies) if latencies else np.array([float("nan")])
    return {
        "sessions": args.sessions,
        "sessions_held": held,
        "successful_sessions": ok_sessions,
        "success_rate": ok_sessions / args.sessions,
        "sleep_s": args.sleep,
        "turns": args.turns,
        "step_p50_s": float(np.percentile(lat, 50)),
        "step_p99_s": float(np.percentile(lat, 99)),
        "errors": len(errors),
        "first_errors": errors[:3],
        "wall_s": wall,
    }


def _run_vector(venv: Any, turns: int) -> float:
    start = time.perf_counter()
    venv.reset(seed=0)
    for _ in range(turns):
        _, _, terminated, _, infos = venv.step(["x"] * venv.num_envs)
        if any("error" in info for info in infos):
            raise RuntimeError(f"a sub-env failed: {[i for i in infos if 'error' in i][:1]}")
    assert terminated.all()
    return time.perf_counter() - start


def blocking(args: argparse.Namespace) -> list[dict[str, Any]]:
    """SkyRL-style blocking env: wall time of `episodes` x `turns` sleeping steps."""
    from xpgym.core.vector import ProcessVectorEnv, ThreadVectorEnv
    from xpgym.remote import RemoteEnv

    local_fn = functools.partial(SleepEnv, args.sleep, args.turns)
    rows = []

    def record(backend: str, config: str, build: Any) -> None:
        if backend not in args.backends:
            return
        print(f"{backend}: building {config}...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            venv = build()
        except Exception as exc:
            rows.append({"backend": backend, "config": config, "note": repr(exc)})
            return
        setup = time.perf_counter() - t0
        walls = []
        with venv:
            for repeat in range(args.repeats):
                walls.append(_run_vector(venv, args.turns))
                print(
                    f"{backend}: run {repeat + 1}/{args.repeats}: {walls[-1]:.2f} s",
                    file=sys.stderr,
                    flush=True,
                )
        ideal = args.turns * args.sleep
        median = float(np.median(walls))
        rows.append(
            {
                "backend": backend,
                "config": config,
                "setup_s": setup,
                "wall_s": median,
                "wall_min_max_s": [min(walls), max(walls)],
                "walls_s": walls,
                "ideal_s": ideal,
                "overhead": median / ideal,
                "overhead_min_max": [min(walls) / ideal, max(walls) / ideal],
            }
        )

    n = args.episodes
    threads = "" if args.threads is None else f", {args.threads} threads each"
    record("thread", f"ThreadVectorEnv, {n} threads", lambda: ThreadVectorEnv([local_fn] * n))
    record(
        "process",
        f"ProcessVectorEnv, {args.workers} workers{threads}",
        lambda: ProcessVectorEnv(
            [local_fn] * n, num_workers=args.workers, threads_per_worker=args.threads
        ),
    )
    if "remote" in args.backends:
        server = ServerProcess(n)
        remote_fn = functools.partial(
            RemoteEnv, server.url, ENV_ID, sleep=args.sleep, turns=args.turns
        )
        record(
            "remote", f"ThreadVectorEnv of {n} RemoteEnv", lambda: ThreadVectorEnv([remote_fn] * n)
        )
        server.stop()
    if "ray" not in args.backends:
        return rows
    try:
        from xpgym.core.vector.ray_backend import RayVectorEnv
    except ImportError as exc:
        rows.append({"backend": "ray", "config": "-", "note": f"not available: {exc}"})
    else:
        import ray

        ray.init(
            num_cpus=args.ray_actors,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": str(SCRIPTS)}},
        )
        record(
            "ray",
            f"RayVectorEnv, {args.ray_actors} actors{threads}",
            lambda: RayVectorEnv(
                [local_fn] * n, num_actors=args.ray_actors, threads_per_actor=args.threads
            ),
        )
        ray.shutdown()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="bench", required=True)
    load = sub.add_parser("load", help="concurrent sessions of a sleeping env")
    load.add_argument("--sessions", type=int, default=256)
    load.add_argument("--sleep", type=float, default=1.0)
    load.add_argument("--turns", type=int, default=3)
    load.add_argument("--time-limit", type=float, default=300.0)
    block = sub.add_parser("blocking", help="SkyRL-style blocking env over backends")
    block.add_argument("--episodes", type=int, default=256)
    block.add_argument("--sleep", type=float, default=0.5)
    block.add_argument("--turns", type=int, default=3)
    block.add_argument("--workers", type=int, default=32, help="ProcessVectorEnv workers")
    block.add_argument("--ray-actors", type=int, default=32, help="RayVectorEnv actors")
    block.add_argument(
        "--threads", type=int, default=None, help="threads per worker / actor (default: all)"
    )
    block.add_argument("--repeats", type=int, default=1, help="runs per vector env")
    block.add_argument(
        "--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS), help="which to run"
    )
    for command in (load, block):
        command.add_argument("--output", type=Path, default=None, help="JSON results file")
    args = parser.parse_args()
    result = load_test(args) if args.bench == "load" else blocking(args)
    text = json.dumps(result, indent=2)
    print(text)
    output = args.output or SCRIPTS.parent / "results" / f"bench_remote_{args.bench}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    print(f"wrote {output}", file=sys.stderr)


if __name__ == "__main__":
    main()
