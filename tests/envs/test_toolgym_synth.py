"""`python -m xpgym synth` and xpgym.envs.toolgym.synth: oracle runs and CodeGym's filters."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np
import pytest

from xpgym.__main__ import main
from xpgym.core.tools.decorator import tool
from xpgym.envs.toolgym import ENVS, EnvEntry
from xpgym.envs.toolgym.base import ToolGymEnv
from xpgym.envs.toolgym.synth import (
    Filters,
    file_tasks,
    generated_tasks,
    read_task_file,
    synthesize,
    write_report,
)

EASY = 'ClosestToK@{"k": 4, "numbers": [1, 3, 5, 7]}'  # oracle: 1 + 2 + 2 look-ups + 2 + 1 = 8


class WrongOracleEnv(ToolGymEnv):
    """An env whose oracle answers wrong on odd `x` and makes a bad call on x == 2."""

    name: ClassVar[str] = "WrongOracle"
    answer_type: ClassVar[Any] = int

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        return {"x": int(rng.integers(10))}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        return {}

    def visible(self) -> dict[str, Any]:
        return {}

    def statement(self) -> str:
        return "Say x."

    def reference_answer(self) -> int:
        return self.config["x"]

    @tool
    def peek(self) -> str:
        """Show x."""
        return json.dumps(self.config["x"])

    def oracle(self) -> None:
        x = int(self.call("Peek"))
        if x == 2:
            self.call("Nope")
        self.call("Done", answer=x + x % 2)


@pytest.fixture
def wrong_oracle_registered(monkeypatch):
    entry = EnvEntry("WrongOracle", f"{__name__}:WrongOracleEnv", "", "", "")
    monkeypatch.setitem(ENVS, "WrongOracle", entry)


def test_generated_tasks_are_what_reset_draws():
    rows = list(generated_tasks(["toolgym:TwoSum-v0-easy"], 3))
    assert [(group, seed) for group, seed, _ in rows] == [
        ("toolgym:TwoSum-v0-easy", 0),
        ("toolgym:TwoSum-v0-easy", 1),
        ("toolgym:TwoSum-v0-easy", 2),
    ]
    assert len({task for _, _, task in rows}) == 3
    assert all(task.startswith("TwoSum@{") for _, _, task in rows)


def test_filters_flag_calls_and_tools_and_keep_the_rest():
    rows = [("ClosestToK", None, EASY), *generated_tasks(["toolgym:MaxSubarray-v0-hard"], 2)]
    report = synthesize(rows, Filters(t_min=10, t_max=200, min_tools=6))
    by_task = {r.task: r for r in report.results}
    easy = by_task[EASY]
    assert (easy.calls, easy.tools) == (8, 4)
    assert easy.flags == ("too_few_calls", "too_few_tools")
    hard = [r for r in report.results if r.group.startswith("toolgym:")]
    assert [r.calls for r in hard] == [
        3 * len(json.loads(r.task[12:])["numbers"]) + 3 for r in hard
    ]
    assert [r.flags for r in hard] == [("too_many_calls",) if r.calls > 200 else () for r in hard]
    assert report.kept == []
    loose = synthesize(rows, Filters(t_min=1, t_max=1000, min_tools=4))
    assert [r.task for r in loose.kept] == [task for _, _, task in rows]


def test_duplicates_are_flagged_after_the_first(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(EASY) + "\n\n" + json.dumps({"task": EASY}) + "\n")
    report = synthesize(file_tasks(path), Filters(t_min=1))
    assert [r.flags for r in report.results] == [(), ("duplicate",)]
    assert [r.group for r in report.results] == ["ClosestToK", "ClosestToK"]


def test_oracle_failures_are_reported_not_raised(wrong_oracle_registered):
    rows = [("WrongOracle", None, f'WrongOracle@{{"x": {x}}}') for x in (1, 2, 4)]
    rows.append(("(malformed)", None, "WrongOracle{}"))
    report = synthesize(rows, Filters(t_min=1, min_tools=1))
    errors = [r.error for r in report.results]
    assert errors[0] == "the oracle's answer is wrong"
    assert "unknown tool 'Nope'" in errors[1]
    assert errors[2] is None
    assert "has no '@'" in errors[3]
    assert len(report.failures) == 3
    assert report.summary()["groups"]["WrongOracle"]["failed"] == 2


def test_write_report_writes_kept_tasks_and_summary(tmp_path):
    report = synthesize(generated_tasks(["toolgym:ModeFinding-v0-easy"], 4), Filters(t_min=20))
    tasks_path, summary_path = write_report(report, tmp_path / "out")
    kept = [json.loads(line) for line in tasks_path.read_text().splitlines()]
    assert [row["task"] for row in kept] == [r.task for r in report.kept]
    assert all(row["oracle_calls"] >= 20 and row["env"] == "ModeFinding" for row in kept)
    summary = json.loads(summary_path.read_text())
    group = summary["groups"]["toolgym:ModeFinding-v0-easy"]
    assert group["tasks"] == 4
    assert group["kept"] + group["dropped"] == 4
    assert group["dropped_by"].get("too_few_calls", 0) == group["dropped"]
    calls = [r.calls for r in report.results]
    assert (group["oracle_calls"]["min"], group["oracle_calls"]["max"]) == (min(calls), max(calls))
    assert summary["filters"] == {"t_min": 20, "t_max": 256, "min_tools": 4}


def test_read_task_file_names_bad_lines(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(EASY) + "\n{oops\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not JSON"):
        read_task_file(path)
    path.write_text('{"config": {}}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: expected a task string"):
        read_task_file(path)


def test_cli_writes_outputs_and_exits_zero(tmp_path, capsys):
    out = tmp_path / "synth"
    code = main(["synth", "--env", "toolgym:ClosestToK-v0-easy", "--seeds", "3", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "toolgym:ClosestToK-v0-easy" in printed
    assert "kept 3 of 3 tasks; 0 oracle failures" in printed
    assert len((out / "tasks.jsonl").read_text().splitlines()) == 3


def test_cli_exits_nonzero_when_an_oracle_fails(tmp_path, capsys, wrong_oracle_registered):
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps('WrongOracle@{"x": 3}') + "\n" + json.dumps(EASY) + "\n")
    code = main(["synth", "--tasks", str(path), "--out", str(tmp_path / "o"), "--t-min", "1"])
    assert code == 1
    captured = capsys.readouterr()
    assert "oracle failed on WrongOracle" in captured.err
    assert "kept 1 of 2 tasks; 1 oracle failures" in captured.out


def test_cli_refuses_bad_inputs(tmp_path, capsys):
    assert main(["synth", "--env", "game:*", "--out", str(tmp_path)]) == 2
    assert "no toolgym ids match" in capsys.readouterr().err
    assert main(["synth", "--tasks", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path)]) == 2
