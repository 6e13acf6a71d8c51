"""docs/envs.md: every Python example runs as written and does what the page says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import xpgym

PAGE = Path(__file__).resolve().parents[2] / "docs" / "envs.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def run_example(marker: str) -> dict[str, Any]:
    """Execute the one example that contains `marker`; return its namespace."""
    (code,) = [example for example in EXAMPLES if marker in example]
    namespace: dict[str, Any] = {}
    exec(compile(code, f"docs/envs.md example ({marker})", "exec"), namespace)
    return namespace


def test_the_page_has_an_example_for_each_family_and_api():
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_every_example_runs_on_its_own(index, capsys):
    exec(compile(EXAMPLES[index], f"docs/envs.md example {index}", "exec"), {})


def test_tool_example_counts_words():
    env = run_example("def word_count")["env"]
    env.reset(seed=0)
    obs, *_ = env.step(
        '<tool_call>{"name": "word_count", "arguments": {"text": "a b c"}}</tool_call>'
    )
    assert obs == "3"


def test_env_bound_tool_example_reads_the_episodes_secret():
    env = run_example("def parity_hint")["env"]
    env.reset(seed=3)
    obs, *_ = env.step('<tool_call>{"name": "parity_hint"}</tool_call>')
    assert obs == ("even" if env.unwrapped.target % 2 == 0 else "odd")


def test_pool_example_gives_each_episode_a_reset_database():
    namespace = run_example("def sql")
    pool, sql = namespace["pool"], namespace["sql"]
    env = xpgym.core.wrappers.ToolEnvWrapper(xpgym.make("game:GuessTheNumber-v0"), [sql])
    call = '<tool_call>{"name": "sql", "arguments": {"query": "%s"}}</tool_call>'
    env.reset(seed=0)
    env.step(call % "CREATE TABLE notes (x)")
    env.step(call % "INSERT INTO notes VALUES (1)")
    assert env.step(call % "SELECT x FROM notes")[0] == "[[1]]"
    env.reset(seed=1)  # the lease goes back, the database is reset
    assert "no such table" in env.step(call % "SELECT x FROM notes")[0]
    assert pool.metrics()["acquired"] == 2
    env.close()
    pool.close()


def test_rewards_example_gives_what_the_page_says():
    env = run_example("RewardWrapper")["env"]
    env.reset(seed=0)
    _, reward, _, _, info = env.step("I guess \\boxed{5}")
    assert reward == pytest.approx(-0.03)
    assert info["metrics"] == {"brevity": pytest.approx(-0.03), "brevity/words": 3.0}
