"""Concurrent sessions per core, side by side: xpgym's OpenEnv endpoint, xpgym's native
protocol and OpenEnv's own server, all on this machine in one run.

Workload (a sleep-only env: each step sleeps ``--sleep`` seconds, as an env waiting on a
sandbox or a judge): for each N in ``--sessions``, open N sessions at once and hold them, reset
each, then ``--turns`` rounds in which every session steps once, concurrently (a trainer's
vector step over N remote envs), the next round starting when the last step of the round came
back. Reported per server and N: sessions opened, errors (with the first few), steps/s over
the stepping phase, p50 / p99 step latency (send to reply), the batch wall time per round, the
server's CPU time per step (what a step costs the server, whatever else the machine runs) and
its peak RSS. A row meets the goal when every session opened, no step failed and the
p99 latency is at most twice the sleep.

Servers (each a subprocess started by this script on 127.0.0.1, stopped after its rows):

* ``xpgym-openenv``: ``python -m xpgym serve``, the OpenEnv WebSocket protocol at
  ``/openenv/bench:SessionSleep-v0/ws``;
* ``xpgym-native``: the same command, xpgym's HTTP protocol (``/sessions``), from an asyncio
  HTTP client (aiohttp) with one keep-alive connection per session;
* ``openenv``: OpenEnv's own `create_app` (scripts/openenv_sleep_server.py, in the openenv
  side venv ``<venv>/interop/openenv``) with ``max_concurrent_envs=N``, its documented
  concurrency setting, the same env.

The client is one asyncio process (``websockets`` for the WebSocket servers). Limits raised
for the xpgym server, recorded in the output: ``--max-sessions N``,
``--max-sessions-per-client N`` (every session comes from one address) and
``--rate-limit 0`` (the default 1000 requests/s per client would refuse a single client's
N/sleep steps per second). The process's open-file limit is raised to its hard limit.

Usage::

    .venv/bin/python scripts/bench_sessions.py --sessions 256 1024 2048 --sleep 0.1 --turns 5

Prints a table and writes JSON to ``--output`` (default ``results/bench_sessions.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import psutil
from bench_remote import ServerProcess, SleepEnv, _free_port

import xpgym

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
ENV_ID = "bench:SessionSleep-v0"
SLEEP_VARIABLE = "XPGYM_BENCH_SESSIONS_SLEEP"
"""The server reads the env's sleep from this variable when it imports this module."""
SERVERS = ("xpgym-openenv", "xpgym-native", "openenv")
OPENENV_PYTHON = Path(sys.prefix) / "interop" / "openenv" / "bin" / "python"
"""The openenv side venv of the venv running this script (scripts/setup.sh step 4)."""

# Sessions never end on their own: the benchmark steps each one exactly --turns times.
xpgym.register(
    ENV_ID,
    "bench_remote:SleepEnv",
    override=True,
    sleep=float(os.environ.get(SLEEP_VARIABLE, "0.1")),
    turns=10**9,
)
__all__ = ["SleepEnv"]  # what the server imports this module for: the registration above


class Session(Protocol):
    async def open(self) -> None: ...
    async def step(self) -> None: ...
    async def close(self) -> None: ...


class WebSocketSession:
    """One OpenEnv WebSocket session: ``reset``, then ``step`` messages with a text action."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.socket: Any = None

    async def _exchange(self, message: dict[str, Any]) -> dict[str, Any]:
        await self.socket.send(json.dumps(message))
        reply = json.loads(await self.socket.recv())
        if reply.get("type") == "error":
            raise RuntimeError(f"error reply: {reply.get('data')}")
        return reply

    async def open(self) -> None:
        import websockets

        self.socket = await websockets.connect(self.url, max_queue=None, open_timeout=60)
        await self._exchange({"type": "reset", "data": {"seed": 0}})

    async def step(self) -> None:
        await self._exchange({"type": "step", "data": {"message": "x"}})

    async def close(self) -> None:
        if self.socket is not None:
            await self.socket.close()


class NativeSession:
    """One session of xpgym's HTTP protocol (``POST /sessions``, ``reset``, ``step``)."""

    def __init__(self, url: str, http: Any) -> None:
        self.url, self.http = url, http
        self.session_id: str | None = None
        self.steps = 0

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        async with self.http.post(self.url + path, json=body) as response:
            reply = await response.json()
            if response.status >= 400:
                raise RuntimeError(f"HTTP {response.status}: {reply.get('error')}")
            return reply

    async def open(self) -> None:
        reply = await self._post("/sessions", {"env_id": ENV_ID})
        self.session_id = reply["session_id"]
        await self._post(f"/sessions/{self.session_id}/reset", {"seed": 0})

    async def step(self) -> None:
        self.steps += 1
        await self._post(f"/sessions/{self.session_id}/step", {"action": "x", "seq": self.steps})

    async def close(self) -> None:
        if self.session_id is not None:
            async with self.http.delete(f"{self.url}/sessions/{self.session_id}"):
                pass


@dataclass
class Row:
    """One server at one session count."""

    server: str
    sessions: int
    opened: int = 0
    errors: int = 0
    first_errors: list[str] = field(default_factory=list)
    steps: int = 0
    steps_per_s: float = 0.0
    step_p50_s: float = float("nan")
    step_p99_s: float = float("nan")
    round_wall_s: list[float] = field(default_factory=list)
    server_peak_rss_mb: float = 0.0
    server_cpu_ms_per_step: float = float("nan")
    meets_goal: bool = False

    def note(self, error: BaseException) -> None:
        self.errors += 1
        if len(self.first_errors) < 3:
            self.first_errors.append(f"{type(error).__name__}: {error}"[:300])


class ServerMeter:
    """A server process's peak RSS (sampled while the benchmark waits) and CPU time."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = 0

    def sample(self) -> None:
        self.peak = max(self.peak, self.process.memory_info().rss)

    def cpu_s(self) -> float:
        """User plus system CPU seconds the server has used so far (all its threads)."""
        times = self.process.cpu_times()
        return times.user + times.system


async def _guarded(row: Row, action: Awaitable[None], timeout: float) -> bool:
    try:
        await asyncio.wait_for(action, timeout)
        return True
    except Exception as exc:
        row.note(exc)
        return False


async def run_sessions(
    row: Row, make_session: Callable[[], Session], turns: int, sleep: float, meter: ServerMeter
) -> None:
    """Open `row.sessions` sessions together, step them `turns` rounds, close them."""
    timeout = max(60.0, 20 * sleep * row.sessions / 100)
    sessions = [make_session() for _ in range(row.sessions)]
    ok = await asyncio.gather(*(_guarded(row, s.open(), timeout) for s in sessions))
    live = [s for s, opened in zip(sessions, ok, strict=True) if opened]
    row.opened = len(live)
    meter.sample()
    latencies: list[float] = []

    async def timed_step(session: Session) -> None:
        start = time.perf_counter()
        if await _guarded(row, session.step(), timeout):
            latencies.append(time.perf_counter() - start)

    stepping, cpu_before = time.perf_counter(), meter.cpu_s()
    for _ in range(turns):
        start = time.perf_counter()
        await asyncio.gather(*(timed_step(s) for s in live))
        row.round_wall_s.append(round(time.perf_counter() - start, 4))
        meter.sample()
    elapsed, cpu = time.perf_counter() - stepping, meter.cpu_s() - cpu_before
    await asyncio.gather(*(_guarded(row, s.close(), timeout) for s in live))
    row.steps = len(latencies)
    row.steps_per_s = row.steps / elapsed if elapsed > 0 else 0.0
    if latencies:
        row.step_p50_s = float(np.percentile(latencies, 50))
        row.step_p99_s = float(np.percentile(latencies, 99))
    row.server_peak_rss_mb = meter.peak / 2**20
    if row.steps:
        row.server_cpu_ms_per_step = 1000 * cpu / row.steps
    row.meets_goal = row.errors == 0 and row.opened == row.sessions and row.step_p99_s <= 2 * sleep


class OpenEnvServerProcess:
    """scripts/openenv_sleep_server.py in the openenv side venv, on a free port."""

    def __init__(self, max_sessions: int, sleep: float) -> None:
        if not OPENENV_PYTHON.exists():
            raise FileNotFoundError(f"{OPENENV_PYTHON} missing: scripts/setup.sh builds it")
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        cmd = [str(OPENENV_PYTHON), str(SCRIPTS / "openenv_sleep_server.py"), "--port", str(port)]
        cmd += ["--max-sessions", str(max_sessions), "--sleep", str(sleep), "--turns", "1000000000"]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
        _wait_until_healthy(self.url + "/health", self.proc)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def _wait_until_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"server at {url} did not start") from None
            time.sleep(0.2)


XPGYM_LIMITS = ("--rate-limit", "0")


def _xpgym_server(sessions: int) -> ServerProcess:
    extra = ("--import", "bench_sessions", "--max-sessions-per-client", str(sessions))
    return ServerProcess(sessions, (*extra, *XPGYM_LIMITS))


async def bench_server(name: str, sessions: int, args: argparse.Namespace) -> Row:
    """Start `name`'s server for `sessions` sessions, run the workload, stop it."""
    row = Row(name, sessions)
    os.environ[SLEEP_VARIABLE] = str(args.sleep)  # read by the xpgym server's import
    server: ServerProcess | OpenEnvServerProcess
    if name == "openenv":
        server = OpenEnvServerProcess(sessions, args.sleep)
    else:
        server = _xpgym_server(sessions)
    try:
        meter = ServerMeter(server.proc.pid)
        ws_base = server.url.replace("http://", "ws://")
        if name == "xpgym-native":
            import aiohttp

            connector = aiohttp.TCPConnector(limit=0)
            timeout = aiohttp.ClientTimeout(total=None)
            async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
                await run_sessions(
                    row, lambda: NativeSession(server.url, http), args.turns, args.sleep, meter
                )
        else:
            path = "/ws" if name == "openenv" else f"/openenv/{ENV_ID}/ws"
            await run_sessions(
                row, lambda: WebSocketSession(ws_base + path), args.turns, args.sleep, meter
            )
    finally:
        server.stop()
    return row


def _raise_open_files_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def summarize(rows: list[Row], sleep: float, cores: int) -> dict[str, Any]:
    """Per server: the most sessions held within the bound (the largest N whose row and every
    smaller N's row met the goal: one lucky row above a failed one does not count) and that
    per core; the ratio of xpgym's OpenEnv endpoint to OpenEnv's own server there."""
    best: dict[str, int] = {}
    failed: set[str] = set()
    for row in sorted(rows, key=lambda r: r.sessions):
        if not row.meets_goal:
            failed.add(row.server)
        elif row.server not in failed:
            best[row.server] = row.sessions
    per_core = {server: n / cores for server, n in best.items()}
    ratio = None
    if best.get("openenv"):
        ratio = best.get("xpgym-openenv", 0) / best["openenv"]
    return {
        "latency_bound_s": 2 * sleep,
        "most_sessions_within_bound": best,
        "sessions_per_core_within_bound": per_core,
        "xpgym_openenv_over_openenv": ratio,
    }


def table(rows: list[Row]) -> str:
    """A markdown table of the rows."""
    lines = [
        "| server | sessions | opened | errors | steps/s | p50 ms | p99 ms | server CPU ms/step "
        "| RSS MB | goal |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.server} | {r.sessions} | {r.opened} | {r.errors} | {r.steps_per_s:.0f} | "
            f"{1000 * r.step_p50_s:.0f} | {1000 * r.step_p99_s:.0f} | "
            f"{r.server_cpu_ms_per_step:.2f} | {r.server_peak_rss_mb:.0f} | "
            f"{'yes' if r.meets_goal else 'no'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[256, 1024, 2048])
    parser.add_argument("--sleep", type=float, default=0.1, help="seconds per step")
    parser.add_argument("--turns", type=int, default=5, help="rounds of steps per session")
    parser.add_argument("--servers", nargs="+", choices=SERVERS, default=list(SERVERS))
    parser.add_argument("--output", type=Path, default=ROOT / "results" / "bench_sessions.json")
    args = parser.parse_args(argv)
    open_files = _raise_open_files_limit()
    rows = []
    for sessions in args.sessions:
        for name in args.servers:
            print(f"{name}: {sessions} sessions...", file=sys.stderr, flush=True)
            rows.append(asyncio.run(bench_server(name, sessions, args)))
            print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    cores = len(os.sched_getaffinity(0))
    result = {
        "command": "scripts/bench_sessions.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "sleep_s": args.sleep,
        "turns": args.turns,
        "cores": cores,
        "open_files_limit": open_files,
        "xpgym_limits_raised": ["--max-sessions N", "--max-sessions-per-client N", *XPGYM_LIMITS],
        "rows": [asdict(row) for row in rows],
        "summary": summarize(rows, args.sleep, cores),
    }
    print(table(rows))
    print(json.dumps(result["summary"], indent=2))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.output}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
