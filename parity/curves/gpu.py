"""The GPU parity run: every trainer's recipe on the same env, model, seeds and settings.

    python -m parity.curves.gpu command --trainer verl --env game:GuessTheNumber-v0 --seed 0
    python -m parity.curves.gpu run --trainer verl --env game:GuessTheNumber-v0 --seed 0
    python -m parity.curves.gpu collect results/parity_gpu --out parity/report-gpu.json

``command`` prints the recipe command line that runs one trainer with the shared `RunSpec`
(the GEM paper's hyper-parameters: lr 1e-6, gamma 0.9, no KL, temperature 1; the same
episodes per step and steps for every trainer); ``run`` (what the workflow
``.github/workflows/parity-gpu.yml`` calls) runs it with ``XPGYM_EPISODE_LOG`` pointing at
``<results>/<env>/<trainer>-seed<k>``, so every episode any of the trainer's workers
finishes is logged (`xpgym.core.wrappers.episode_log`), and stops it once the run's
episodes are in (`supervise`). ``collect`` reads those logs, turns each run into a curve
(`parity.shared.curves.curve`: the mean return of every consecutive
`RunSpec.episodes_per_step` episodes, in the order they ended: the x axis is experience,
the same for every trainer), averages a trainer's seeds, and checks every trainer against
the band of all the *other* trainers' runs (half-width ``max(k * std, floor)``,
`parity.shared.curves.band`, smoothed with `parity.shared.curves.smooth`): a trainer is
inside when a fraction >= ``min_inside`` of its points are. It writes the report JSON and a
PNG of the curves, and exits 1 when a trainer is outside. The same collection reads the CPU
runs of `parity.e2e`, which is how it is tested without a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from parity.curves.gpu_jobs import JOBS
from parity.shared.curves import band, curve, inside_fraction, smooth
from parity.shared.reports import pyplot, save_figure, write_json
from xpgym.core.wrappers.episode_log import EPISODE_LOG_VARIABLE, read_episode_log

__all__ = [
    "GPU_ENVS",
    "GPU_MODEL",
    "TRAINERS",
    "BandConfig",
    "RunSpec",
    "collect",
    "failures",
    "main",
    "plot",
    "recipe_command",
    "step_cost",
    "supervise",
    "verdicts",
]

logger = logging.getLogger(__name__)

GPU_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
"""The open model every trainer trains on the GPU runners (about 0.5B parameters)."""

GPU_ENVS = ("game:GuessTheNumber-v0", "rg:leg_counting-v0")
"""The envs of the GPU run: a multi-turn game and a single-turn ReasoningGym task."""

TRAINERS = tuple(JOBS)
"""Every trainer of the GPU run, in the workflow's order (`parity.curves.gpu_jobs.JOBS`: each
one's Python and pinned stack)."""


@dataclass(frozen=True)
class RunSpec:
    """What every trainer's run shares. `episodes_per_step` x `steps` episodes in all."""

    env: str = GPU_ENVS[0]
    model: str = GPU_MODEL
    steps: int = 100
    episodes_per_step: int = 64
    lr: float = 1e-6
    gamma: float = 0.9
    max_turns: int = 10
    max_new_tokens: int = 512
    seed: int = 0
    out_dir: str = "results/parity_gpu/run"

    @property
    def episodes(self) -> int:
        """Episodes in the whole run."""
        return self.steps * self.episodes_per_step


def _trainer_flags(trainer: str, spec: RunSpec) -> dict[str, Any]:
    """Each recipe's own flags for `spec` (the recipes name batch sizes differently)."""
    e, n = spec.episodes_per_step, spec.steps
    per_trainer: dict[str, dict[str, Any]] = {
        "verl": {
            "train-batch-size": e,
            "ppo-mini-batch-size": e,
            "rollout-n": 1,
            "total-steps": n,
            "num-tasks": e * n,
        },
        "openrlhf": {
            "rollout-batch-size": e,
            "train-batch-size": e,
            "n-samples-per-prompt": 1,
            "num-tasks": e * n,
        },
        # Oat counts its batches in transitions (turns); the curve is binned by episodes.
        "oat": {"episodes-per-step": e, "num-envs": min(e, 16)},
        "rl2": {"prompts-per-rollout": e, "responses-per-prompt": 1, "num-tasks": e * n},
        "roll": {"rollout-batch-size": e, "num-env-groups": e, "group-size": 1, "max-steps": n},
        "trl": {"batch-size": e, "num-generations": 4, "max-steps": n, "num-tasks": e * n // 4},
    }
    if trainer not in per_trainer:
        raise ValueError(f"unknown trainer {trainer!r}; one of {', '.join(TRAINERS)}")
    if trainer == "trl" and e % 4:
        raise ValueError(f"TRL's groups of 4 need episodes_per_step divisible by 4, got {e}")
    return per_trainer[trainer]


def recipe_command(trainer: str, spec: RunSpec) -> list[str]:
    """The command line that runs ``recipes/train_<trainer>.py`` with `spec`.

    The flags are the recipe's own (each parses with the recipe's ``Args``; tested). Oat's
    recipe has no step limit: the workflow stops it once `spec.episodes` episodes are logged.
    """
    flags: dict[str, Any] = {
        "env-id": spec.env,
        "model": spec.model,
        "algorithm": "rebn",
        "gamma": spec.gamma,
        "lr": spec.lr,
        "max-turns": spec.max_turns,
        "max-new-tokens": spec.max_new_tokens,
        "seed": spec.seed,
        "out-dir": spec.out_dir,
        **_trainer_flags(trainer, spec),
    }
    argv = ["python", f"recipes/train_{trainer}.py"]
    for name, value in flags.items():
        argv += [f"--{name}", str(value)]
    return argv


def _episodes_logged(log_dir: Path) -> int:
    try:
        return len(read_episode_log(log_dir))
    except FileNotFoundError:
        return 0


def supervise(
    argv: Sequence[str],
    log_dir: Path,
    episodes: int,
    *,
    timeout_s: float,
    poll_s: float = 10.0,
    grace_s: float = 30.0,
) -> int:
    """Run `argv` with ``XPGYM_EPISODE_LOG=log_dir`` until it has logged `episodes` episodes.

    The command runs in its own process group; once the log holds `episodes` episodes the
    whole group is sent SIGTERM (SIGKILL after `grace_s`), so a recipe without a step limit
    (Oat's) and a trainer's Ray/vLLM workers stop together. A clean exit before that also
    counts (the recipe's own limit). Returns 0 when the episodes were logged (or the
    command exited 0), the command's exit status when it failed, 124 after `timeout_s`.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    environ = {**os.environ, EPISODE_LOG_VARIABLE: str(log_dir)}
    process = subprocess.Popen(list(argv), env=environ, start_new_session=True)
    try:
        return _watch(process, argv, log_dir, episodes, timeout_s, poll_s, grace_s)
    except BaseException:  # interrupted (Ctrl-C, a test's timeout): leave no orphan behind
        _stop_group(process, grace_s)
        raise


def _watch(
    process: subprocess.Popen[bytes],
    argv: Sequence[str],
    log_dir: Path,
    episodes: int,
    timeout_s: float,
    poll_s: float,
    grace_s: float,
) -> int:
    """`supervise`'s loop: the exit status, or 0 / 124 after stopping the group."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            status = process.wait(timeout=poll_s)
        except subprocess.TimeoutExpired:
            status = None
        if status is not None:
            return status
        logged = _episodes_logged(log_dir)
        if logged >= episodes or time.monotonic() > deadline:
            _stop_group(process, grace_s)
            if logged >= episodes:
                logger.info("%d episodes logged: stopped %s", logged, argv[1])
                return 0
            logger.error("%s timed out after %.0f s (%d episodes)", argv[1], timeout_s, logged)
            return 124


def _stop_group(process: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the process group of `process`, SIGKILL after `grace_s`; a gone group is fine."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


# --------------------------------------------------------------------------------------
# Collection and banding (the CPU runs of parity.e2e are read by the same code)
# --------------------------------------------------------------------------------------


def step_cost(records: Sequence[dict[str, Any]], episodes_per_step: int) -> dict[str, float]:
    """Wall seconds per step and the env's share of them, from a run's episode log.

    ``step_s``: time between the ends of the first and the last full step's episodes,
    divided by the steps in between (start-up excluded); ``env_s``: env seconds per step
    (`EpisodeLog`'s ``env_s`` summed, divided by the steps); ``env_share``: their ratio.
    NaN where the log holds fewer than two full steps.
    """
    steps = len(records) // episodes_per_step
    if steps < 2:
        return {"step_s": math.nan, "env_s": math.nan, "env_share": math.nan}
    ends = [records[(k + 1) * episodes_per_step - 1]["end"] for k in range(steps)]
    step_s = (ends[-1] - ends[0]) / (steps - 1)
    env_s = sum(r["env_s"] for r in records[: steps * episodes_per_step]) / steps
    return {"step_s": step_s, "env_s": env_s, "env_share": env_s / step_s if step_s else math.nan}


@dataclass(frozen=True)
class BandConfig:
    """How curves are compared: the trailing `window`, the band ``max(k * std, floor)``
    over the other trainers' runs, and the share of points that must be inside."""

    window: int = 10
    k: float = 3.0
    floor: float = 0.05
    min_inside: float = 0.75


def verdicts(runs: dict[str, list[list[float]]], cfg: BandConfig) -> dict[str, dict[str, Any]]:
    """Each trainer's mean curve (over its seeds) against the band of every other run.

    Args:
        runs: ``{trainer: [curve of seed 0, curve of seed 1, ...]}``; curves are cut to the
            shortest length of all runs, so every point compares the same experience.
        cfg: The band.

    Returns:
        ``{trainer: {"curve", "band_mean", "band_low", "band_high", "inside", "verdict"}}``
        with ``verdict`` ``"inside"``/``"outside"``, or ``{"verdict": "not compared",
        "why"}`` where fewer than 2 other runs make a band.
    """
    length = min((len(c) for curves in runs.values() for c in curves), default=0)
    smoothed = {
        name: [smooth(c[:length], cfg.window) for c in curves] for name, curves in runs.items()
    }
    out: dict[str, dict[str, Any]] = {}
    for name, curves in smoothed.items():
        others = [c for other, cs in smoothed.items() if other != name for c in cs]
        if len(others) < 2 or length == 0:
            why = f"{len(others)} other runs of {length} points (a band needs 2 runs)"
            out[name] = {"verdict": "not compared", "why": why}
            continue
        mine = np.mean(curves, axis=0)
        mean, half = band(np.array(others), cfg.k, cfg.floor)
        fraction = inside_fraction(mine, mean, half)
        out[name] = {
            "curve": mine.tolist(),
            "band_mean": mean.tolist(),
            "band_low": (mean - half).tolist(),
            "band_high": (mean + half).tolist(),
            "inside": fraction,
            "verdict": "inside" if fraction >= cfg.min_inside else "outside",
        }
    return out


def _run_dirs(env_dir: Path) -> dict[str, list[Path]]:
    """``<trainer>-seed<k>`` folders of one env, by trainer."""
    runs: dict[str, list[Path]] = {}
    for path in sorted(p for p in env_dir.iterdir() if p.is_dir()):
        trainer, _, seed = path.name.rpartition("-seed")
        if trainer and seed.isdigit():
            runs.setdefault(trainer, []).append(path)
    return runs


def collect(
    results: Path, episodes_per_step: int, cfg: BandConfig = BandConfig()
) -> dict[str, Any]:
    """Read ``<results>/<env dir>/<trainer>-seed<k>/episodes-*.jsonl`` and band every env;
    each run's `step_cost` is the GPU side of `parity.bench`'s table.

    Folders of `results` without a ``<trainer>-seed<k>`` folder in them are skipped.

    Returns:
        ``{"config", "envs": {env dir: {"runs": {trainer: {"seeds", "episodes",
        "step_cost"}},
        "trainers": verdicts}}}``; a run without a log is listed with its ``error``.
    """
    report: dict[str, Any] = {
        "config": {"episodes_per_step": episodes_per_step, **asdict(cfg)},
        "envs": {},
    }
    for env_dir in sorted(p for p in Path(results).iterdir() if p.is_dir()):
        run_dirs = _run_dirs(env_dir)
        if not run_dirs:
            continue  # not an env's folder (e.g. a trainer's own output)
        runs: dict[str, list[list[float]]] = {}
        listing: dict[str, Any] = {}
        for trainer, dirs in run_dirs.items():
            curves, episodes, errors, costs = [], [], [], []
            for directory in dirs:
                try:
                    records = read_episode_log(directory)
                except (FileNotFoundError, ValueError) as exc:
                    errors.append(str(exc))
                    continue
                curves.append(curve(records, episodes_per_step))
                episodes.append(len(records))
                costs.append(step_cost(records, episodes_per_step))
            listing[trainer] = {
                "seeds": len(curves),
                "episodes": episodes,
                "errors": errors,
                "step_cost": costs,
            }
            if curves:
                runs[trainer] = curves
        report["envs"][env_dir.name] = {"runs": listing, "trainers": verdicts(runs, cfg)}
    return report


def failures(report: dict[str, Any]) -> list[str]:
    """Every trainer outside its band, and every run that left no log."""
    problems = []
    for env, entry in report["envs"].items():
        for trainer, result in entry["trainers"].items():
            if result["verdict"] == "outside":
                problems.append(f"{env}: {trainer} left the band ({result['inside']:.0%} inside)")
        for trainer, run in entry["runs"].items():
            problems += [f"{env}: {trainer}: {error}" for error in run["errors"]]
    return problems


def plot(report: dict[str, Any], path: Path) -> None:
    """One panel per env: every trainer's curve and the band of the others around it."""
    plt = pyplot(needed_by="parity.curves.gpu plots")
    envs = report["envs"]
    fig, axes = plt.subplots(1, max(len(envs), 1), figsize=(7 * max(len(envs), 1), 4.5))
    for ax, (env, entry) in zip(np.atleast_1d(axes), envs.items(), strict=False):
        for trainer, result in entry["trainers"].items():
            if "curve" not in result:
                continue
            steps = np.arange(len(result["curve"]))
            (line,) = ax.plot(steps, result["curve"], label=f"{trainer} ({result['verdict']})")
            ax.fill_between(
                steps, result["band_low"], result["band_high"], color=line.get_color(), alpha=0.08
            )
        ax.set_title(env)
        ax.set_xlabel(f"step ({report['config']['episodes_per_step']} episodes each)")
        ax.set_ylabel("mean episode return")
        ax.legend(fontsize=8)
    save_figure(fig, path)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (``command`` / ``run`` / ``collect``); ``collect`` returns 1 when a
    trainer is outside its band or a run left no log, ``run`` what `supervise` returns."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("command", help="print one trainer's recipe command line")
    command.add_argument("--trainer", choices=TRAINERS, required=True)
    for name, default in asdict(RunSpec()).items():
        command.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    launch = commands.add_parser("run", help="run one trainer's recipe until its episodes")
    launch.add_argument("--trainer", choices=TRAINERS, required=True)
    launch.add_argument("--results", type=Path, default=Path("results/parity_gpu"))
    launch.add_argument("--timeout-s", type=float, default=4 * 3600)
    for name, default in asdict(RunSpec()).items():
        if name != "out_dir":
            launch.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    gather = commands.add_parser("collect", help="band every trainer's logged curve")
    gather.add_argument("results", type=Path)
    gather.add_argument("--episodes-per-step", type=int, default=RunSpec.episodes_per_step)
    gather.add_argument("--out", type=Path, default=Path("parity/report-gpu.json"))
    gather.add_argument("--plot", type=Path, default=Path("results/parity_gpu/curves.png"))
    args = parser.parse_args(argv)
    if args.command == "command":
        fields = {name: getattr(args, name) for name in asdict(RunSpec())}
        sys.stdout.write(shlex.join(recipe_command(args.trainer, RunSpec(**fields))) + "\n")
        return 0
    if args.command == "run":
        run_dir = args.results / args.env.replace(":", "_") / f"{args.trainer}-seed{args.seed}"
        fields = {name: getattr(args, name) for name in asdict(RunSpec()) if name != "out_dir"}
        spec = RunSpec(**fields, out_dir=str(run_dir / "recipe"))
        argv = recipe_command(args.trainer, spec)
        argv[0] = sys.executable
        return supervise(argv, run_dir, spec.episodes, timeout_s=args.timeout_s)
    report = collect(args.results, args.episodes_per_step)
    write_json(args.out, report)
    plot(report, args.plot)
    for env, entry in report["envs"].items():
        for trainer, result in entry["trainers"].items():
            inside = result.get("inside")
            share = "" if inside is None else f" {inside:.0%} inside"
            costs = entry["runs"][trainer]["step_cost"]
            step_s = float(np.nanmean([c["step_s"] for c in costs])) if costs else math.nan
            env_share = float(np.nanmean([c["env_share"] for c in costs])) if costs else math.nan
            sys.stdout.write(
                f"{env} {trainer}: {result['verdict']}{share}; {step_s:.1f} s/step, "
                f"env {env_share:.2%} of it\n"
            )
    problems = failures(report)
    for line in problems:
        logger.error("%s", line)
    logger.info("report %s, curves %s", args.out, args.plot)
    return 1 if problems else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
