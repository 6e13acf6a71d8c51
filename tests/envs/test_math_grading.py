r"""Math grading: the last-\boxed rule, math-verify equivalences, the wall-clock timeout (no
signals), and safety across threads and processes."""

from __future__ import annotations

import multiprocessing
import signal
import threading

import pytest

from xpgym.envs.common.answer_env import GradeResult
from xpgym.envs.common.answers import last_boxed
from xpgym.envs.math.grading import MathGrader, default_grader

pytest.importorskip("math_verify", reason="grading needs math-verify (xpgym[envs])")

# sympy spends minutes on this one (measured: still running after 20 s).
PATHOLOGICAL = r"\boxed{9^{9^{9^{9}}}}"


@pytest.fixture
def grader():
    """The process-wide grader the envs use (so a test session starts its workers once)."""
    return default_grader()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so \boxed{42}.", "42"),
        (r"\boxed{1} then \boxed{ 2 }", "2"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),
        (r"\boxed{\left\{ x \right.}", r"\left\{ x \right."),
        (r"\boxed{\boxed{5}}", "5"),
        (r"\boxed {7}", "7"),
        (r"\boxed{3} and a cut-off \boxed{4", "3"),
        (r"\boxed{}", ""),
        (r"}} \boxed{a{b}c} {", "a{b}c"),
        ("no box at all", None),
        (r"\boxed{never closed", None),
        (r"\boxed", None),
    ],
)
def test_last_boxed_hand_checked(text, expected):
    assert last_boxed(text) == expected


def test_last_boxed_on_hostile_input():
    # its speed (linear in the input) is measured in tests/benchmarks/test_hot_paths.py
    assert last_boxed(r"\boxed{" * 50_000 + "}") == ""


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("0.5", r"\frac{1}{2}"),
        ("1/2", r"\frac{1}{2}"),
        (r"\dfrac12", "0.5"),
        (r"\frac{3}{4}", "0.75"),
        ("-0.5", r"-\frac{1}{2}"),
        ("3.0", "3"),
        (r"\frac{4}{2}", "2"),
        (r"\sqrt{8}", r"2\sqrt{2}"),
        (r"\frac{1}{\sqrt{2}}", r"\frac{\sqrt{2}}{2}"),
        ("(x+1)^2", "x^2+2x+1"),
        ("x = 8", "8"),
        ("10^6", "1000000"),
        ("1,000", "1000"),
        (r"\$72", "72"),
        (r"72\text{ dollars}", "72"),
        (r"\{3, 2\}", r"\{2, 3\}"),
        ("[1, 2)", "[1,2)"),
        (r"(4,\infty)", r"(4, \infty)"),
        (r"\left(-\infty, 3\right]", r"(-\infty,3]"),
        (r"9\pi", r"9 \pi"),
        (r"\text{(B)}", "B"),
    ],
)
def test_equivalent_forms_are_correct(grader, answer, gold):
    result = grader.grade(f"The answer is \\boxed{{{answer}}}.", gold)
    assert result == GradeResult(True, "graded", answer)


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("41", "42"),
        ("2.33", r"\frac{7}{3}"),
        ("3.14159", r"\pi"),
        ("(1, 2)", "(1, 2]"),
        (r"\{1, 2\}", r"\{1, 2, 3\}"),
        ("-8", "8"),
        ("x^2", "x^3"),
        ("hello", "1"),
        ("", "1"),
    ],
)
def test_wrong_answers_are_incorrect(grader, answer, gold):
    result = grader.grade(f"\\boxed{{{answer}}}", gold)
    assert result == GradeResult(False, "graded", answer)


def test_only_the_last_box_counts(grader):
    assert grader.grade(r"\boxed{42} no wait, \boxed{41}", "42").correct is False
    assert grader.grade(r"\boxed{41} no wait, \boxed{42}", "42").correct is True


def test_any_of_several_golds_matches(grader):
    assert grader.grade(r"\boxed{0.75}", ["1", "3/4"]).correct is True
    assert grader.grade(r"\boxed{2}", ["1", "3/4"]).correct is False


def test_no_box_is_no_answer(grader):
    assert grader.grade("the answer is 42", "42") == GradeResult(False, "no_answer", None)


def test_pathological_answer_times_out_and_the_grader_recovers(grader):
    result = grader.grade(PATHOLOGICAL, "5", timeout_s=1.0)
    assert (result.correct, result.status, result.answer) == (False, "timeout", "9^{9^{9^{9}}}")
    assert "1 s" in result.detail
    assert grader.grade(r"\boxed{2}", "2").correct is True  # a fresh worker took over


def test_grading_uses_no_alarm_signal(grader):
    handler = signal.getsignal(signal.SIGALRM)
    assert grader.grade(r"\boxed{1/2}", "0.5").correct is True
    assert grader.grade(PATHOLOGICAL, "5", timeout_s=0.5).status == "timeout"
    assert signal.getsignal(signal.SIGALRM) is handler  # (pytest-timeout's, if any)


def test_grading_from_many_threads_at_once(grader):
    cases = [(r"\boxed{\frac{1}{2}}", "0.5", True), (r"\boxed{3}", "4", False)] * 12
    cases.append((PATHOLOGICAL, "5", False))  # one timeout while the others grade
    results: list[GradeResult | None] = [None] * len(cases)

    def run(i: int) -> None:
        action, gold, _ = cases[i]
        results[i] = grader.grade(action, gold, timeout_s=1.0 if i == len(cases) - 1 else 30.0)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(cases))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert [r.correct for r in results] == [expected for _, _, expected in cases]
    assert [r.status for r in results] == ["graded"] * (len(cases) - 1) + ["timeout"]


def _grade_in_child(grader: MathGrader, queue) -> None:
    queue.put(grader.grade(r"\boxed{0.25}", r"\frac{1}{4}").correct)


def test_a_forked_child_grades_with_its_own_workers(grader):
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork start method here")
    assert grader.grade(r"\boxed{1}", "1").correct  # the parent has a worker before forking
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_grade_in_child, args=(grader, queue))
    child.start()
    assert queue.get(timeout=60) is True
    child.join(timeout=30)
    assert child.exitcode == 0
    assert grader.grade(r"\boxed{2}", "2").correct  # the parent's workers still work


def test_a_worker_killed_from_outside_is_replaced(grader):
    assert grader.grade(r"\boxed{1}", "1").correct
    for worker in list(grader._idle):
        worker.proc.kill()
        worker.proc.wait()
    assert grader.grade(r"\boxed{1}", "1") == GradeResult(True, "graded", "1")


def test_closed_grader_refuses():
    grader = MathGrader()
    grader.close()
    grader.close()
    with pytest.raises(RuntimeError, match="closed"):
        grader.grade(r"\boxed{1}", "1")


@pytest.mark.parametrize(
    "kwargs",
    [{"timeout_s": 0}, {"startup_timeout_s": -1}, {"max_workers": 0}, {"memory_limit_mb": -1}],
)
def test_bad_grader_arguments_raise(kwargs):
    with pytest.raises(ValueError, match="must be"):
        MathGrader(**kwargs)


def test_a_non_positive_call_timeout_raises(grader):
    with pytest.raises(ValueError, match="timeout_s must be positive"):
        grader.grade(r"\boxed{1}", "1", timeout_s=0)


def test_missing_math_verify_names_the_extra(tmp_path, monkeypatch):
    fake = tmp_path / "math_verify"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('math_verify is not installed')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    grader = MathGrader()
    try:
        with pytest.raises(ImportError, match=r'pip install "xpgym\[envs\]"'):
            grader.grade(r"\boxed{1}", "1")
    finally:
        grader.close()
