"""Parity suite, layer 1: every trainer's layout and advantages on the golden cases.

Runs `parity.tokens.check.run` in-process (the trainers' heavy imports happen once) and fails on
any mismatch or failed layout check; checks that the checker catches a planted difference;
and that the golden files are what `parity.tokens.make_golden` writes and cover the cases the
parity issue lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from parity.tokens.cases import (
    CASES,
    ENV_IDS,
    POLICY_IDS,
    case_by_name,
    group_sizes,
    policy_tokens,
)
from parity.tokens.core import TOL, classify
from parity.tokens.make_golden import main as make_golden

STATUSES = {"exact", "formula", "mismatch", "not runnable"}


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    pytest.importorskip("torch")
    from parity.tokens.check import run

    return run()


def skip_unless_importable(
    report: dict[str, Any], trainers: Sequence[str], *, all_needed: bool = True
) -> None:
    """Skip the test when the run could not import the trainers it needs: all of `trainers`,
    or with `all_needed` false at least one (the trainers' extras are optional). The reason
    names each missing trainer with its import error."""
    missing = {
        name: report["trainers"][name]["not_runnable"]
        for name in trainers
        if report["trainers"][name].get("not_runnable")
    }
    if missing and (all_needed or len(missing) == len(trainers)):
        needs = "the trainers" if all_needed else "one of the trainers"
        reasons = "; ".join(f"{name} ({why})" for name, why in missing.items())
        pytest.skip(f"needs {needs} {', '.join(trainers)}; not importable: {reasons}")


def test_no_mismatch_and_every_layout_check_passes(report: dict[str, Any]) -> None:
    from parity.tokens.check import failures

    assert failures(report) == []
    assert set(report["trainers"]) == {"verl", "openrlhf", "rl2", "oat", "roll", "trl"}
    for trainer in report["trainers"].values():
        assert {row["status"] for row in trainer["advantages"]} <= STATUSES
        assert {row["case"] for row in trainer["advantages"]} == {c.name for c in CASES}


def test_adapter_estimators_equal_the_reference_exactly(report: dict[str, Any]) -> None:
    """The adapters' per-turn REINFORCE/ReBN, run through each trainer's own dispatch, are
    the reference math: exact on every case wherever the trainer imports."""
    for name, trainer in report["trainers"].items():
        if trainer.get("not_runnable"):
            continue
        for row in trainer["advantages"]:
            if row["code"].startswith(("xpgym", "XpgymLearner")):
                assert row["status"] == "exact", (name, row)


def test_differences_are_classified_as_their_stated_formula(report: dict[str, Any]) -> None:
    skip_unless_importable(report, ["verl", "openrlhf"])
    rows = {
        (name, row["code"], row["case"]): row
        for name, trainer in report["trainers"].items()
        for row in trainer["advantages"]
    }
    # verl keeps a lone member's score; the reference gives it 0
    assert rows["verl", "grpo", "single_episode_group"]["status"] == "formula"
    # token-level REINFORCE++ whitening is not per-turn ReBN, but follows its formula
    assert rows["verl", "reinforce_plus_plus", "ragged"]["status"] == "formula"
    assert rows["openrlhf", "reinforce", "discounted"]["status"] == "formula"
    # unequal group sizes cannot be expressed by OpenRLHF / RL2
    assert rows["openrlhf", "group_norm", "single_episode_group"]["status"] == "not runnable"
    assert rows["rl2", "reinforce, norm_var", "single_episode_group"]["status"] == "not runnable"
    # zero std everywhere: every normalising estimator gives exactly the reference's 0
    for key, row in rows.items():
        if key[2] == "all_equal_rewards" and row["status"] != "not runnable":
            assert row["status"] == "exact", (key, row)
    assert all(row["status"] == "not runnable" for row in report["trainers"]["roll"]["advantages"])


def test_a_planted_difference_is_a_mismatch() -> None:
    pytest.importorskip("torch")
    from parity.tokens.check import failures, run

    planted = run(cases=[case_by_name("ragged")], perturb=1e-3)
    skip_unless_importable(planted, list(planted["trainers"]), all_needed=False)
    statuses = [
        row["status"] for trainer in planted["trainers"].values() for row in trainer["advantages"]
    ]
    assert "mismatch" in statuses
    assert set(statuses) <= {"mismatch", "not runnable"}  # every runnable estimator caught it
    assert len(failures(planted)) == statuses.count("mismatch")


def test_classify_formula_and_nan() -> None:
    ref = [np.array([0.0, 1.0])]
    assert classify([np.array([0.0, 1.0 + TOL / 2])], ref, None).status == "exact"
    assert classify([np.array([0.0, 1.5])], ref, [np.array([0.0, 1.5])], "x").status == "formula"
    assert classify([np.array([0.0, 1.5])], ref, [np.array([0.0, 1.4])], "x").status == "mismatch"
    nan = [np.array([np.nan, 1.0])]
    assert classify(nan, ref, nan, "lone member").status == "formula"
    assert classify(nan, ref, None).status == "mismatch"
    assert classify([np.array([1.0])], ref, None).status == "mismatch"  # wrong token count


def test_golden_files_are_what_make_golden_writes(tmp_path: Any) -> None:
    make_golden(["--out-dir", str(tmp_path)])
    for case in CASES:
        assert (tmp_path / case.path.name).read_bytes() == case.path.read_bytes(), case.name


def test_golden_cases_cover_the_issue() -> None:
    by_name = {case.name: case.episodes() for case in CASES}
    assert any(case.gamma < 1 for case in CASES)
    multi_dense = by_name["dense_multi_turn"]
    assert all(len(ep.turns) >= 2 and all(t.reward != 0 for t in ep.turns) for ep in multi_dense)
    pairs = by_name["truncated_vs_terminated"]
    assert [ep.turns[-1].terminated for ep in pairs] == [True, False, True, False]
    assert [ep.turns[-1].truncated for ep in pairs] == [False, True, False, True]
    assert group_sizes(by_name["single_episode_group"]) == [2, 2, 1]
    assert group_sizes(by_name["grpo_groups"]) == [4, 4, 4]
    assert len({len(ep.turns) for ep in by_name["ragged"]}) >= 4
    equal = by_name["all_equal_rewards"]
    assert {tuple(t.reward for t in ep.turns) for ep in equal} == {(0.0, 1.0)}
    for episodes in by_name.values():
        for ep in episodes:
            assert all(int(i) in POLICY_IDS for i in policy_tokens(ep))
            last = ep.turns[-1]
            env = set(last.prompt_ids) - set(ep.turns[0].prompt_ids) - set(policy_tokens(ep))
            assert all(int(i) in ENV_IDS for i in env)
    tool = by_name["tool_turns"]
    assert min(len(t.prompt_ids) for ep in tool for t in ep.turns[1:]) >= 10


def test_the_trainers_docs_show_the_current_report(report: dict[str, Any]) -> None:
    """docs/trainers.md is the one home of the trainers' differences: its parity table is
    the current report (regenerate with ``python -m parity.tokens --write-docs``)."""
    from parity.tokens.check import DOCS_PATH, docs_with_table

    missing = [  # ROLL's version reads "not installed (gem-llm 0.0.4)" where GEM is installed
        name
        for name, trainer in report["trainers"].items()
        if trainer["version"].rstrip(")").endswith("not installed")
    ]
    if missing:
        pytest.skip(f"trainers not installed, the report differs from the docs: {missing}")
    text = DOCS_PATH.read_text(encoding="utf-8")
    assert docs_with_table(text, report) == text, "run python -m parity.tokens --write-docs"
