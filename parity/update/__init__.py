r"""Layer 3 of the parity suite: each trainer's own update code on the same batch.

    python -m parity.update [--trainers verl trl ...] [--steps K] [--write-docs]
    python -m parity.update --device cuda    # the reference and TRL on a GPU (CUDA_RUNNERS)

1. **Episodes** (`build_episodes`): 8 episodes of ``game:GuessTheNumber-v0-easy`` sampled
   once from the warm tiny model (`parity.shared.warm_model.warm_model_dir`) with token ids
   and sampler log-probs, seeded.
2. **Reference** (`reference_run`): the reference trainer (`xpgym.reference.trainer`),
   from the same weights, configured with each trainer's documented semantics
   (`Semantics`: rows, loss aggregation, dual clip), ReBN advantages (population std,
   eps 1e-9: what every adapter's rebn hook computes), AdamW (`parity.update._common`),
   ``old_logprobs="rollout"``: the sampler's log-probs are ``log pi_old`` in every step,
   so step 1 has ratio 1 and steps 2..K exercise the clipped ratio.
3. **Each trainer** (``parity/update/<trainer>.py``, ``run(job) -> TrainerRun``; imported
   lazily; a missing module or `parity.tokens.core.NotRunnableError` gives ``not runnable``):
   its adapter's batch, its own loss, backward and optimizer step, K steps.
4. **Compare** per step (`compare_steps`): the loss, the grad norm (before clipping) and the
   parameter delta ``d = params_after - params_before`` of the step: cosine of ``d_trainer``
   with ``d_reference`` and the norm ratio ``|d_trainer| / |d_reference|``.

Classification (`classify_run`), over all K steps:

* **exact**: every step within `TOLERANCES` of the reference;
* **formula**: not exact, but within `TOLERANCES` of a stated formula's prediction: the
  reference run with the named difference applied (`classify_run`'s `formula`). Every
  trainer that runs here is exact, so the driver states no formula yet;
* **mismatch**: neither (exit 1; CI fails);
* **not runnable: why**.

Rows of a CPU run go to the ``layer3`` key of ``parity/report.json`` (next to layer 1's keys)
and, with ``--write-docs``, into docs/parity.md; a ``--device cuda`` run only prints its table
(`parity.curves.gpu_check` keeps its numbers). ``--plant mask|sign|lr`` runs every trainer on a
planted bug (`plant`) against the clean reference: each must come out ``mismatch``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from parity.shared import reports
from parity.shared.trainer_code import NotRunnableError
from parity.update.job import StepResult, TrainerRun, UpdateHParams, UpdateJob
from xpgym.core.trajectory import Episode

__all__ = [
    "CUDA_RUNNERS",
    "DOCS_PATH",
    "PLANTS",
    "SEMANTICS",
    "TOLERANCES",
    "TRAINERS",
    "Semantics",
    "StepComparison",
    "Tolerances",
    "build_episodes",
    "classify_run",
    "compare_steps",
    "main",
    "markdown_table",
    "plant",
    "reference_run",
    "run",
]

logger = logging.getLogger(__name__)

TRAINERS: tuple[str, ...] = ("verl", "openrlhf", "rl2", "oat", "trl", "roll")
"""Runner modules ``parity.update.<name>``, in table order."""

CUDA_RUNNERS: tuple[str, ...] = ("trl",)
"""Runners that take ``UpdateJob.device="cuda"`` (TRL places the model with its accelerator);
the others build CPU tensors and stand in for ``torch.cuda`` (each module's docstring), so
on another device they are reported not runnable."""

ENV = "game:GuessTheNumber-v0-easy"
DOCS_PATH = reports.DOCS_DIR / "parity.md"
TABLE_START, TABLE_END = "<!-- parity-update:start -->", "<!-- parity-update:end -->"


@dataclass(frozen=True)
class Semantics:
    """How the reference trainer is configured to stand for one trainer.

    Attributes:
        layout: The rows the trainer's adapter trains on (`TrainerConfig.layout`).
        loss_agg_mode: The trainer's loss aggregation (`xpgym.reference.losses`).
        dual_clip_c: The trainer's dual-clip constant, or None.
        adam_betas: The AdamW betas the trainer runs with (its default, or its recipe's);
            eps is 1e-8 for all (torch's default, which none of them changes).
        old_logprobs: Where the trainer's ``log pi_old`` comes from (`TrainerConfig`):
            ``"rollout"`` (the sampler's, every step) or ``"recompute"`` (a no-grad pass
            at the start of each step: the ratio is 1 at the start of every step).
        tis_cap: The trainer's truncated importance-sampling cap (`TrainerConfig.tis_cap`).
        advantage_fn: The trainer's estimator where the reference has none like it
            (`xpgym.reference.trainer.AdvantageFn`: ``batch -> [B, L]`` token advantages).
        why: Where these settings come from (the trainer's code or defaults).
    """

    layout: str = "per_episode"
    loss_agg_mode: str = "token-mean"
    dual_clip_c: float | None = None
    adam_betas: tuple[float, float] = (0.9, 0.999)
    old_logprobs: str = "rollout"
    tis_cap: float | None = None
    advantage_fn: Callable[[Any], Any] | None = None
    why: str = ""


def _episode_batch_norm(batch: Any) -> Any:
    """ROLL's trajectory advantages: each episode's total reward normalised over every episode
    of the batch (unbiased std, eps 1e-6 on the std), on each of its policy tokens."""
    from xpgym.training.advantages import broadcast_to_tokens, grpo

    scores = batch.scores
    normalised = grpo(scores, ["batch"] * len(scores), std="unbiased", eps=1e-6)
    per_row = normalised[batch.rows.episode_index]
    return broadcast_to_tokens(per_row, batch.rows.turn_index)


SEMANTICS: dict[str, Semantics] = {
    "verl": Semantics(
        dual_clip_c=3.0,
        adam_betas=(0.9, 0.95),
        why="one row per episode (to_data_proto); ppo_overrides: token-mean, AdamW betas "
        "(0.9, 0.95); compute_policy_loss_vanilla always applies dual clip, clip_ratio_c 3.0",
    ),
    "openrlhf": Semantics(
        adam_betas=(0.9, 0.95),
        why="one row per episode (to_experience); PolicyLoss token-level with "
        "iter_grad_accum_global_norm: token mean over the step's batch; adam_betas default "
        "(0.9, 0.95)",
    ),
    "rl2": Semantics(
        old_logprobs="recompute",
        why="one row per episode (to_tensor_dict); avg_level token: token mean over the batch; "
        "AdamW default betas (0.9, 0.999); no old_logps without KL or update_per_rollout > 1: "
        "Actor.update uses the current log-probs detached (ratio 1 at each step's start)",
    ),
    "oat": Semantics(
        layout="per_turn",
        loss_agg_mode="seq-mean-token-mean",
        adam_betas=(0.9, 0.95),
        old_logprobs="recompute",
        tis_cap=2.0,
        why="one row per turn (to_transition_data); Oat's default masked_mean per row, then "
        "the mean over rows; learning_step recomputes log pi_old at its start and weighs each "
        "token by min(exp(old - sampler), tis_c=2.0)",
    ),
    "trl": Semantics(
        why="one completion per episode (to_rollout_output); loss_type 'dapo': token mean "
        "over the batch's policy tokens"
    ),
    "roll": Semantics(
        old_logprobs="recompute",
        advantage_fn=_episode_batch_norm,
        why="one row per episode (trajectory_batch); ROLL's trajectory estimator gives every "
        "policy token its episode's total normalised over the batch's episodes (mean_std, "
        "unbiased, eps 1e-6); ActorWorker recomputes log pi_old at the step's start; agg_loss "
        "token-mean",
    ),
}
"""Each trainer's documented semantics (a runner module may override its entry with a
module attribute ``SEMANTICS``)."""


@dataclass(frozen=True)
class Tolerances:
    """What ``exact`` allows, per step: ``|x - ref| <= rtol * |ref| + atol`` for the loss
    and the grad norm; the delta's cosine ``>= min_cosine`` and its norm ratio within
    ``1 +- norm_rtol``."""

    loss_rtol: float = 1e-4
    loss_atol: float = 1e-6
    grad_rtol: float = 1e-4
    min_cosine: float = 0.999
    norm_rtol: float = 1e-3


TOLERANCES = Tolerances()
"""Float32 on CPU, different kernels (eager vs sdpa attention, fused log-softmax, summation
order) and Adam's first steps (``lr * g / (|g| + eps)``, which turns relative rounding
differences of near-zero gradients into visible ones) put the runs ~1e-6 apart in loss and
grad norm and a few 1e-5 in the delta's cosine; each planted bug is orders above."""


# --------------------------------------------------------------------------------------
# Episodes, jobs, planted bugs
# --------------------------------------------------------------------------------------


def build_episodes(
    model_dir: Path,
    *,
    num_episodes: int = 8,
    group_size: int = 4,
    max_new_tokens: int = 6,
    seed: int = 0,
) -> list[Episode]:
    """`num_episodes` episodes of `ENV` sampled from the model in `model_dir` (temperature 1,
    top-p 1, top-k off: its log-probs are ``log_softmax(logits)``), with token ids and sampler
    log-probs, in groups of `group_size` (same start state), seeded by `seed`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import xpgym
    from xpgym.rollout.collector import collect_episodes
    from xpgym.rollout.policies.hf import HFPolicy

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    policy = HFPolicy(model, tokenizer, max_new_tokens=max_new_tokens, top_k=0, seed=seed)
    vec = xpgym.make_vec(ENV, group_size)
    try:
        return collect_episodes(
            vec, policy, num_episodes=num_episodes, group_size=group_size, seed=seed
        )
    finally:
        vec.close()


PLANTS: tuple[str, ...] = ("mask", "sign", "lr")


def plant(job: UpdateJob, bug: str) -> UpdateJob:
    """`job` with a planted bug, for a runner to run against the clean reference.

    ``mask``: the last policy token of every turn with two or more leaves the loss mask (it
    moves into the next turn's prompt, as an env token would); ``sign``: every reward
    negated (ReBN advantages flip sign); ``lr``: ten times the learning rate.
    """
    if bug == "lr":
        return replace(job, hparams=replace(job.hparams, lr=job.hparams.lr * 10))
    if bug == "sign":
        episodes = [
            replace(ep, turns=[replace(t, reward=-t.reward) for t in ep.turns])
            for ep in job.episodes
        ]
        return replace(job, episodes=episodes)
    if bug == "mask":
        episodes = [
            replace(ep, turns=[_drop_last_policy_token(t) for t in ep.turns]) for ep in job.episodes
        ]
        return replace(job, episodes=episodes)
    raise ValueError(f"bug must be one of {PLANTS}, got {bug!r}")


def _drop_last_policy_token(turn: Any) -> Any:
    if turn.response_ids is None or len(turn.response_ids) < 2:
        return turn
    logprobs = turn.response_logprobs
    return replace(
        turn,
        response_ids=turn.response_ids[:-1],
        response_logprobs=None if logprobs is None else logprobs[:-1],
    )


# --------------------------------------------------------------------------------------
# The reference run
# --------------------------------------------------------------------------------------


def reference_run(job: UpdateJob, semantics: Semantics) -> TrainerRun:
    """The reference trainer's K steps on `job` with `semantics` (module docstring, step 2):
    one AdamW step per `Trainer.train_step` on all episodes (gradients of the whole batch;
    with token-mean this equals accumulating micro-batches normalised by the batch's
    tokens)."""
    import torch

    from parity.update._common import ADAM_EPS, load_model, snapshot
    from xpgym.reference.trainer import Trainer, TrainerConfig

    hp = job.hparams
    model = load_model(job)
    config = TrainerConfig(
        algorithm="rebn",
        layout=semantics.layout,  # type: ignore[arg-type]
        gamma=hp.gamma,
        num_episodes=len(job.episodes),
        lr=hp.lr,
        adam_betas=semantics.adam_betas,
        adam_eps=ADAM_EPS,
        max_grad_norm=hp.max_grad_norm,
        clip_eps=hp.clip_low,
        clip_eps_high=hp.clip_high,
        dual_clip_c=semantics.dual_clip_c,
        loss_agg_mode=semantics.loss_agg_mode,  # type: ignore[arg-type]
        old_logprobs=semantics.old_logprobs,  # type: ignore[arg-type]
        tis_cap=semantics.tis_cap,
        kl_coef=hp.kl_coef,
        ent_coef=hp.entropy_coef,
        seed=hp.seed,
    )
    trainer = Trainer(model, config, advantage_fn=semantics.advantage_fn)
    steps = []
    with torch.random.fork_rng():
        for _ in range(job.steps):
            metrics = trainer.train_step(job.episodes)
            steps.append(StepResult(metrics["loss"], metrics["grad_norm"], snapshot(model)))
    return TrainerRun(steps=steps)


# --------------------------------------------------------------------------------------
# Comparison and classification
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepComparison:
    """One step of a trainer against the reference (or a formula's prediction)."""

    loss: float
    loss_ref: float
    grad_norm: float
    grad_norm_ref: float
    cosine: float
    norm_ratio: float

    def within(self, tol: Tolerances) -> bool:
        """Whether this step is within `tol` (`Tolerances`)."""
        return (
            abs(self.loss - self.loss_ref) <= tol.loss_rtol * abs(self.loss_ref) + tol.loss_atol
            and abs(self.grad_norm - self.grad_norm_ref) <= tol.grad_rtol * abs(self.grad_norm_ref)
            and self.cosine >= tol.min_cosine
            and abs(self.norm_ratio - 1.0) <= tol.norm_rtol
        )


def _deltas(
    start: dict[str, Any], steps: Sequence[StepResult]
) -> list[tuple[dict[str, Any], Sequence[str]]]:
    out, before = [], start
    for step in steps:
        out.append(({n: step.params[n] - before[n] for n in before}, sorted(before)))
        before = step.params
    return out


def compare_steps(
    start: dict[str, Any], run: TrainerRun, reference: TrainerRun
) -> list[StepComparison]:
    """Per step: loss, grad norm, and the cosine and norm ratio of the step's parameter
    delta, `run` against `reference`, both from the parameters `start`.

    Raises:
        ValueError: different step counts or parameter names (the run is not comparable).
    """
    import torch

    if len(run.steps) != len(reference.steps):
        raise ValueError(f"{len(run.steps)} steps vs the reference's {len(reference.steps)}")
    missing = set(start) ^ set(run.steps[0].params) if run.steps else set()
    if missing:
        raise ValueError(f"parameter names differ from the model's: {sorted(missing)[:5]}")
    out = []
    for (d_run, names), (d_ref, _), step, ref in zip(
        _deltas(start, run.steps),
        _deltas(start, reference.steps),
        run.steps,
        reference.steps,
        strict=True,
    ):
        a = torch.cat([d_run[n].flatten().double() for n in names])
        b = torch.cat([d_ref[n].flatten().double() for n in names])
        b_norm = float(b.norm())
        cosine = float(a @ b) / (float(a.norm()) * b_norm) if float(a.norm()) * b_norm else 0.0
        out.append(
            StepComparison(
                loss=step.loss,
                loss_ref=ref.loss,
                grad_norm=step.grad_norm,
                grad_norm_ref=ref.grad_norm,
                cosine=cosine,
                norm_ratio=float(a.norm()) / b_norm if b_norm else math.inf,
            )
        )
    return out


def classify_run(
    start: dict[str, Any],
    run: TrainerRun,
    reference: TrainerRun,
    formula: TrainerRun | None = None,
    formula_text: str = "",
    tol: Tolerances = TOLERANCES,
) -> tuple[str, str, list[StepComparison]]:
    """``(status, detail, comparisons against the reference)`` of `run` (module docstring).

    `formula` is the reference run with the stated difference (`formula_text`) applied:
    the formula's prediction; a run that is not exact is ``formula`` only within `tol` of it.
    """
    vs_ref = compare_steps(start, run, reference)
    if all(c.within(tol) for c in vs_ref):
        return "exact", "", vs_ref
    if formula is not None and all(c.within(tol) for c in compare_steps(start, run, formula)):
        return "formula", formula_text, vs_ref
    worst = next(c for c in vs_ref if not c.within(tol))
    step = vs_ref.index(worst) + 1
    return (
        "mismatch",
        f"step {step}: loss {worst.loss:.6g} vs {worst.loss_ref:.6g}, grad norm "
        f"{worst.grad_norm:.6g} vs {worst.grad_norm_ref:.6g}, delta cosine {worst.cosine:.6f}, "
        f"norm ratio {worst.norm_ratio:.6f}",
        vs_ref,
    )


# --------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------


def _runner(name: str) -> tuple[Callable[[UpdateJob], TrainerRun], Semantics]:
    """``parity.update.<name>``'s `run` and its semantics; `NotRunnableError` when the module
    is missing or cannot import."""
    try:
        module = importlib.import_module(f"parity.update.{name}")
    except ModuleNotFoundError as err:
        if err.name == f"parity.update.{name}":
            raise NotRunnableError(f"no runner parity/update/{name}.py yet") from err
        raise NotRunnableError(f"cannot import: {err}") from err
    except ImportError as err:
        raise NotRunnableError(f"cannot import: {err}") from err
    return module.run, getattr(module, "SEMANTICS", SEMANTICS[name])


def run(
    trainers: Sequence[str] = TRAINERS,
    *,
    steps: int = 3,
    hparams: UpdateHParams | None = None,
    model_dir: Path | None = None,
    bug: str | None = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """Run layer 3 for `trainers`; return the ``layer3`` report.

    Args:
        trainers: Names from `TRAINERS`.
        steps: Optimizer steps K.
        hparams: The settings (default `UpdateHParams()`).
        model_dir: The warm model (default `parity.shared.warm_model.warm_model_dir` of the CI
            config).
        bug: A planted bug (`plant`) given to every trainer; the reference stays clean.
        device: Where the reference and the runners of `CUDA_RUNNERS` train (the episodes
            are sampled on CPU); a runner not in `CUDA_RUNNERS` is not runnable on another
            device than ``"cpu"``.

    Returns:
        ``{"env", "episodes", "steps", "hparams", "tolerances", "planted", "device", "trainers":
        {name: {status, detail, semantics, stand_ins, notes, seconds, steps: [...]}},
        "summary", "seconds"}``.
    """
    import torch

    from parity.shared.warm_model import WarmModelConfig, warm_model_dir
    from parity.update._common import load_model, snapshot

    started = time.perf_counter()
    torch.set_num_threads(1)
    model_dir = model_dir or warm_model_dir(WarmModelConfig())
    hparams = hparams or UpdateHParams()
    episodes = build_episodes(model_dir, seed=hparams.seed)
    job = UpdateJob(
        model_dir=model_dir, episodes=episodes, steps=steps, hparams=hparams, device=device
    )
    start = snapshot(load_model(job))
    references: dict[Semantics, TrainerRun] = {}
    report: dict[str, Any] = {
        "env": ENV,
        "episodes": len(episodes),
        "policy_tokens": sum(len(t.response_ids or []) for ep in episodes for t in ep.turns),
        "steps": steps,
        "hparams": hparams.__dict__,
        "tolerances": TOLERANCES.__dict__,
        "planted": bug,
        "device": device,
        "trainers": {},
    }
    for name in trainers:
        begin = time.perf_counter()
        row: dict[str, Any] = {}
        try:
            if device != "cpu" and name not in CUDA_RUNNERS:
                raise NotRunnableError(f"its runner runs on CPU only, not on {device}")
            runner, semantics = _runner(name)
            row["semantics"] = {
                key: getattr(value, "__name__", value) for key, value in semantics.__dict__.items()
            }  # an estimator function is recorded by its name
            logger.info("%s: %d steps", name, steps)
            with torch.random.fork_rng():
                trainer_run = runner(plant(job, bug) if bug else job)
            if semantics not in references:
                references[semantics] = reference_run(job, semantics)
            status, detail, comparisons = classify_run(start, trainer_run, references[semantics])
            row.update(
                status=status,
                detail=detail,
                stand_ins=trainer_run.stand_ins,
                notes=trainer_run.notes,
                steps=[c.__dict__ for c in comparisons],
            )
        except NotRunnableError as err:
            row.update(status="not runnable", detail=str(err))
        row["seconds"] = round(time.perf_counter() - begin, 1)
        logger.info(
            "%s: %s %s (%.1f s)", name, row["status"], row.get("detail", ""), row["seconds"]
        )
        report["trainers"][name] = row
    summary: dict[str, int] = {}
    for row in report["trainers"].values():
        summary[row["status"]] = summary.get(row["status"], 0) + 1
    report["summary"] = summary
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


TABLE_HEADER = (
    "trainer",
    "status",
    "loss per step (trainer / reference)",
    "grad norm per step",
    "delta cosine (min)",
    "delta norm ratio (max dev.)",
    "stand-ins",
    "detail",
)


def markdown_table(report: dict[str, Any]) -> str:
    """The layer-3 table (one row per trainer) as GitHub markdown."""
    rows = []
    for name, row in report["trainers"].items():
        steps = row.get("steps", [])
        loss = ", ".join(f"{s['loss']:.4g} / {s['loss_ref']:.4g}" for s in steps)
        grad = ", ".join(f"{s['grad_norm']:.4g} / {s['grad_norm_ref']:.4g}" for s in steps)
        cosine = f"{min(s['cosine'] for s in steps):.5f}" if steps else ""
        ratio = max(steps, key=lambda s: abs(s["norm_ratio"] - 1))["norm_ratio"] if steps else None
        rows.append(
            [
                name,
                row["status"],
                loss,
                grad,
                cosine,
                "" if ratio is None else f"{ratio:.5f}",
                ", ".join(row.get("stand_ins", [])),
                row.get("detail", ""),
            ]
        )
    return reports.markdown_table(TABLE_HEADER, rows)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns 1 on any mismatch (0 otherwise; with ``--plant``, 1 when any
    runnable trainer is *not* a mismatch)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trainers", nargs="+", choices=TRAINERS, default=list(TRAINERS))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--plant", choices=PLANTS, help="run every trainer on a planted bug")
    parser.add_argument(
        "--device", default="cpu", help=f"cpu, or cuda for {', '.join(CUDA_RUNNERS)}"
    )
    parser.add_argument("--report", type=Path, default=reports.REPORT_PATH)
    parser.add_argument(
        "--write-docs", action="store_true", help=f"rewrite the layer-3 table in {DOCS_PATH}"
    )
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    if args.write_docs and (args.plant or args.trainers != list(TRAINERS) or args.device != "cpu"):
        parser.error(
            "--write-docs needs the whole clean CPU run: drop --trainers, --plant, --device"
        )
    report = run(args.trainers, steps=args.steps, bug=args.plant, device=args.device)
    table = markdown_table(report)
    sys.stdout.write(table)
    if not args.plant and args.device == "cpu":
        reports.merge_into_report(args.report, {"layer3": report})
    if args.write_docs:
        text = DOCS_PATH.read_text(encoding="utf-8")
        DOCS_PATH.write_text(
            reports.replace_block(text, TABLE_START, TABLE_END, table), encoding="utf-8"
        )
    statuses = [row["status"] for row in report["trainers"].values()]
    logger.info("summary %s in %.1f s", report["summary"], report["seconds"])
    if args.plant:
        return 1 if any(s not in ("mismatch", "not runnable") for s in statuses) else 0
    return 1 if "mismatch" in statuses else 0
