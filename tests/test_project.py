"""The project keeps its promises: README commands, quickstart, CI script and lint."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def fenced_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def test_readme_quickstart_runs_as_written(tmp_path):
    quickstart = README.split("## Quickstart", 1)[1]
    code = fenced_blocks(quickstart, "python")[0]
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "the number is" in result.stdout


def test_ci_runs_exactly_the_readmes_test_command():
    test_command = fenced_blocks(README.split("Run the tests", 1)[1], "bash")[0].strip()
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert ci_lines[-1] == test_command


def test_readmes_demo_command_sets_up_as_ci_does():
    command = fenced_blocks(README.split("## Quickstart", 1)[1], "bash")[0].strip()
    *setup, demo = command.split(" && ")
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert setup == ["bash scripts/setup.sh", ". .venv/bin/activate"]
    assert [line for line in ci_lines if line in setup] == setup
    assert demo == "python recipes/train_torch.py"


def test_quickstart_recipe_writes_its_results(tmp_path):
    out = tmp_path / "quickstart.json"
    result = subprocess.run(
        [sys.executable, "recipes/quickstart.py", "--episodes", "20", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(out.read_text())
    assert summary["binary_search"]["success_rate"] == 1.0
    assert summary["random"]["success_rate"] < 1.0


@pytest.mark.skipif(
    shutil.which("ruff") is None and not (Path(sys.prefix) / "bin" / "ruff").exists(),
    reason="ruff is not installed (it is in the dev extra)",
)
@pytest.mark.parametrize("command", [["check"], ["format", "--check"]])
def test_ruff_is_clean(command):
    ruff = shutil.which("ruff") or str(Path(sys.prefix) / "bin" / "ruff")
    result = subprocess.run([ruff, *command, "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
