"""Every trainer recipe's ``--dry-run`` that can run here: what a user sees before a GPU run.

Each dry run builds the trainer's configuration, writes what the launch writes, imports the
hook the trainer will load (Oat's needs Oat's GPU stack: the dry run says so), and converts
a batch a tiny offline model plays to the trainer's schema; it writes ``dry_run.json``. The
batch's values are held to the reference elsewhere (``tests/adapters/``, the parity suite).
A recipe whose trainer is not installed is skipped.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]


class DryRun(NamedTuple):
    modules: tuple[str, ...]  # the adapter (it imports its trainer) and a few more
    flags: list[str]  # a small batch
    trainer_config: str  # the summary key of what the trainer is handed
    batch_keys: set[str]  # some fields of the trainer's batch type
    files: set[str]  # what it writes to --out-dir besides dry_run.json


# Importing the adapter rather than the trainer keeps the root logger as it was (GEM and
# verl configure it when imported).
DRY_RUNS = {
    "train_verl.py": DryRun(
        ("xpgym.adapters.verl", "pandas", "pyarrow"),
        ["--train-batch-size", "2", "--ppo-mini-batch-size", "2", "--num-tasks", "2"],
        "overrides",
        {"prompts", "responses", "response_mask", "rm_scores"},
        {"train.parquet", "agent_loops.yaml", "ppo_trainer.yaml"},
    ),
    "train_openrlhf.py": DryRun(
        ("xpgym.adapters.openrlhf",),
        ["--rollout-batch-size", "2", "--num-tasks", "2"],
        "flags",
        {"sequences", "action_mask", "rewards"},
        {"train.jsonl"},
    ),
    "train_rl2.py": DryRun(
        ("xpgym.adapters.rl2",),
        ["--prompts-per-rollout", "2", "--num-tasks", "2"],
        "overrides",
        {"states", "actions", "action_mask", "rewards"},
        {"train.jsonl", "ppo.yaml"},
    ),
    "train_oat.py": DryRun(
        ("xpgym.adapters.oat",),
        ["--episodes-per-step", "2"],
        "oat_args",
        {"prompt_ids", "response_ids", "rewards"},
        set(),
    ),
    "train_trl.py": DryRun(
        ("xpgym.adapters.trl",),
        ["--batch-size", "4", "--num-generations", "2", "--num-tasks", "4", "--max-turns", "3"],
        "grpo_config",
        {"completion_ids", "tool_mask", "advantages"},
        set(),
    ),
    "train_roll.py": DryRun(
        ("xpgym.adapters.roll", "yaml"),
        ["--rollout-batch-size", "8", "--sequence-length", "2048"],
        "roll_config",
        {"input_ids", "response_mask", "scores"},
        {"xpgym_step_reinforce.yaml"},
    ),
}


def load_recipe(recipe: str, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """``recipes/<recipe>`` as a module, registered for the test only (its dataclasses look
    their module up in ``sys.modules``)."""
    name = Path(recipe).stem
    spec = importlib.util.spec_from_file_location(name, ROOT / "recipes" / recipe)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("recipe", sorted(DRY_RUNS))
def test_dry_run_shows_the_config_the_hook_and_a_batch_in_the_trainers_schema(
    recipe: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """In this process, as ``python recipes/<recipe> --dry-run`` runs it (the trainers are
    imported once for the suite instead of once per recipe)."""
    dry = DRY_RUNS[recipe]
    for module in dry.modules:
        pytest.importorskip(module, reason=f"{recipe} needs {module}", exc_type=ImportError)
    pytest.importorskip("transformers", reason="the dry run builds a tiny local model")
    monkeypatch.chdir(ROOT)
    argv = [f"recipes/{recipe}", "--dry-run", "--out-dir", str(tmp_path), *dry.flags]
    monkeypatch.setattr(sys, "argv", argv)
    environ = dict(os.environ)
    try:
        load_recipe(recipe, monkeypatch).main()
    finally:  # what the recipe set for its run is undone
        os.environ.clear()
        os.environ.update(environ)
    assert "dry run ok" in capsys.readouterr().out
    assert {*dry.files, "dry_run.json"} <= {path.name for path in tmp_path.iterdir()}
    summary = json.loads((tmp_path / "dry_run.json").read_text())
    assert summary["config"]["gamma"] == 0.9  # the GEM paper's setting for games
    assert summary["config"]["algorithm"] == "rebn"
    assert summary[dry.trainer_config]
    assert summary["hook"]
    assert dry.batch_keys <= set(summary["batch"])
    assert summary["policy_tokens"] > 0
    assert summary["mean_return"] <= 1.0  # GuessTheNumber pays at most 1
