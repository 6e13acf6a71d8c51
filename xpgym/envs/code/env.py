r"""CodeEnv: write a Python solution to a programming problem; it runs on tests in a sandbox.

Episode rules:

* `reset()` draws a problem uniformly from the problem set with `np_random` (or takes
  ``options={"index": i}``). The observation is the statement plus what to write (a program
  reading stdin, or a function with a given name), the answer format and the limits.
* Every `step()` is one attempt. The code is the **last** fenced block of the action in
  Python or without a language (````` ```python ````` ... ````` ``` `````; the exact rule is
  in `xpgym.envs.code.judge`). It runs on the problem's tests, each in a fresh sandbox call
  (`xpgym.core.sandbox`: no network, no host files, CPU/memory/output limits), and each
  test gets a verdict: passed, wrong answer, runtime error, timeout, memory limit, output
  limit (see `xpgym.envs.code.judge.VERDICTS`).
* Single-turn by default (``max_turns=1``): the first attempt ends the episode
  (``terminated=True``). With ``max_turns > 1`` the observation after a failed attempt is
  test feedback (which test failed, how, and with ``show_failed_test`` its input, expected
  output and what the code gave) and the episode goes on; it terminates when every test
  passes and is truncated after the last allowed attempt.
* With binary scoring (the default) the tests run in order and stop at the first failure
  (the rest are ``"skipped"``): the score is 0 anyway. With ``partial_credit=True`` all run.
* ``max_tests`` caps the tests run per attempt: the ones with the longest inputs (the
  argument lists' JSON for function tests) are kept, as GEM does, then run in their order.

Rewards, per step:

=========================================  ===============================  ===================
Attempt                                    reward                           ``info``
=========================================  ===============================  ===================
every test passes                          ``1.0`` minus earlier credit     ``correct=True``
a test fails, binary scoring (default)     ``0.0``                          ``correct=False``
a test fails, ``partial_credit=True``      fraction of tests passed, minus  ``correct=False``
                                           earlier credit (never below 0)
no code block (or only whitespace in it)   ``-0.1`` (`NO_CODE_REWARD`)      ``invalid_action``
=========================================  ===============================  ===================

"Minus earlier credit": a step earns how much its score improves on the best score of the
episode's earlier attempts (``max(0, score - best)``), so an episode's return is its best
score, minus 0.1 per attempt without code. Single-turn, that is simply the attempt's score.

``info`` after every step: ``correct`` and ``invalid_action`` (bools), ``parsed_action`` (the
code that ran, or `None`), ``turn``, ``problem_id``, ``verdicts`` (one verdict string per test
run, in order), ``verdict_counts`` (every verdict of `VERDICTS` -> count), ``tests_passed``,
``tests_total``, ``score`` (this attempt's, in [0, 1]) and ``metrics``
(``{"pass_rate": tests_passed / tests_total}``, 0 without code). `reset()` info: ``problem_id``,
``num_tests``, ``fn_name`` and ``max_turns``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar, Final

from xpgym.core.env import Env
from xpgym.core.sandbox import Sandbox, SandboxLimits, default_sandbox
from xpgym.core.text import shorten_end
from xpgym.envs.code.judge import VERDICTS, TestOutcome, extract_code, judge
from xpgym.envs.code.problems import (
    CallTest,
    CodeProblem,
    ProblemSet,
    load_dataset_problems,
    load_sample_problems,
)
from xpgym.envs.common.arguments import is_int, is_number

__all__ = ["CORRECT_REWARD", "NO_CODE_REWARD", "CodeEnv"]

CORRECT_REWARD: Final = 1.0
NO_CODE_REWARD: Final = -0.1
_SHOWN_CHARS: Final = 400
_VERDICT_TEXT: Final = {
    "wrong_answer": "wrong answer",
    "runtime_error": "runtime error",
    "timeout": "time limit exceeded",
    "memory_limit": "memory limit exceeded",
    "output_limit": "output limit exceeded",
    "sandbox_error": "the sandbox failed (not your code's fault)",
}


def _shown(text: str) -> str:
    text = shorten_end(text, _SHOWN_CHARS)
    return text if text.endswith("\n") else text + "\n"


def _attempts(n: int) -> str:
    return "1 attempt" if n == 1 else f"{n} attempts"


class CodeEnv(Env[str]):
    """Solve a programming problem in Python; see the module docstring for the rules.

    Args:
        dataset: `None` for the shipped sample set (`load_sample_problems`), else a Hugging
            Face hub dataset id or a local json/jsonl/parquet/csv/arrow file read through
            `load_dataset_problems` (needs the ``datasets`` package).
        split: The dataset split (`None`: the only one).
        subset: The dataset configuration name, if it has several.
        statement_key, tests_key, id_key, fn_name_key: Dataset columns (see
            `xpgym.envs.code.problems.problem_from_record`).
        problems: Problems to use instead of a dataset (a list of `CodeProblem`); give
            either this or `dataset`.
        max_turns: Attempts per episode (1: single-turn).
        partial_credit: Score an attempt by the fraction of tests passed instead of 1/0.
        max_tests: Run at most this many tests per attempt (the longest inputs); `None`: all.
        time_limit_s: CPU seconds per test (the sandbox rounds up to whole seconds); the wall
            clock allows twice as long (for programs that sleep or block).
        memory_limit_mb: Address-space limit per test process, in MiB (Python itself takes
            about 30-60).
        show_failed_test: In feedback, show the failed test's input, expected output and
            the code's output (else only which test failed and how).
        sandbox: Where to run code; `None`: the process-wide `default_sandbox()`.

    Raises:
        ValueError: no problems, both `dataset` and `problems`, or a bad limit.
        TypeError: a number is not a number.
        Loading a `dataset` raises the errors of `load_dataset_problems`, after ``CodeEnv: ``.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": "optional"}

    def __init__(
        self,
        dataset: str | None = None,
        *,
        split: str | None = "train",
        subset: str | None = None,
        statement_key: str = "statement",
        tests_key: str = "tests",
        id_key: str = "id",
        fn_name_key: str = "fn_name",
        problems: Sequence[CodeProblem] | None = None,
        max_turns: int = 1,
        partial_credit: bool = False,
        max_tests: int | None = None,
        time_limit_s: float = 4.0,
        memory_limit_mb: int = 1024,
        show_failed_test: bool = True,
        sandbox: Sandbox | None = None,
    ) -> None:
        for name, value, lowest in (
            ("max_turns", max_turns, 1),
            ("max_tests", 1 if max_tests is None else max_tests, 1),
            ("memory_limit_mb", memory_limit_mb, 64),
        ):
            if not is_int(value):
                raise TypeError(f"CodeEnv: {name} must be an int, got {value!r}")
            if value < lowest:
                raise ValueError(f"CodeEnv: {name} must be at least {lowest}, got {value}")
        if not is_number(time_limit_s):
            raise TypeError(f"CodeEnv: time_limit_s must be a number, got {time_limit_s!r}")
        if not time_limit_s > 0:
            raise ValueError(f"CodeEnv: time_limit_s must be positive, got {time_limit_s}")
        if problems is not None and dataset is not None:
            raise ValueError("CodeEnv: pass either dataset= or problems=, not both")
        self.problems: ProblemSet
        if problems is not None:
            self.problems = tuple(problems)
        elif dataset is None:
            self.problems = load_sample_problems()
        else:
            self.problems = load_dataset_problems(
                dataset,
                split=split,
                name=subset,
                statement_key=statement_key,
                tests_key=tests_key,
                id_key=id_key,
                fn_name_key=fn_name_key,
                owner="CodeEnv",
            )
        if len(self.problems) == 0:
            raise ValueError("CodeEnv: the problem set is empty")
        self.max_turns = int(max_turns)
        self.partial_credit = bool(partial_credit)
        self.max_tests = None if max_tests is None else int(max_tests)
        self.show_failed_test = bool(show_failed_test)
        self.limits = SandboxLimits(
            cpu_seconds=float(time_limit_s),
            wall_timeout_s=2.0 * float(time_limit_s),
            memory_bytes=int(memory_limit_mb) << 20,
        )
        self._sandbox = sandbox
        self.index = 0
        self.problem: CodeProblem = self.problems[0]
        self.turn = 0
        self.best_score = 0.0

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox code runs in (the shared default one unless one was given)."""
        return self._sandbox if self._sandbox is not None else default_sandbox()

    def _select_tests(self) -> list[int]:
        tests = self.problem.tests
        if self.max_tests is None or len(tests) <= self.max_tests:
            return list(range(len(tests)))

        def size(i: int) -> int:
            test = tests[i]
            return len(json.dumps(test.args)) if isinstance(test, CallTest) else len(test.input)

        longest = sorted(range(len(tests)), key=lambda i: -size(i))[: self.max_tests]
        return sorted(longest)

    def _load(self, index: int) -> None:
        self.index = index
        self.problem = self.problems[index]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode on a random problem, or ``options["index"]``.

        Raises:
            IndexError: ``options["index"]`` is not a valid problem index.
            TypeError: ``options["index"]`` is not an int.
        """
        super().reset(seed=seed)
        index = (options or {}).get("index")
        if index is None:
            index = int(self.np_random.integers(len(self.problems)))
        elif not is_int(index):
            raise TypeError(f"CodeEnv: options['index'] must be an int, got {index!r}")
        elif not 0 <= index < len(self.problems):
            raise IndexError(
                f"CodeEnv: problem index {index} is not in 0..{len(self.problems) - 1}"
            )
        self._load(int(index))
        self.turn = 0
        self.best_score = 0.0
        info = {
            "problem_id": self.problem.id,
            "num_tests": len(self._select_tests()),
            "fn_name": self.problem.fn_name,
            "max_turns": self.max_turns,
        }
        return self._instructions(), info

    def _instructions(self) -> str:
        problem = self.problem
        parts = [f"{problem.title}\n\n" if problem.title else "", problem.statement.strip(), "\n\n"]
        if problem.fn_name is None:
            parts.append(
                "Write a Python 3 program that reads the input from standard input and prints "
                "the answer to standard output."
            )
        else:
            parts.append(
                f"Write a Python 3 function `{problem.fn_name}`. Each test calls it with the "
                "test's arguments and checks the value it returns; do not read input or print "
                "the answer."
            )
        cpu = self.limits.cpu_seconds
        memory = self.limits.memory_bytes >> 20
        parts.append(
            " Put your code in a ```python fenced block; only the last such block in your "
            f"reply runs, once per test, with the standard library only, no network, at most "
            f"{cpu:g} s of CPU time and {memory} MiB of memory per test."
        )
        if self.max_turns > 1:
            parts.append(
                f" You have {_attempts(self.max_turns)}; after a failed one you see which test "
                "failed."
            )
        return "".join(parts)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Judge one attempt; see the module docstring for the rules and rewards."""
        self.turn += 1
        code = extract_code(action)
        selected = self._select_tests()
        outcomes: list[TestOutcome] = []
        if code is not None:
            outcomes = judge(
                code,
                self.problem,
                sandbox=self.sandbox,
                limits=self.limits,
                tests=selected,
                stop_at_first_failure=not self.partial_credit,
            )
        tests_passed = sum(outcome.passed for outcome in outcomes)
        correct = code is not None and tests_passed == len(outcomes)
        if code is None:
            reward, score = NO_CODE_REWARD, 0.0
            feedback = (
                "No code found: put your solution in a fenced block that starts with a line "
                "```python and ends with a line ```."
            )
        else:
            if self.partial_credit:
                score = tests_passed / len(outcomes)
            else:
                score = CORRECT_REWARD if correct else 0.0
            reward = max(0.0, score - self.best_score)
            self.best_score = max(self.best_score, score)
            feedback = self._feedback(outcomes, selected)
        terminated = correct or self.max_turns == 1
        truncated = not terminated and self.turn >= self.max_turns
        if not terminated and not truncated:
            feedback += f"\n{_attempts(self.max_turns - self.turn)} left."
        elif truncated:
            feedback += "\nNo attempts left."
        info = {
            "correct": correct,
            "invalid_action": code is None,
            "parsed_action": code,
            "turn": self.turn,
            "problem_id": self.problem.id,
            "verdicts": [outcome.verdict for outcome in outcomes],
            "verdict_counts": {
                verdict: sum(outcome.verdict == verdict for outcome in outcomes)
                for verdict in VERDICTS
            },
            "tests_passed": tests_passed,
            "tests_total": len(selected),
            "score": score,
            "metrics": {"pass_rate": tests_passed / len(selected) if outcomes else 0.0},
        }
        return feedback, float(reward), terminated, truncated, info

    def _feedback(self, outcomes: list[TestOutcome], selected: list[int]) -> str:
        passed = sum(outcome.passed for outcome in outcomes)
        if passed == len(outcomes):
            return f"All {len(outcomes)} tests passed."
        text = f"{passed}/{len(outcomes)} tests passed."
        position, failure = next((k, o) for k, o in enumerate(outcomes) if not o.passed)
        how = _VERDICT_TEXT[failure.verdict]
        if failure.verdict == "timeout":
            how += f" ({self.limits.cpu_seconds:g} s)"
        elif failure.verdict == "memory_limit":
            how += f" ({self.limits.memory_bytes >> 20} MiB)"
        text += f" Test {position + 1} failed: {how}."
        if any(outcome.verdict == "skipped" for outcome in outcomes):
            text = text[:-1] + " (the tests after it were not run)."
        if not self.show_failed_test:
            return text
        test = self.problem.tests[selected[position]]
        if isinstance(test, CallTest):
            arguments = ", ".join(json.dumps(arg) for arg in test.args)
            shown = f"\nCall: {self.problem.fn_name}({arguments})\n"
            shown += f"Expected return value: {json.dumps(test.accepted[0])}\n"
        else:
            shown = f"\nInput:\n{_shown(test.input)}Expected output:\n{_shown(test.output)}"
        if failure.detail:
            shown += _shown(failure.detail)
        return text + shown.rstrip("\n")

    def sample_random_action(self) -> str:
        """A plausible attempt (often wrong) or a reply without code, from `np_random`."""
        if self.problem.fn_name is not None:
            candidates = [
                f"```python\ndef {self.problem.fn_name}(*args):\n    return args[0]\n```",
                f"```python\ndef {self.problem.fn_name}(*args):\n    return None\n```",
            ]
        else:
            candidates = [
                "```python\nprint(input())\n```",
                "```python\nimport sys\nprint(len(sys.stdin.read().split()))\n```",
            ]
        candidates += ["```python\nraise SystemExit(1)\n```", "I do not know how to solve this."]
        return candidates[int(self.np_random.integers(len(candidates)))]

    def get_state(self) -> dict[str, Any]:
        """Snapshot: problem index, turn, best score so far and the RNG state."""
        return {
            "index": self.index,
            "turn": self.turn,
            "best_score": self.best_score,
            "rng": self.np_random.bit_generator.state,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a `get_state()` snapshot taken from an env over the same problems."""
        self._load(state["index"])
        self.turn = state["turn"]
        self.best_score = state["best_score"]
        self.np_random.bit_generator.state = state["rng"]
