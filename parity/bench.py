"""Cross-framework benchmark: what one RL step costs in each trainer, on the same workload.

    python -m parity.bench                           # every trainer that runs here, 4 steps
    python -m parity.bench --trainers reference trl --steps 6 --out results/parity_bench

Every trainer trains the same warm tiny model (`parity.shared.warm_model.warm_model_dir`) on
the same env (``game:GuessTheNumber-v0-easy``) with the batch of `parity.e2e.config.E2EConfig`
(2 tasks x 4 episodes per step; verl's CPU harness plays 4 episodes a step,
`parity.e2e.verl_cpu`) through its own loop: the reference trainer (`xpgym.reference.train`)
and every run of `parity.e2e.runs` (TRL's ``GRPOTrainer.train()``, verl's V1 trainer with
the harness's HF replica and with its own vLLM replica, OpenRLHF's ``train_ppo_ray``, and the
other trainers registered there). Each runs in a fresh process so its peak memory is its own.
Per trainer, the median over the steps after the first (the first pays for warm-up) of:

- ``step_s``: wall time of an RL step, split into ``rollout_s`` (collecting the step's
  episodes, env included), ``env_s`` (time inside the envs' ``reset``/``step``, from the
  episode log of `xpgym.core.wrappers.episode_log`) and ``update_s`` (the rest of the step);
- ``policy_tokens_per_s``: policy tokens trained per second of step time;
- ``env_share``: ``env_s / rollout_s``, the env's part of rolling out;
- ``peak_rss_mib``: the run's peak memory: for a run in one process (reference, TRL), the
  largest resident memory of that process; for a harness run in its own process tree (Ray,
  vLLM's engine, DeepSpeed: verl, OpenRLHF, ...), the largest summed resident memory of the
  tree (``peak_rss_gib`` of `parity.e2e.subprocess_run`; pages shared between processes
  counted once per process, so an upper bound).

Writes ``<out>/bench.json`` (rows + the machine and commit, for tracking over commits),
``<out>/table.md`` and ``<out>/bench.png`` (the analogue of the GEM paper's per-framework
time figure). On the GPU runners the same table comes from ``parity.curves.gpu`` runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from statistics import median
from typing import Any

from parity.e2e.config import E2EConfig
from parity.e2e.runs import all_runs, run
from parity.shared import reports
from parity.shared.environment import set_environment
from parity.shared.warm_model import warm_model_dir
from xpgym.core.wrappers.episode_log import EPISODE_LOG_VARIABLE, read_episode_log

__all__ = ["TRAINERS", "bench_one", "main", "markdown_table", "plot", "row"]

logger = logging.getLogger(__name__)

TRAINERS = ("reference", *all_runs())
"""The reference trainer and every run of `parity.e2e` (``verl`` and ``verl-vllm`` are verl
with each of its rollouts): the trainers whose own loop runs on CPU."""

RESULTS_DIR = Path("results/parity_bench")


def _env_seconds_per_step(log_dir: Path, steps: int) -> tuple[list[float], int]:
    """Env seconds of each step and the episodes per step: the logged episodes in the order
    they ended, split evenly over `steps` (each trainer plays a fixed batch per step)."""
    records = read_episode_log(log_dir)
    batch = len(records) // steps
    seconds = [sum(r["env_s"] for r in records[k * batch : (k + 1) * batch]) for k in range(steps)]
    return seconds, batch


def _run_reference(cfg: E2EConfig, warm_dir: Path) -> dict[str, Any]:
    """The reference trainer from the same warm model, env and batch as `parity.e2e.runs`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import xpgym
    from xpgym.core.wrappers.episode_log import log_episodes_if_requested
    from xpgym.reference.trainer import TrainerConfig, train

    torch.set_num_threads(cfg.threads)  # as `parity.e2e.runs.run` does for the others
    torch.manual_seed(cfg.seed)
    tokenizer = AutoTokenizer.from_pretrained(warm_dir)
    model = AutoModelForCausalLM.from_pretrained(warm_dir)
    config = TrainerConfig(
        algorithm="rebn",
        gamma=cfg.gamma,
        lr=cfg.lr,
        max_new_tokens=cfg.max_new_tokens,
        num_episodes=cfg.tasks_per_step * cfg.group_size,
        group_size=cfg.group_size,
        seed=cfg.seed,
    )
    num_envs = cfg.tasks_per_step * cfg.group_size
    vec = xpgym.make_vec(cfg.warm.env, num_envs, wrappers=[log_episodes_if_requested])
    try:
        history = train(model, tokenizer, vec, config, num_steps=cfg.steps)
    finally:
        vec.close()
    return {
        "trainer": "reference",
        "steps_completed": len(history),
        "rollout_s": [h["rollout_s"] for h in history],
        "update_s": [h["update_s"] for h in history],
        "step_s": [h["rollout_s"] + h["update_s"] for h in history],
        "policy_tokens": [h["num_tokens"] for h in history],
    }


def row(
    result: dict[str, Any], env_s: Sequence[float], peak_rss_mib: float, episodes_per_step: int
) -> dict[str, Any]:
    """One table row from a run's per-step times (medians over the steps after the first)."""
    steps = len(result["step_s"])
    skip = 1 if steps > 1 else 0

    def med(values: Sequence[float]) -> float:
        return float(median(values[skip:steps]))

    step_s, rollout_s = med(result["step_s"]), med(result["rollout_s"])
    tokens = med(result["policy_tokens"])
    env = med(env_s)
    return {
        "trainer": result["trainer"],
        "steps": steps,
        "episodes_per_step": episodes_per_step,
        "step_s": step_s,
        "rollout_s": rollout_s,
        "env_s": env,
        "update_s": step_s - rollout_s,
        "policy_tokens_per_step": tokens,
        "policy_tokens_per_s": tokens / step_s if step_s > 0 else float("nan"),
        "env_share": env / rollout_s if rollout_s > 0 else float("nan"),
        "peak_rss_mib": peak_rss_mib,
    }


def _peak_rss_mib() -> float:
    """Largest resident set (MiB) of this process or of a child it waited for (Linux: KiB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024


def bench_one(name: str, cfg: E2EConfig, out_dir: Path) -> dict[str, Any]:
    """Run `name` (one of `TRAINERS`) in this process and return its row, named `name`
    (``{"trainer", "error"}`` if it crashed)."""
    warm_dir = warm_model_dir(cfg.warm)
    if name == "reference":
        log_dir = out_dir / "episodes" / f"{name}-seed{cfg.seed}"
        with set_environment({EPISODE_LOG_VARIABLE: str(log_dir)}):
            result = _run_reference(cfg, warm_dir)
    else:
        trainer, rollout = all_runs()[name]
        result = run([trainer], replace(cfg, rollout=rollout), out_dir, warm_dir=warm_dir)[name]
        log_dir = Path(result.get("episode_log", ""))
    if result.get("error"):
        return {"trainer": name, "error": result["error"]}
    env_s, batch = _env_seconds_per_step(log_dir, len(result["step_s"]))
    peak_mib = max(_peak_rss_mib(), 1024 * result.get("peak_rss_gib", 0.0))
    return {**row(result, env_s, peak_mib, batch), "trainer": name}


def _bench_in_subprocess(name: str, steps: int, out_dir: Path) -> dict[str, Any]:
    """`bench_one` in a fresh interpreter (its own peak memory); its row from JSON."""
    row_file = out_dir / f"{name}.row.json"
    row_file.unlink(missing_ok=True)
    command = [sys.executable, "-m", "parity.bench", "--one", name, "--steps", str(steps)]
    process = subprocess.run([*command, "--out", str(out_dir)], check=False)
    if not row_file.exists():
        return {"trainer": name, "error": f"exited with {process.returncode}, no row written"}
    return json.loads(row_file.read_text())


COLUMNS = (
    ("trainer", "trainer", "{}"),
    ("steps", "steps", "{}"),
    ("episodes_per_step", "episodes/step", "{}"),
    ("step_s", "step s", "{:.2f}"),
    ("rollout_s", "rollout s", "{:.2f}"),
    ("env_s", "env s", "{:.4f}"),
    ("update_s", "update s", "{:.2f}"),
    ("policy_tokens_per_s", "policy tokens/s", "{:.0f}"),
    ("env_share", "env share of rollout", "{:.2%}"),
    ("peak_rss_mib", "peak RSS MiB", "{:.0f}"),
)


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as a markdown table (a crashed trainer's row names its error)."""
    cells = [
        [entry["trainer"], f"crashed: {entry['error']}"]
        if entry.get("error")
        else [fmt.format(entry[key]) for key, _, fmt in COLUMNS]
        for entry in rows
    ]
    return reports.markdown_table([title for _, title, _ in COLUMNS], cells)


def plot(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Stacked bars per trainer: env, rest of rollout (generation), update seconds."""
    plt = reports.pyplot(needed_by="parity.bench plots")
    ok = [r for r in rows if not r.get("error")]
    names = [r["trainer"] for r in ok]
    env = [r["env_s"] for r in ok]
    generation = [r["rollout_s"] - r["env_s"] for r in ok]
    update = [r["update_s"] for r in ok]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.barh(names, env, label="env")
    ax.barh(names, generation, left=env, label="rollout without env (generation, prompts)")
    ax.barh(
        names, update, left=[a + b for a, b in zip(env, generation, strict=True)], label="update"
    )
    ax.set_xlabel("seconds per RL step (median)")
    ax.legend(fontsize=8)
    reports.save_figure(fig, path)


def _commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns 1 when a trainer crashed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trainers", nargs="+", choices=TRAINERS, default=list(TRAINERS))
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--one", choices=TRAINERS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    args.out.mkdir(parents=True, exist_ok=True)
    cfg = E2EConfig(steps=args.steps)
    if args.one:  # the child process of one trainer
        result = bench_one(args.one, cfg, args.out)
        reports.write_json(args.out / f"{args.one}.row.json", result)
        return 0
    rows = [_bench_in_subprocess(name, args.steps, args.out) for name in args.trainers]
    report = {
        "rows": rows,
        "config": {
            "steps": args.steps,
            "env": cfg.warm.env,
            "episodes_per_step": cfg.tasks_per_step * cfg.group_size,
        },
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "commit": _commit(),
    }
    reports.write_json(args.out / "bench.json", report)
    table = markdown_table(rows)
    (args.out / "table.md").write_text(table)
    plot(rows, args.out / "bench.png")
    sys.stdout.write(table)
    logger.info("results in %s", args.out)
    return 1 if any(r.get("error") for r in rows) else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
