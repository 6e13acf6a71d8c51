"""Code env: the code-block rule, comparison, data formats, verdicts of hostile solutions,
reference solutions, rewards, multi-turn feedback, the dataset loader, fuzz and check_env."""

from __future__ import annotations

import json
import os
import pickle
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpgym
from xpgym.core.checks import check_env
from xpgym.core.sandbox import Sandbox, SandboxUnavailableError, default_sandbox
from xpgym.envs.code.env import NO_CODE_REWARD, CodeEnv
from xpgym.envs.code.judge import extract_code, outputs_match, returns_match
from xpgym.envs.code.problems import (
    CallTest,
    CodeProblem,
    IOTest,
    load_sample_problems,
    problem_from_record,
)

SAMPLES = load_sample_problems()
ADD = CodeProblem(
    id="add",
    statement="Print a + b.",
    tests=(IOTest("1 2\n", "3\n"), IOTest("5 5\n", "10\n"), IOTest("0 0\n", "0\n")),
)
ADD_SOLUTION = "a, b = map(int, input().split())\nprint(a + b)\n"
PAIR = CodeProblem(
    id="pair",
    statement="Return (x, 2 * x).",
    fn_name="pair",
    tests=(CallTest((1,), ([1, 2],)), CallTest((3,), ([3, 6],))),
)


@pytest.fixture(scope="module", autouse=True)
def _sandbox_available() -> None:
    try:
        default_sandbox()
    except SandboxUnavailableError as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"no sandbox on this machine: {exc}")


def fenced(code: str, language: str = "python") -> str:
    return f"Here is my solution:\n```{language}\n{code}```\nDone."


def attempt(code: str, problem: CodeProblem = ADD, **kwargs) -> tuple:
    env = CodeEnv(problems=[problem], time_limit_s=kwargs.pop("time_limit_s", 1), **kwargs)
    env.reset(seed=0)
    return env.step(fenced(code))


# ----------------------------------------------------------------------- code blocks


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("```python\nprint(1)\n```", "print(1)\n"),
        ("```\nprint(2)\n```", "print(2)\n"),
        ("```py\nprint(3)\n```", "print(3)\n"),
        ("```Python3 extra words\nprint(4)\n```", "print(4)\n"),
        ("```python\nprint(1)\n```\ntext\n```python\nprint(5)\n```", "print(5)\n"),
        ("```python\nprint(6)\n```\n```bash\nls\n```", "print(6)\n"),
        ("```python\nprint(7)\n```\n```python\n   \n```", "print(7)\n"),
        ("```python\nprint(8)\n```\n```python\nnever closed", "print(8)\n"),
        ("```python\nprint(9)```", "print(9)"),
    ],
)
def test_extract_code_takes_the_last_python_or_untagged_block(action, expected):
    assert extract_code(action) == expected


@pytest.mark.parametrize(
    "action",
    ["print(1)", "```bash\nls\n```", "```python\n\n```", "```python\nno end", "```python"],
)
def test_extract_code_finds_nothing(action):
    assert extract_code(action) is None


@pytest.mark.parametrize(
    ("got", "expected", "same"),
    [
        ("3\n", "3", True),
        ("3   \n\n\n", "3\n", True),
        ("1\r\n2\r\n", "1\n2\n", True),
        (" 3\n", "3\n", False),
        ("1\n\n2\n", "1\n2\n", False),
        ("3 4\n", "3  4\n", False),
        ("", "\n", True),
        ("", "0\n", False),
    ],
)
def test_outputs_match_ignores_trailing_whitespace_only(got, expected, same):
    assert outputs_match(got, expected) is same


@pytest.mark.parametrize(
    ("got", "expected", "same"),
    [
        (True, True, True),
        (1, True, False),
        (True, 1, False),
        (3, 3, True),
        (3, 3.0000000001, True),
        (0.1 + 0.2, 0.3, True),
        (0.3001, 0.3, False),
        ([1, [2, 3]], [1, [2, 3]], True),
        ([1, 2], [1, 2, 3], False),
        ({"a": 1}, {"a": 1.0}, True),
        ({"a": 1}, {"b": 1}, False),
        ("1", 1, False),
        (None, None, True),
        (None, 0, False),
    ],
)
def test_returns_match_compares_json_values(got, expected, same):
    assert returns_match(got, expected) is same


# -------------------------------------------------------------------------- records


def test_record_in_the_shipped_format():
    problem = problem_from_record(
        {
            "id": "x",
            "statement": "s",
            "fn_name": "f",
            "tests": [{"args": [1, [2]], "expected": 3}],
            "solution": "def f(a, b): ...",
        }
    )
    assert problem.fn_name == "f"
    assert problem.tests == (CallTest((1, [2]), (3,)),)
    assert problem.solution == "def f(a, b): ..."


def test_record_in_gem_format_with_tests_as_a_json_string_and_lines_as_lists():
    tests = json.dumps({"inputs": ["1\n", ["2", "3"]], "outputs": ["a\n", ["b", "c"]]})
    problem = problem_from_record(
        {"problem": "p", "tests": tests}, index=7, statement_key="problem"
    )
    assert problem.id == "7"
    assert problem.fn_name is None
    assert problem.tests == (IOTest("1\n", "a\n"), IOTest("2\n3", "b\nc"))


def test_call_tests_in_apps_format_accept_the_wrapped_return_value():
    problem = problem_from_record(
        {"statement": "s", "tests": {"fn_name": "f", "inputs": [[1, 2]], "outputs": [[3]]}}
    )
    assert problem.fn_name == "f"
    assert problem.tests == (CallTest((1, 2), ([3], 3)),)


@pytest.mark.parametrize(
    ("record", "error", "match"),
    [
        ({"tests": []}, KeyError, "has \\['tests'\\]"),
        ({"statement": "s", "tests": []}, ValueError, "no tests"),
        ({"statement": "s", "tests": {"inputs": ["1"]}}, ValueError, "'inputs' and 'outputs'"),
        ({"statement": "s", "tests": {"inputs": ["1"], "outputs": []}}, ValueError, "pair up"),
        ({"statement": "s", "tests": "{not json"}, ValueError, "not JSON"),
        ({"statement": "s", "tests": [{"args": [1], "expected": 1}]}, ValueError, "'input'"),
        ({"statement": "s", "tests": 5}, ValueError, "must be a list"),
    ],
)
def test_malformed_records_say_what_is_wrong(record, error, match):
    with pytest.raises(error, match=match):
        problem_from_record(record)


def test_shipped_set_has_at_least_12_problems_of_both_kinds_with_solutions():
    assert len(SAMPLES) >= 12
    assert len({p.id for p in SAMPLES}) == len(SAMPLES)
    assert all(p.solution and p.statement and len(p.tests) >= 4 for p in SAMPLES)
    assert {p.fn_name is None for p in SAMPLES} == {True, False}


# ------------------------------------------------------------------ running solutions


@pytest.mark.parametrize("index", range(len(SAMPLES)), ids=[p.id for p in SAMPLES])
def test_reference_solution_passes_every_test_in_the_sandbox(index):
    env = CodeEnv(partial_credit=True)
    env.reset(options={"index": index})
    _, reward, terminated, truncated, info = env.step(fenced(SAMPLES[index].solution))
    assert info["verdicts"] == ["passed"] * len(SAMPLES[index].tests)
    assert (reward, terminated, truncated, info["correct"]) == (1.0, True, False, True)


def test_wrong_answer_is_a_wrong_answer_verdict_and_later_tests_are_skipped():
    obs, reward, _, _, info = attempt("print(3)")
    assert info["verdicts"] == ["passed", "wrong_answer", "skipped"]
    assert info["verdict_counts"]["wrong_answer"] == 1
    assert info["verdict_counts"]["skipped"] == 1
    assert (reward, info["correct"], info["tests_passed"], info["tests_total"]) == (
        0.0,
        False,
        1,
        3,
    )
    assert "Test 2 failed: wrong answer" in obs
    assert "5 5" in obs  # the failed test's input is shown


def test_exception_is_a_runtime_error_with_the_traceback_end():
    obs, _, _, _, info = attempt("raise ValueError('boom')")
    assert info["verdicts"][0] == "runtime_error"
    assert "ValueError: boom" in obs


def test_infinite_loop_is_a_timeout():
    _, _, _, _, info = attempt("while True:\n    pass\n", time_limit_s=0.5)
    assert info["verdicts"][0] == "timeout"


def test_sleeping_past_the_wall_clock_is_a_timeout():
    _, _, _, _, info = attempt("import time\ntime.sleep(30)\n", time_limit_s=0.5)
    assert info["verdicts"][0] == "timeout"


def test_memory_hog_is_a_memory_limit_verdict():
    _, _, _, _, info = attempt("x = bytearray(1 << 30)\n", memory_limit_mb=256)
    assert info["verdicts"][0] == "memory_limit"


def test_output_flood_is_an_output_limit_verdict():
    _, _, _, _, info = attempt("while True:\n    print('x' * 10000)\n")
    assert info["verdicts"][0] == "output_limit"


def test_network_use_fails_as_a_runtime_error():
    code = "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)\n"
    obs, _, _, _, info = attempt(code)
    assert info["verdicts"][0] == "runtime_error"
    assert "Network is unreachable" in obs


def host_processes_named(name: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == name:
                found.append(pid)
        except OSError:
            continue
    return found


def test_fork_bomb_times_out_and_leaves_no_process_on_the_host():
    name = f"xp{uuid.uuid4().hex[:10]}"
    code = (
        "import ctypes, os\n"
        f"ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        pass\n"
    )
    _, _, _, _, info = attempt(code, time_limit_s=0.5)
    assert info["verdicts"][0] == "timeout"
    assert host_processes_named(name) == []


def test_solution_cannot_write_or_read_host_files(tmp_path):
    target = tmp_path / "written-by-solution"
    secret = tmp_path / "secret"
    secret.write_text("s3cr3t")
    code = f"open({str(target)!r}, 'w').write('x')\nprint(open({str(secret)!r}).read())\n"
    _, _, _, _, info = attempt(code)
    assert info["verdicts"][0] == "runtime_error"
    assert not target.exists()


# --------------------------------------------------------------------- function tests


def test_function_tests_ignore_prints_and_accept_tuples_for_lists():
    code = "def pair(x):\n    print('debug', x)\n    return (x, 2 * x)\n"
    _, reward, _, _, info = attempt(code, PAIR)
    assert (reward, info["verdicts"]) == (1.0, ["passed", "passed"])


def test_function_tests_do_not_run_the_main_block():
    code = (
        "def pair(x):\n    return [x, 2 * x]\n"
        "if __name__ == '__main__':\n    raise SystemExit(input())\n"
    )
    assert attempt(code, PAIR)[4]["verdicts"] == ["passed", "passed"]


@pytest.mark.parametrize(
    ("code", "verdict", "shown"),
    [
        ("def other(x):\n    return x\n", "runtime_error", "defines no function 'pair'"),
        ("def pair(x):\n    return {1, 2}\n", "wrong_answer", "not JSON data"),
        ("def pair(x):\n    return [x, x]\n", "wrong_answer", "pair() returned [1, 1]"),
        ("import sys\ndef pair(x):\n    sys.exit(0)\n", "runtime_error", "did not return"),
    ],
)
def test_function_test_failures(code, verdict, shown):
    obs, _, _, _, info = attempt(code, PAIR)
    assert info["verdicts"][0] == verdict
    assert shown in obs


# ---------------------------------------------------------------------- rewards, turns


def test_no_code_block_is_an_invalid_action_with_a_penalty():
    env = CodeEnv(problems=[ADD])
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("the answer is 3")
    assert reward == NO_CODE_REWARD == -0.1
    assert (terminated, truncated) == (True, False)
    assert info["invalid_action"] is True
    assert info["parsed_action"] is None
    assert info["verdicts"] == []
    assert "No code found" in obs


def test_partial_credit_runs_every_test_and_pays_the_fraction():
    _, reward, _, _, info = attempt("print(3)", partial_credit=True)
    assert info["verdicts"] == ["passed", "wrong_answer", "wrong_answer"]
    assert reward == pytest.approx(1 / 3)
    assert info["metrics"] == {"pass_rate": pytest.approx(1 / 3)}


def test_multi_turn_pays_improvements_and_terminates_on_success():
    env = CodeEnv(problems=[ADD], max_turns=4, partial_credit=True, time_limit_s=1)
    obs, _ = env.reset(seed=0)
    assert "4 attempts" in obs
    rewards = []
    for action in ("no code", fenced("print(3)"), fenced("print(0)"), fenced(ADD_SOLUTION)):
        obs, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
    assert rewards == pytest.approx([-0.1, 1 / 3, 0.0, 2 / 3])
    assert (terminated, truncated, info["correct"]) == (True, False, True)


def test_multi_turn_feedback_and_truncation_after_the_last_attempt():
    env = CodeEnv(problems=[ADD], max_turns=2, time_limit_s=1)
    env.reset(seed=0)
    obs, _, terminated, truncated, _ = env.step(fenced("print(3)"))
    assert (terminated, truncated) == (False, False)
    assert "Test 2 failed: wrong answer" in obs
    assert "Expected output:\n10" in obs
    assert obs.endswith("1 attempt left.")
    obs, reward, terminated, truncated, _ = env.step(fenced("print(3)"))
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert obs.endswith("No attempts left.")


def test_hidden_feedback_shows_no_test_data():
    obs = attempt("print(3)", show_failed_test=False)[0]
    assert obs == "1/3 tests passed. Test 2 failed: wrong answer (the tests after it were not run)."


def test_max_tests_keeps_the_longest_inputs():
    problem = CodeProblem(
        id="p",
        statement="echo",
        tests=(IOTest("a\n", "a\n"), IOTest("ccc\n", "ccc\n"), IOTest("bb\n", "bb\n")),
    )
    env = CodeEnv(problems=[problem], max_tests=2, time_limit_s=1)
    _, info = env.reset(seed=0)
    assert info["num_tests"] == 2
    # fails on "a", which max_tests dropped: the two longest tests pass
    _, reward, _, _, info = env.step(fenced("s = input()\nprint(s if len(s) > 1 else 'x')\n"))
    assert (reward, info["tests_total"]) == (1.0, 2)


def test_reset_options_choose_the_problem_and_seeds_repeat():
    env = CodeEnv()
    assert env.reset(options={"index": 3})[1]["problem_id"] == SAMPLES[3].id
    first = [env.reset(seed=s)[1]["problem_id"] for s in range(5)]
    assert [env.reset(seed=s)[1]["problem_id"] for s in range(5)] == first
    with pytest.raises(IndexError):
        env.reset(options={"index": len(SAMPLES)})
    with pytest.raises(TypeError):
        env.reset(options={"index": "3"})


def test_a_failed_sandbox_is_a_sandbox_error_verdict_not_an_exception():
    closed = Sandbox(pool_size=1)
    closed.close()
    env = CodeEnv(problems=[ADD], sandbox=closed)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(fenced(ADD_SOLUTION))
    assert (reward, info["verdicts"]) == (0.0, ["sandbox_error", "skipped", "skipped"])


def test_function_problem_observation_names_the_function():
    env = CodeEnv(problems=[PAIR])
    obs, info = env.reset(seed=0)
    assert "function `pair`" in obs
    assert info["fn_name"] == "pair"


def test_state_round_trip_restores_the_problem_and_attempts():
    env = CodeEnv(max_turns=3, time_limit_s=1)
    env.reset(seed=4)
    env.step("no code")
    state = env.get_state()
    other = CodeEnv(max_turns=3, time_limit_s=1)
    other.set_state(state)
    assert (other.problem, other.turn) == (env.problem, 1)
    assert other.step("no code")[2:4] == env.step("no code")[2:4] == (False, False)


def test_env_pickles_for_worker_processes():
    env = CodeEnv(problems=[ADD], time_limit_s=1)
    env.reset(seed=0)
    copy = pickle.loads(pickle.dumps(env))
    assert copy.step(fenced(ADD_SOLUTION))[1] == 1.0


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_turns": 0}, ValueError),
        ({"max_turns": 1.5}, TypeError),
        ({"max_tests": 0}, ValueError),
        ({"time_limit_s": 0}, ValueError),
        ({"time_limit_s": "1"}, TypeError),
        ({"memory_limit_mb": 8}, ValueError),
        ({"problems": []}, ValueError),
        ({"problems": [ADD], "dataset": "x.jsonl"}, ValueError),
    ],
)
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error):
        CodeEnv(**kwargs)


# -------------------------------------------------------------------- dataset loader


@pytest.fixture
def gem_style_file(tmp_path) -> Path:
    rows = [
        {
            "problem": "Print a + b.",
            "tests": {"inputs": ["1 2\n", "5 5\n"], "outputs": ["3", "10"]},
        },
        {"problem": "Print a * b.", "tests": {"inputs": ["2 3\n"], "outputs": ["6\n"]}},
    ]
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_dataset_env_from_a_local_file_with_configured_keys(gem_style_file):
    pytest.importorskip("datasets", reason="the dataset loader needs `datasets`")
    env = CodeEnv(
        dataset=str(gem_style_file), statement_key="problem", tests_key="tests", time_limit_s=1
    )
    assert len(env.problems) == 2
    obs, info = env.reset(options={"index": 0})
    assert obs.startswith("Print a + b.")
    assert (info["problem_id"], info["num_tests"]) == ("0", 2)
    _, reward, _, _, info = env.step(fenced(ADD_SOLUTION))
    assert (reward, info["correct"]) == (1.0, True)


def test_dataset_env_reads_parquet(tmp_path):
    datasets = pytest.importorskip("datasets", reason="the dataset loader needs `datasets`")
    path = tmp_path / "p.parquet"
    datasets.Dataset.from_list(
        [{"question": "Echo.", "cases": json.dumps([{"input": "x\n", "output": "x\n"}])}]
    ).to_parquet(str(path))
    env = CodeEnv(dataset=str(path), statement_key="question", tests_key="cases")
    env.reset(seed=0)
    assert env.problem.tests == (IOTest("x\n", "x\n"),)


def test_dataset_errors_name_the_columns_and_missing_files(gem_style_file, tmp_path):
    pytest.importorskip("datasets", reason="the dataset loader needs `datasets`")
    with pytest.raises(KeyError, match=r"columns \['problem', 'tests'\]"):
        CodeEnv(dataset=str(gem_style_file))  # default statement_key="statement"
    with pytest.raises(KeyError, match="no split 'test'"):
        CodeEnv(dataset=str(gem_style_file), split="test", statement_key="problem")
    with pytest.raises(FileNotFoundError):
        CodeEnv(dataset=str(tmp_path / "missing.jsonl"))


def test_hub_backed_ids_are_marked_as_downloading_and_offline_ids_are_not():
    hub = ["code:CodeContest-v0", "code:Taco8k-v0", "code:PrimeIntellect15k-v0"]
    for env_id in [*hub, "eval:CodeContest-v0"]:
        spec = xpgym.spec(env_id)
        assert spec.requires_download is True
        assert spec.kwargs["dataset"].startswith("axon-rl/")
        assert spec.kwargs["statement_key"] == "problem"
    assert xpgym.spec("eval:CodeContest-v0").kwargs["split"] == "test"
    for env_id in ("code:Sample-v0", "code:Sample-v0-feedback"):
        assert xpgym.spec(env_id).requires_download is False


# ---------------------------------------------------------------------- conformance


@settings(max_examples=60, deadline=None)
@given(
    st.text()
    | st.builds(fenced, st.text())
    | st.builds(lambda s: f"```\n{s}\n```", st.text(alphabet="()[]{}:'\"\n =+-*/ abc123"))
)
def test_any_text_is_a_valid_step(action):
    env = CodeEnv(problems=[ADD], time_limit_s=1)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str)
    assert reward in (NO_CODE_REWARD, 0.0, 1.0)
    assert (terminated, truncated) == (True, False)
    assert info["invalid_action"] is (extract_code(action) is None)


@pytest.mark.parametrize("env_id", ["code:Sample-v0", "code:Sample-v0-feedback"])
def test_check_env(env_id):
    check_env(xpgym.make(env_id, time_limit_s=1), num_episodes=2)
