"""Layer 2 of the parity suite: learning curves of every trainer's own estimator on CPU.

    python -m parity.curves [--full] [--steps N] [--seeds K] [--out DIR] [--planted]

One env (``game:GuessTheNumber-v0-easy``), one tiny model with the same start weights for
every run: the warm model of `parity.shared.warm_model` (the CPU demo's tokenizer and model,
pretrained once on transcripts of random play by the demo's warm start; the weights are
cached in the output directory, so a rerun skips it). Then, from those weights:

* the **band**: the reference trainer (`xpgym.reference.trainer.train`, REINFORCE + ReBN over
  turns) with sampling seeds ``0 .. K-1``; per step, the mean ``+- k * std`` (sample std
  over the K seeds, half-width at least `CurveConfig.floor`) of the metric;
* one run per trainer whose advantage code imports here (`parity.tokens`): the same loop
  and seed 0, with step 4 (the advantages) replaced by the trainer's own estimator run on
  the same batch (``Trainer(advantage_fn=...)``), and the trainer's default loss
  aggregation and rows (`Variant`);
* optionally (``--planted``) planted bugs, to measure what the band can detect: the
  reference with its advantages' sign flipped, and with 10x the learning rate.

The **metric** is the mean episode return of each step's training batch (episodes sampled
by the current policy before the update), smoothed by a trailing moving average over
`CurveConfig.window` steps. A curve "stays inside" when at least `CurveConfig.min_inside` of
its points lie in the band. Each reference seed is also checked against the band of the
*other* seeds (leave-one-out), which estimates how often a correct trainer would be called
outside.

Writes ``<out>/curves.json`` (`run`'s report) and ``<out>/curves.png``; exits 0 (a curve
outside the band is reported, not an error: a trainer may differ by design, see
docs/parity.md).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from parity.shared.curves import band, inside_fraction, smooth
from parity.shared.reports import pyplot, save_figure, write_json
from parity.shared.warm_model import WarmModelConfig, start_weights, tokenizer_and_model
from parity.tokens.cases import Case, policy_tokens
from parity.tokens.core import Estimator, TokenValues

__all__ = [
    "FULL",
    "PLANTED",
    "VARIANTS",
    "CurveConfig",
    "Variant",
    "main",
    "plot",
    "run",
    "token_advantages",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CurveConfig(WarmModelConfig):
    """Everything a curves run depends on (stored in the report). Defaults: the CI size.

    Model and start weights: the fields of `WarmModelConfig`. RL (the reference trainer's
    `TrainerConfig`, algorithm ``rebn``): `steps` updates of `episodes` episodes (`num_envs`
    envs), `lr`, `gamma`, `max_new_tokens`. Band: `seeds` reference seeds, half-width
    ``max(k * std, floor)``, metric smoothed over `window` steps; a curve is inside when a
    fraction >= `min_inside` of its points are. `threads`: torch threads.
    """

    steps: int = 10
    episodes: int = 16
    lr: float = 1e-3
    gamma: float = 0.9
    max_new_tokens: int = 6
    seeds: int = 4
    k: float = 3.0
    floor: float = 0.02
    window: int = 4
    min_inside: float = 0.75


FULL = CurveConfig(
    pretrain_steps=150, pretrain_lr=1e-3, steps=100, episodes=64, lr=3e-4, seeds=6, window=10
)
"""``--full``: the demo's pretraining and RL settings (64 episodes, lr 3e-4), 100 steps."""


@dataclass(frozen=True)
class Variant:
    """One curve: the reference loop with a trainer's estimator and loss defaults.

    Attributes:
        name: Curve name (report key, legend).
        trainer: Module under `parity.tokens` whose estimator replaces the reference's
            advantages; None: the reference's own.
        code: The estimator's ``code`` in that module's ``SPEC``.
        layout: Rows the trainer trains on (`TrainerConfig.layout`).
        loss_agg_mode: The trainer's default loss aggregation (`TrainerConfig`).
        sign: Multiplies the advantages (-1: the planted sign flip).
        lr_scale: Multiplies the learning rate (the planted 10x lr).
        why: Where the settings come from.
    """

    name: str
    trainer: str | None
    code: str = ""
    layout: str = "per_episode"
    loss_agg_mode: str = "token-mean"
    sign: float = 1.0
    lr_scale: float = 1.0
    why: str = ""


VARIANTS: tuple[Variant, ...] = (
    Variant(
        "verl",
        "verl",
        "reinforce_plus_plus",
        why="verl's REINFORCE++ (per-token returns whitened over tokens); actor "
        "loss_agg_mode default token-mean",
    ),
    Variant(
        "openrlhf",
        "openrlhf",
        "reinforce",
        why="OpenRLHF --algo.advantage.estimator reinforce (episode total discounted per "
        "sequence position, whitened); PolicyLoss token_level_loss=True (token-mean)",
    ),
    Variant(
        "rl2",
        "rl2",
        "reinforce, global_norm, norm_var",
        why="RL2 adv.estimator reinforce with global_norm (episode totals normalised over the "
        "batch); actor.avg_level token (token-mean)",
    ),
    Variant(
        "oat",
        "oat",
        "XpgymLearner ReBN (batch_normalize of the row sums)",
        layout="per_turn",
        loss_agg_mode="seq-mean-token-mean",
        why="Oat trains one row per turn; PPOLearner.masked_aggregator is masked_mean over "
        "each row, then the mean over rows (seq-mean-token-mean)",
    ),
)
"""Each trainer's own estimator for the reference's algorithm (ReBN), in the reference loop.
ROLL is absent: its advantage code does not import on CPU (docs/parity.md)."""

PLANTED: tuple[Variant, ...] = (
    Variant("planted: sign flip", None, sign=-1.0, why="the reference with -A"),
    Variant("planted: 10x lr", None, lr_scale=10.0, why="the reference with 10x the lr"),
)
"""Planted bugs (``--planted``): what the band must catch."""


# --------------------------------------------------------------------------------------
# One curve
# --------------------------------------------------------------------------------------


def token_advantages(batch: Any, values: TokenValues) -> Any:
    """`values` (per episode of ``batch.episodes``, one per policy token in order, as the
    parity estimators return them) placed on the ``[B, L]`` rows of `batch`.

    Raises:
        ValueError: the counts, or the tokens under ``batch.loss_mask``, do not match the
            episodes' policy tokens (the values would land on the wrong tokens).
    """
    import torch

    mask = batch.loss_mask.cpu().numpy()
    input_ids = batch.input_ids.cpu().numpy()
    out = np.zeros(mask.shape, dtype=np.float64)
    used = [0] * len(values)
    for b, e in enumerate(batch.rows.episode_index):
        n = int(mask[b].sum())
        expected = policy_tokens(batch.episodes[e])[used[e] : used[e] + n]
        if len(values[e]) < used[e] + n or not np.array_equal(input_ids[b][mask[b]], expected):
            raise ValueError(f"row {b}: its policy tokens are not episode {e}'s next {n}")
        out[b, mask[b]] = values[e][used[e] : used[e] + n]
        used[e] += n
    if used != [len(v) for v in values]:
        raise ValueError(f"{used} tokens placed per episode, {[len(v) for v in values]} given")
    return torch.as_tensor(out, dtype=torch.float32)


def _estimator(trainer: str, code: str) -> tuple[Any, Estimator]:
    spec = importlib.import_module(f"parity.tokens.{trainer}").SPEC
    for estimator in spec.estimators:
        if estimator.code == code and estimator.run is not None:
            return spec, estimator
    raise ValueError(f"parity.tokens.{trainer} has no runnable estimator {code!r}")


def _advantage_fn(variant: Variant, estimator: Estimator | None, case: Case) -> Callable | None:
    if estimator is None and variant.sign == 1.0:
        return None

    def advantage_fn(batch: Any) -> Any:
        if estimator is None:
            return variant.sign * batch.advantages
        assert estimator.run is not None
        return variant.sign * token_advantages(batch, estimator.run(case, batch.episodes))

    return advantage_fn


def _train(cfg: CurveConfig, variant: Variant, seed: int, weights: Path) -> list[float]:
    """Mean return of each step's training batch: the reference loop from `weights`."""
    import torch

    import xpgym
    from xpgym.reference.trainer import TrainerConfig, train

    estimator = None
    stack = contextlib.ExitStack()
    if variant.trainer is not None:
        spec, estimator = _estimator(variant.trainer, variant.code)
        stack.enter_context(spec.load())  # ImportError: the trainer is not runnable here
    with stack:
        torch.set_num_threads(cfg.threads)
        tokenizer, model = tokenizer_and_model(cfg)
        model.load_state_dict(torch.load(weights, weights_only=True))
        config = TrainerConfig(
            algorithm="rebn",
            layout=variant.layout,  # type: ignore[arg-type]
            loss_agg_mode=variant.loss_agg_mode,  # type: ignore[arg-type]
            gamma=cfg.gamma,
            lr=cfg.lr * variant.lr_scale,
            max_new_tokens=cfg.max_new_tokens,
            num_episodes=cfg.episodes,
            seed=seed,
        )
        case = Case("curves", cfg.gamma, f"training batches of {cfg.env}")
        vec = xpgym.make_vec(cfg.env, cfg.num_envs)
        try:
            history = train(
                model,
                tokenizer,
                vec,
                config,
                num_steps=cfg.steps,
                advantage_fn=_advantage_fn(variant, estimator, case),
            )
        finally:
            vec.close()
    return [h["return_mean"] for h in history]


def _job(cfg: CurveConfig, variant: Variant, seed: int, weights: Path) -> dict[str, Any]:
    """`_train` timed; ``{"raw", "seconds"}`` or ``{"not_runnable"}`` (an ImportError)."""
    began = time.perf_counter()
    try:
        raw = _train(cfg, variant, seed, weights)
    except ImportError as err:
        return {"not_runnable": f"cannot import: {err}"}
    return {"raw": raw, "seconds": round(time.perf_counter() - began, 1)}


def _run_jobs(
    cfg: CurveConfig, tasks: Sequence[tuple[Variant, int]], weights: Path, jobs: int
) -> list[dict[str, Any]]:
    """`_job` for every ``(variant, seed)``, in `jobs` processes (1: in this one)."""
    if jobs <= 1:
        return [_job(cfg, variant, seed, weights) for variant, seed in tasks]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")  # no forked torch or thread state
    with ProcessPoolExecutor(jobs, mp_context=context) as pool:
        futures = [pool.submit(_job, cfg, variant, seed, weights) for variant, seed in tasks]
        return [future.result() for future in futures]


# --------------------------------------------------------------------------------------
# The band
# --------------------------------------------------------------------------------------


def _leave_one_out(curves: np.ndarray, cfg: CurveConfig) -> list[float]:
    """Each reference curve against the band of the others (needs K >= 3)."""
    out = []
    for i in range(len(curves)):
        others = np.delete(curves, i, axis=0)
        out.append(inside_fraction(curves[i], *band(others, cfg.k, cfg.floor)))
    return out


# --------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------


def _verdict(fraction: float, cfg: CurveConfig) -> str:
    return "inside" if fraction >= cfg.min_inside else "outside"


def run(
    cfg: CurveConfig,
    out_dir: Path,
    variants: Sequence[Variant] = VARIANTS,
    planted: Sequence[Variant] = (),
    *,
    jobs: int = 2,
) -> dict[str, Any]:
    """Train every curve and compare it with the band; return the report.

    Args:
        cfg: The configuration.
        out_dir: Where the start weights are cached.
        variants: The trainers' curves.
        planted: Planted bugs (`PLANTED`), reported under ``"planted"``.
        jobs: Worker processes (each with ``cfg.threads`` torch threads); 1: this process.

    Returns:
        ``{"config", "metric", "start_weights": {key, cached, seconds}, "band": {seeds,
        mean, low, high}, "reference": {seed: {raw, curve, inside_loo, verdict_loo}},
        "trainers": {name: {trainer, code, layout, loss_agg_mode, why, version, raw,
        curve, inside, verdict, seconds} | {..., not_runnable}}, "planted": {name: ...},
        "seconds"}`` (``raw``: the metric per step; ``curve``: smoothed; ``inside``: the
        fraction of its points in the band; ``inside_loo``: a reference seed against the
        band of the other seeds).
    """
    start = time.perf_counter()
    weights, cached = start_weights(cfg, out_dir)
    report: dict[str, Any] = {
        "config": asdict(cfg),
        "metric": f"mean episode return of each step's training batch, trailing moving "
        f"average over {cfg.window} steps",
        "start_weights": {
            "key": cfg.pretrain_key(),
            "cached": cached,
            "seconds": round(time.perf_counter() - start, 1),
        },
    }
    reference = Variant("reference", None, why="xpgym.reference.trainer defaults")
    tasks = [(reference, seed) for seed in range(cfg.seeds)]
    tasks += [(variant, 0) for variant in (*variants, *planted)]
    results = _run_jobs(cfg, tasks, weights, jobs)
    for (variant, seed), result in zip(tasks, results, strict=True):
        logger.info("%s seed %d: %s", variant.name, seed, result.get("seconds", result))
    raw = [result["raw"] for result in results[: cfg.seeds]]
    curves = np.array([smooth(r, cfg.window) for r in raw])
    mean, half = band(curves, cfg.k, cfg.floor)
    loo = _leave_one_out(curves, cfg) if cfg.seeds >= 3 else [None] * cfg.seeds
    report["band"] = {
        "seeds": list(range(cfg.seeds)),
        "mean": mean.tolist(),
        "low": (mean - half).tolist(),
        "high": (mean + half).tolist(),
    }
    report["reference"] = {
        str(seed): {
            "raw": raw[seed],
            "curve": curves[seed].tolist(),
            "inside_loo": loo[seed],
            "verdict_loo": None if loo[seed] is None else _verdict(loo[seed], cfg),
            "seconds": results[seed]["seconds"],
        }
        for seed in range(cfg.seeds)
    }
    rest = iter(results[cfg.seeds :])
    for key, group in (("trainers", variants), ("planted", planted)):
        report[key] = {v.name: _compare(cfg, v, next(rest), mean, half) for v in group}
    report["seconds"] = round(time.perf_counter() - start, 1)
    return report


def _compare(
    cfg: CurveConfig, variant: Variant, result: dict[str, Any], mean: np.ndarray, half: np.ndarray
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        k: v for k, v in asdict(variant).items() if k not in ("name", "sign", "lr_scale")
    }
    if variant.trainer is not None:
        entry["version"] = _estimator(variant.trainer, variant.code)[0].version()
    if "not_runnable" in result:
        return {**entry, **result}
    curve = smooth(result["raw"], cfg.window)
    fraction = inside_fraction(curve, mean, half)
    entry.update(
        raw=result["raw"],
        curve=curve.tolist(),
        inside=fraction,
        verdict=_verdict(fraction, cfg),
        seconds=result["seconds"],
    )
    logger.info("%s: %.0f%% inside (%s)", variant.name, 100 * fraction, entry["verdict"])
    return entry


# --------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------


def plot(report: dict[str, Any], path: Path) -> None:
    """All curves and the band, one PNG."""
    plt = pyplot(needed_by="parity.curves plots")
    steps = np.arange(len(report["band"]["mean"]))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    cfg = report["config"]
    ax.fill_between(
        steps,
        report["band"]["low"],
        report["band"]["high"],
        color="0.85",
        label=f"reference band: mean +- {cfg['k']:g} std over {cfg['seeds']} seeds",
    )
    for seed, ref in report["reference"].items():
        ax.plot(steps, ref["curve"], color="0.55", lw=0.8, label="reference seeds" * (seed == "0"))
    for key, style in (("trainers", "-"), ("planted", ":")):
        for name, entry in report[key].items():
            if "curve" in entry:
                ax.plot(steps, entry["curve"], style, lw=1.6, label=f"{name} ({entry['verdict']})")
    ax.set_xlabel("RL step")
    ax.set_ylabel(f"training-batch mean return ({cfg['window']}-step moving average)")
    ax.set_title(f"parity curves: {cfg['env']}, tiny model, same start weights")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    save_figure(fig, path)


def _table(report: dict[str, Any]) -> str:
    lines = [f"{'curve':<24}{'inside':>8}  verdict"]
    for seed, ref in report["reference"].items():
        loo = "-" if ref["inside_loo"] is None else f"{ref['inside_loo']:.2f}"
        lines.append(f"{'reference seed ' + seed:<24}{loo:>8}  (leave-one-out)")
    for key in ("trainers", "planted"):
        for name, entry in report[key].items():
            if "not_runnable" in entry:
                lines.append(f"{name:<24}{'-':>8}  not runnable: {entry['not_runnable']}")
            else:
                lines.append(f"{name:<24}{entry['inside']:>8.2f}  {entry['verdict']}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit status (0 unless something fails to run)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="the FULL preset (not CI-sized)")
    parser.add_argument("--steps", type=int, help="RL steps per curve")
    parser.add_argument("--seeds", type=int, help="reference seeds in the band (>= 2)")
    parser.add_argument("--k", type=float, help="band half-width in stds")
    parser.add_argument("--threads", type=int, help="torch threads per process")
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--trainer", action="append", help="default: every trainer")
    parser.add_argument("--planted", action="store_true", help="also run the planted bugs")
    parser.add_argument("--out", type=Path, default=Path("results/parity_curves"))
    args = parser.parse_args(argv)
    cfg = FULL if args.full else CurveConfig()
    overrides = {k: getattr(args, k) for k in ("steps", "seeds", "k", "threads")}
    cfg = replace(cfg, **{k: v for k, v in overrides.items() if v is not None})
    variants = [v for v in VARIANTS if not args.trainer or v.name in args.trainer]
    report = run(cfg, args.out, variants, PLANTED if args.planted else (), jobs=args.jobs)
    write_json(args.out / "curves.json", report)
    plot(report, args.out / "curves.png")
    sys.stdout.write(_table(report))
    logger.info("%.1f s; wrote %s/curves.json and curves.png", report["seconds"], args.out)
    return 0
