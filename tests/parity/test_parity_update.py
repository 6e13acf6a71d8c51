"""Layer 3 of the parity suite (`parity.update`): each trainer's own loss, backward and
optimizer step against the reference trainer, per step; the classification, the planted
bugs, and the CI run itself (no mismatch; the docs table is current)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from parity.update import (  # noqa: E402
    DOCS_PATH,
    TABLE_END,
    TABLE_START,
    TRAINERS,
    classify_run,
    compare_steps,
    markdown_table,
    plant,
    run,
)
from parity.update.job import StepResult, TrainerRun, UpdateHParams, UpdateJob  # noqa: E402
from xpgym.core.trajectory import Episode, Turn  # noqa: E402

STEPS = 3
START = {"w": torch.tensor([1.0, 2.0, 3.0]), "b": torch.tensor([0.5])}


def _run(*steps: tuple[float, float, list[float], list[float]]) -> TrainerRun:
    """Steps of (loss, grad norm, delta of w, delta of b), each from the previous params."""
    params = dict(START)
    out = []
    for loss, norm, dw, db in steps:
        params = {"w": params["w"] + torch.tensor(dw), "b": params["b"] + torch.tensor(db)}
        out.append(StepResult(loss, norm, params))
    return TrainerRun(steps=out)


REFERENCE = _run((0.1, 1.0, [1e-3, -2e-3, 0.0], [1e-3]), (0.05, 0.8, [5e-4, 1e-3, 2e-4], [0.0]))


def test_the_same_steps_are_exact() -> None:
    status, detail, steps = classify_run(START, REFERENCE, REFERENCE)
    assert (status, detail) == ("exact", "")
    assert [s.cosine for s in steps] == pytest.approx([1.0, 1.0])
    assert [s.norm_ratio for s in steps] == pytest.approx([1.0, 1.0])


def test_float_noise_below_the_tolerances_is_exact() -> None:
    noisy = _run(
        (0.1 * (1 + 1e-6), 1.0 * (1 - 1e-6), [1e-3 * (1 + 1e-5), -2e-3, 0.0], [1e-3]),
        (0.05, 0.8, [5e-4, 1e-3, 2e-4], [1e-9]),
    )
    assert classify_run(START, noisy, REFERENCE)[0] == "exact"


@pytest.mark.parametrize(
    ("steps", "what"),
    [
        (((0.1 * 1.01, 1.0, [1e-3, -2e-3, 0.0], [1e-3]),), "loss"),
        (((0.1, 1.01, [1e-3, -2e-3, 0.0], [1e-3]),), "grad norm"),
        (((0.1, 1.0, [-1e-3, 2e-3, 0.0], [-1e-3]),), "delta cosine -1"),
        (((0.1, 1.0, [1e-2, -2e-2, 0.0], [1e-2]),), "norm ratio 10"),
    ],
)
def test_a_difference_in_any_measure_is_a_mismatch(steps: Any, what: str) -> None:
    bad = _run(*steps, (0.05, 0.8, [5e-4, 1e-3, 2e-4], [0.0]))
    status, detail, _ = classify_run(START, bad, REFERENCE)
    assert status == "mismatch", what
    assert detail.startswith("step 1:")


def test_a_difference_the_formula_predicts_is_formula_and_one_it_does_not_is_mismatch() -> None:
    halved = _run((0.05, 0.5, [1e-3, -2e-3, 0.0], [1e-3]), (0.025, 0.4, [5e-4, 1e-3, 2e-4], [0.0]))
    assert classify_run(START, halved, REFERENCE, halved, "loss / 2") == (
        "formula",
        "loss / 2",
        compare_steps(START, halved, REFERENCE),
    )
    other = _run((0.05, 0.6, [1e-3, -2e-3, 0.0], [1e-3]), (0.025, 0.4, [5e-4, 1e-3, 2e-4], [0.0]))
    assert classify_run(START, other, REFERENCE, halved, "loss / 2")[0] == "mismatch"


def test_runs_that_cannot_be_compared_raise() -> None:
    with pytest.raises(ValueError, match="steps"):
        compare_steps(START, TrainerRun(steps=REFERENCE.steps[:1]), REFERENCE)
    renamed = TrainerRun(steps=[StepResult(0.1, 1.0, {"v": torch.zeros(3), "b": torch.zeros(1)})])
    with pytest.raises(ValueError, match="parameter names"):
        compare_steps(START, renamed, TrainerRun(steps=REFERENCE.steps[:1]))


def _episode() -> Episode:
    turns = [
        Turn(
            "o1",
            "a",
            0.5,
            prompt_ids=[1, 2],
            response_ids=[10, 11, 12],
            response_logprobs=[-0.1, -0.2, -0.3],
        ),
        Turn(
            "o2",
            "b",
            1.0,
            terminated=True,
            prompt_ids=[1, 2, 10, 11, 12, 3],
            response_ids=[13],
            response_logprobs=[-0.4],
        ),
    ]
    return Episode(env_id="toy", turns=turns)


def test_planted_bugs_change_only_what_they_name() -> None:
    job = UpdateJob(model_dir=Path("m"), episodes=[_episode()], hparams=UpdateHParams(lr=1e-4))
    assert plant(job, "lr").hparams.lr == pytest.approx(1e-3)
    assert [t.reward for t in plant(job, "sign").episodes[0].turns] == [-0.5, -1.0]
    masked = plant(job, "mask").episodes[0].turns
    assert [t.response_ids for t in masked] == [[10, 11], [13]]  # 12 now sits in the prompt
    assert masked[0].response_logprobs == [-0.1, -0.2]
    assert masked[1].prompt_ids == job.episodes[0].turns[1].prompt_ids
    with pytest.raises(ValueError, match="bug"):
        plant(job, "typo")


# --------------------------------------------------------------------------------------
# The real run (the CI run of layer 3)
# --------------------------------------------------------------------------------------

NEEDS = {
    "verl": ("verl",),
    "openrlhf": ("openrlhf", "deepspeed"),
    "rl2": ("RL2",),
    "trl": ("trl",),
}
"""The packages each trainer's runner needs (scripts/setup.sh installs them all)."""
INSTALLED = [
    name
    for name, packages in NEEDS.items()
    if all(importlib.util.find_spec(package) is not None for package in packages)
]


@pytest.fixture(scope="module")
def report(warm_model: Path) -> dict[str, Any]:
    return run(TRAINERS, steps=STEPS, model_dir=warm_model)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_no_trainer_mismatches_the_reference(report: dict[str, Any]) -> None:
    rows = report["trainers"]
    assert list(rows) == list(TRAINERS)
    assert not [f"{n}: {r['detail']}" for n, r in rows.items() if r["status"] == "mismatch"]
    for name in INSTALLED:
        assert rows[name]["status"] in ("exact", "formula"), rows[name]
        assert len(rows[name]["steps"]) == STEPS
        assert all(s["grad_norm"] > 0 for s in rows[name]["steps"])


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _cells_apart(docs: str, current: str) -> bool:
    """Whether two table cells differ by more than float noise: the same text once numbers
    are taken out, and every number within 1e-3 relative or 1e-6 absolute (first-step
    losses are ~1e-8 of rounding noise that changes from process to process)."""
    if NUMBER.sub("#", docs) != NUMBER.sub("#", current):
        return True
    pairs = zip(NUMBER.findall(docs), NUMBER.findall(current), strict=True)
    return any(abs(float(a) - float(b)) > 1e-3 * abs(float(b)) + 1e-6 for a, b in pairs)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_docs_table_is_the_current_run(report: dict[str, Any]) -> None:
    text = DOCS_PATH.read_text(encoding="utf-8")
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    docs_rows = [line.split("|") for line in text[start:end].strip().splitlines()]
    current_rows = [line.split("|") for line in markdown_table(report).strip().splitlines()]
    assert [len(row) for row in docs_rows] == [len(row) for row in current_rows]
    stale = [
        (docs_cell, current_cell)
        for docs_row, current_row in zip(docs_rows, current_rows, strict=True)
        for docs_cell, current_cell in zip(docs_row, current_row, strict=True)
        if _cells_apart(docs_cell, current_cell)
    ]
    assert stale == [], "docs/parity.md is stale: run python -m parity.update --write-docs"


def test_the_docs_table_check_tells_noise_from_a_change() -> None:
    assert not _cells_apart(" -2.98e-08 / 1.255e-08, -0.01384 ", " 0 / 1.882e-08, -0.01384 ")
    assert _cells_apart(" 0.8218 / 0.8218 ", " 0.8218 / 0.7514 ")
    assert _cells_apart(" exact ", " mismatch ")


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("bug", ["mask", "sign", "lr"])
def test_a_planted_bug_is_a_mismatch(warm_model: Path, bug: str) -> None:
    if not INSTALLED:
        pytest.skip(
            "none of verl, openrlhf + deepspeed, rl2 (rl-square), trl is installed "
            "(scripts/setup.sh)"
        )
    planted = run(INSTALLED, steps=1, model_dir=warm_model, bug=bug)
    assert {n: r["status"] for n, r in planted["trainers"].items()} == dict.fromkeys(
        INSTALLED, "mismatch"
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_rl2_run_leaves_transformers_and_the_stand_ins_as_they_were(
    warm_model: Path,
) -> None:
    pytest.importorskip("RL2", reason="rl-square (RL2) is not installed (scripts/setup.sh)")
    import sys

    import transformers.modeling_flash_attention_utils as flash_utils
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    from parity.shared.rl2_imports import STAND_INS

    before = (
        ALL_ATTENTION_FUNCTIONS.get("flash_attention_2"),
        flash_utils.__dict__.copy(),
        torch.cuda.current_device,
    )
    stood_in = {name.split(".")[0] for name in STAND_INS} - set(sys.modules)
    result = run(["rl2"], steps=1, model_dir=warm_model)
    assert result["trainers"]["rl2"]["status"] == "exact"
    assert ALL_ATTENTION_FUNCTIONS.get("flash_attention_2") is before[0]
    assert flash_utils.__dict__ == before[1]
    assert torch.cuda.current_device is before[2]
    assert not stood_in & {name.split(".")[0] for name in sys.modules}
