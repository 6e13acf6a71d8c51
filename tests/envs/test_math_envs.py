"""Math envs: the shipped sample, the dataset loader (local files; hub ids wired without a
network), generated arithmetic checked by an independent evaluator, episodes, seeding."""

from __future__ import annotations

import ast
import operator
import pickle
import re
import subprocess
import sys
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpgym
from xpgym.core.checks import check_env
from xpgym.envs.math import dataset as dataset_module
from xpgym.envs.math.arithmetic import DIFFICULTIES, ArithmeticEnv
from xpgym.envs.math.dataset import DatasetLoadError, MathDatasetEnv, load_questions, sample_path

pytest.importorskip("math_verify", reason="math envs grade with math-verify (xpgym[envs])")
datasets = pytest.importorskip("datasets", reason="dataset envs need datasets (xpgym[envs])")

# The shipped sample, row by row: an answer in another form than the file's (worked out by
# hand, not read from the file), and a wrong one.
SAMPLE_ANSWERS = [
    ("391", "397"),
    ("19/12", r"\frac{8}{10}"),
    ("x = 8", "-8"),
    ("72.0", "450"),
    ("720", "1080"),
    ("42", "21"),
    ("2", "3"),
    (r"\{3, 2\}", r"\{-2, -3\}"),
    (r"(4,\infty)", r"[4, \infty)"),
    (r"\sqrt{50}", r"25\sqrt{2}"),
    ("24", "12"),
    ("1/6", r"\frac{5}{36}"),
    (r"\frac{5}{4}", "2.5"),
    ("137", "144"),
    ("6", "32"),
    (r"\binom{8}{3}", "336"),
    ("21", "29"),
    (r"9 \pi", r"6\pi"),
    ("5050", "5000"),
    ("50.0", "15"),
]
GSM8K_STYLE = r"####\s*(.+?)\s*$"
PATHOLOGICAL = r"\boxed{9^{9^{9^{9}}}}"


def box(answer: str) -> str:
    return f"Final answer: \\boxed{{{answer}}}"


@pytest.fixture
def fresh_loader_cache(monkeypatch):
    """An empty loader cache for this test (its entries vanish after it)."""
    monkeypatch.setattr(dataset_module, "_cache", {})


# ------------------------------------------------------------------ the shipped sample


def test_sample_has_twenty_problems_with_answers():
    rows = load_questions(sample_path())
    assert len(rows) == len(SAMPLE_ANSWERS) == 20
    assert all(q.strip() for q in rows.questions)
    assert all(len(a) == 1 and a[0].strip() for a in rows.answers)


@pytest.mark.parametrize("index", range(20))
def test_sample_accepts_an_equivalent_answer_and_rejects_a_wrong_one(index):
    right, wrong = SAMPLE_ANSWERS[index]
    env = xpgym.make("math:Sample-v0")
    obs, info = env.reset(seed=0, options={"index": index})
    assert info == {"max_turns": 1, "index": index}
    assert obs.endswith("put your final answer within \\boxed{}.")
    assert env.step(box(right))[1:4] == (1.0, True, False)
    env.reset(options={"index": index})
    _, reward, terminated, truncated, info = env.step(box(wrong))
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert info == {
        "correct": False,
        "invalid_action": False,
        "parsed_action": wrong,
        "grading": "graded",
        "turn": 1,
    }


def test_correct_single_turn_step():
    env = MathDatasetEnv()
    env.reset(options={"index": 0})  # 17 * 23
    obs, reward, terminated, truncated, info = env.step(r"17 * 23 = \boxed{391}")
    assert (obs, reward, terminated, truncated) == ("", 1.0, True, False)
    assert info["correct"] is True
    assert info["grading"] == "graded"


def test_no_box_is_invalid_with_the_configured_penalty():
    env = MathDatasetEnv(no_answer_reward=-0.1)
    env.reset(options={"index": 0})
    _, reward, terminated, _, info = env.step("391")
    assert (reward, terminated) == (-0.1, True)
    assert (info["invalid_action"], info["correct"], info["grading"]) == (True, False, "no_answer")
    assert info["parsed_action"] is None


def test_grading_timeout_counts_as_wrong_and_says_so():
    env = MathDatasetEnv(grading_timeout_s=0.5)
    env.reset(options={"index": 0})
    _, reward, terminated, _, info = env.step(PATHOLOGICAL)
    assert (reward, terminated) == (0.0, True)
    assert (info["correct"], info["invalid_action"], info["grading"]) == (False, False, "timeout")


def test_multi_turn_feedback_and_termination():
    env = MathDatasetEnv(max_turns=3)
    env.reset(options={"index": 2})  # 5x - 7 = 3x + 9
    obs, reward, terminated, truncated, info = env.step(box("4"))
    assert obs == "Attempt 1/3: 4 is not correct. 2 attempts left; try again."
    assert (reward, terminated, truncated, info["turn"]) == (0.0, False, False, 1)
    obs, reward, terminated, _, info = env.step("eight")
    assert obs.startswith("Attempt 2/3: no \\boxed{} answer found")
    assert obs.endswith("1 attempt left; try again.")
    assert (reward, terminated, info["invalid_action"]) == (0.0, False, True)
    obs, reward, terminated, truncated, info = env.step(box("8"))
    assert obs == "Attempt 3/3: correct!"
    assert (reward, terminated, truncated, info["correct"]) == (1.0, True, False, True)


def test_multi_turn_runs_out_of_attempts():
    env = MathDatasetEnv(max_turns=2)
    env.reset(options={"index": 2})
    env.step(box("1"))
    obs, reward, terminated, truncated, _ = env.step(box("2"))
    assert obs == "Attempt 2/2: 2 is not correct. No attempts left."
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert "8" not in obs  # the gold answer is never shown


def test_instruction_can_be_replaced_or_dropped():
    env = MathDatasetEnv(instruction="")
    obs, _ = env.reset(options={"index": 0})
    assert obs == r"What is $17 \times 23$?"
    env = MathDatasetEnv(instruction="Answer in \\boxed{}.")
    assert env.reset(options={"index": 0})[0] == "What is $17 \\times 23$?\n\nAnswer in \\boxed{}."


def test_same_seed_same_question_and_sampling_covers_the_set():
    env = xpgym.make("math:Sample-v0")
    assert env.reset(seed=7) == env.reset(seed=7)
    indices = {env.reset(seed=s)[1]["index"] for s in range(200)}
    assert indices == set(range(20))


def test_bad_index_option_raises():
    env = MathDatasetEnv()
    for index in (20, -1, "3", True):
        with pytest.raises(ValueError, match=r"\[0, 20\)"):
            env.reset(options={"index": index})


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=200) | st.builds(lambda s: f"\\boxed{{{s}}}", st.text(max_size=60)))
def test_any_text_is_a_valid_step(action):
    env = MathDatasetEnv(max_turns=2, grading_timeout_s=3.0)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str)
    assert reward in (0.0, 1.0)
    assert (type(terminated), type(truncated)) == (bool, bool)
    assert truncated is False
    assert type(info["correct"]) is bool
    assert info["invalid_action"] is (info["parsed_action"] is None)


def test_check_env_on_the_sample():
    check_env(xpgym.make("math:Sample-v0"))
    check_env(MathDatasetEnv(max_turns=3))


def test_set_state_round_trip_across_instances():
    env = MathDatasetEnv(max_turns=3)
    env.reset(seed=4)
    env.step(box("0"))
    snapshot = env.get_state()
    frozen = pickle.dumps(snapshot)
    first = [env.step(box(a)) for a in ("1", "2")]
    other = MathDatasetEnv(max_turns=3, path=str(sample_path()))
    other.set_state(snapshot)
    assert [other.step(box(a)) for a in ("1", "2")] == first
    assert pickle.dumps(snapshot) == frozen


# ------------------------------------------------------------------------ the loader


def write(tmp_path, name: str, rows: dict[str, list]) -> str:
    path = tmp_path / name
    table = datasets.Dataset.from_dict(rows)
    {"parquet": table.to_parquet, "csv": table.to_csv, "jsonl": table.to_json}[name.split(".")[1]](
        str(path)
    )
    return str(path)


def test_loader_reads_parquet_with_other_keys_and_lists_of_golds(tmp_path):
    path = write(
        tmp_path,
        "set.parquet",
        {"q": ["What is 6 * 7?", "Name 1/2."], "golds": [["42"], ["0.5", "1/2"]]},
    )
    env = MathDatasetEnv(path, question_key="q", answer_key="golds", instruction="")
    assert env.reset(options={"index": 1}) == ("Name 1/2.", {"max_turns": 1, "index": 1})
    assert env.problem.answers == ("0.5", "1/2")
    assert env.step(box(r"\frac{1}{2}"))[1] == 1.0


def test_loader_reads_csv_and_extracts_gsm8k_style_answers(tmp_path):
    path = write(
        tmp_path,
        "gsm.csv",
        {
            "question": ["Ann has 2 apples and buys 3 more. How many?", "Big sum?"],
            "answer": ["2 + 3 = 5\n#### 5", "1000 + 234 = 1234\n#### 1,234"],
        },
    )
    rows = load_questions(path, question_key="question", answer_regex=GSM8K_STYLE)
    assert rows.answers == (("5",), ("1,234",))
    env = MathDatasetEnv(path, question_key="question", answer_regex=GSM8K_STYLE)
    env.reset(options={"index": 1})
    assert env.step(box("1234"))[1] == 1.0


def test_builder_name_with_data_files(tmp_path):
    path = write(tmp_path, "rows.jsonl", {"problem": ["1 + 1?"], "answer": ["2"]})
    env = MathDatasetEnv("json", data_files=[path])
    assert env.reset(seed=0)[1]["index"] == 0
    assert env.step(box("2"))[1] == 1.0


def test_missing_file_names_the_id_and_the_path(tmp_path):
    missing = str(tmp_path / "nope.jsonl")
    env = xpgym.make("math:Sample-v0", path=missing)
    with pytest.raises(FileNotFoundError, match=r"'math:Sample-v0'.*nope\.jsonl"):
        env.reset(seed=0)


def test_missing_key_lists_the_columns():
    env = xpgym.make("math:Sample-v0", question_key="question")
    with pytest.raises(ValueError, match=r"'math:Sample-v0'.*'question'.*\['problem', 'answer'\]"):
        env.reset(seed=0)


def test_split_errors_list_the_splits(tmp_path):
    train = write(tmp_path, "train.jsonl", {"problem": ["a"], "answer": ["1"]})
    test = write(tmp_path, "test.jsonl", {"problem": ["b"], "answer": ["2"]})
    files = {"train": train, "test": test}
    with pytest.raises(ValueError, match=r"splits \['train', 'test'\]; pass split="):
        load_questions("json", data_files=files)
    with pytest.raises(ValueError, match=r"no split 'dev'.*\['train', 'test'\]"):
        load_questions("json", data_files=files, split="dev")
    assert load_questions("json", data_files=files, split="test").questions == ("b",)


def test_answer_regex_that_does_not_match_names_the_row():
    with pytest.raises(ValueError, match=r"row 0, column 'answer'.*does not match '391'"):
        load_questions(sample_path(), answer_regex=GSM8K_STYLE)
    with pytest.raises(re.error):
        MathDatasetEnv(answer_regex="(")


@pytest.mark.usefixtures("fresh_loader_cache")
def test_a_failing_load_dataset_names_the_source(monkeypatch):
    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'axon-rl/MATH-12k' on the Hub")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    env = xpgym.make("math:Math12K-v0")
    with pytest.raises(DatasetLoadError, match=r"'math:Math12K-v0'.*'axon-rl/MATH-12k'.*Hub"):
        env.reset(seed=0)


HUB_IDS = {
    "math:GSM8K-v0": (("axon-rl/GSM-8k", None), None, "problem", "answer"),
    "math:Math12K-v0": (("axon-rl/MATH-12k", None), None, "problem", "answer"),
    "math:Orz57K-v0": (("axon-rl/ORZ-57k", None), None, "problem", "answer"),
    "math:DeepScaleR40K-v0": (("axon-rl/DeepScaleR-40K", None), None, "problem", "answer"),
    "math:ASDiv2K-v0": (("axon-rl/ASDIV-2k", None), None, "problem", "answer"),
    "eval:MATH500-v0": (("axon-rl/math-eval", None), "math", "problem", "answer"),
    "eval:AIME24-v0": (("axon-rl/math-eval", None), "aime24", "problem", "answer"),
    "eval:AMC-v0": (("axon-rl/math-eval", None), "amc", "problem", "answer"),
    "eval:OlympiadBench-v0": (("axon-rl/math-eval", None), "olympiad_bench", "problem", "answer"),
    "eval:Minerva-v0": (("axon-rl/math-eval", None), "minerva", "problem", "answer"),
    "eval:GSM8K-v0": (("openai/gsm8k", "main"), "test", "question", "answer"),
}


@pytest.mark.usefixtures("fresh_loader_cache")
@pytest.mark.parametrize("env_id", sorted(HUB_IDS))
def test_hub_ids_load_their_dataset_only_at_reset(env_id, monkeypatch):
    (path, name), split, question_key, answer_key = HUB_IDS[env_id]
    calls = []

    def fake_hub(*args, **kwargs):
        calls.append((args, kwargs))
        gold = "2 + 2 = 4\n#### 4" if env_id == "eval:GSM8K-v0" else "4"
        rows = {question_key: ["What is 2 + 2?"], answer_key: [gold]}
        splits = ["train"] if split is None else [split, "other"]
        return datasets.DatasetDict({s: datasets.Dataset.from_dict(rows) for s in splits})

    monkeypatch.setattr(datasets, "load_dataset", fake_hub)
    assert xpgym.spec(env_id).requires_download
    assert xpgym.spec(f"{env_id}-python").requires_download
    env = xpgym.make(env_id)
    assert calls == []  # nothing is loaded before reset
    obs, _ = env.reset(seed=0)
    assert calls == [((path, name), {"data_files": None})]
    assert obs.startswith("What is 2 + 2?")
    assert env.step(box("4"))[1] == 1.0


def test_import_xpgym_imports_no_heavy_package():
    code = (
        "import sys, xpgym; xpgym.make('math:Sample-v0'); xpgym.make('math:Arithmetic-v0');"
        "print(sorted(m for m in ('datasets', 'sympy', 'math_verify', 'PIL') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# -------------------------------------------------------------------------- arithmetic

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def evaluate(node: ast.AST) -> Fraction:
    """An exact evaluator written for this test: integers, + - * / and parentheses."""
    if isinstance(node, ast.Expression):
        return evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -evaluate(node.operand)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return evaluate(node.left) / evaluate(node.right)  # ZeroDivisionError fails the test
    if isinstance(node, ast.BinOp):
        return _OPS[type(node.op)](evaluate(node.left), evaluate(node.right))
    raise AssertionError(f"unexpected syntax {ast.dump(node)}")


def solve_linear(equation: str) -> Fraction:
    """Solve 'a x + b = c x + d' by evaluating each side at x = 0 and x = 1."""

    def side(text: str, x: int) -> Fraction:
        text = re.sub(r"(\d)x", rf"\1*{x}", text).replace("x", str(x))
        return evaluate(ast.parse(text, mode="eval"))

    left, right = equation.split(" = ")
    b, d = side(left, 0), side(right, 0)
    a, c = side(left, 1) - b, side(right, 1) - d
    assert a != c
    return (d - b) / (a - c)


def solution_of(question: str) -> Fraction:
    expression = re.fullmatch(
        r"Compute (.+)\. Give the exact value \(an integer or a fraction\)\.", question
    )
    if expression:
        return evaluate(ast.parse(expression[1], mode="eval"))
    equation = re.fullmatch(r"Solve for x: (.+)\. Give the exact value of x\.", question)
    assert equation, question
    return solve_linear(equation[1])


@pytest.mark.parametrize("difficulty", [None, "easy", "hard", "random"])
def test_arithmetic_answers_match_an_independent_evaluation(difficulty):
    env = ArithmeticEnv(difficulty, instruction="")
    kinds = set()
    for seed in range(150):
        question, info = env.reset(seed=seed)
        assert Fraction(info["answer"]) == solution_of(question), question
        kinds.add(info["kind"])
    assert kinds == {"expression", "equation"}


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_arithmetic_presets_bound_the_numbers(difficulty):
    settings_ = DIFFICULTIES[difficulty]
    env = ArithmeticEnv(difficulty, equation_probability=0.0, instruction="")
    counts = set()
    for seed in range(100):
        question, _ = env.reset(seed=seed)
        numbers = [int(n) for n in re.findall(r"\d+", question)]
        assert all(1 <= n <= settings_.max_value for n in numbers)
        counts.add(len(numbers))
    assert counts == set(range(settings_.min_operands, settings_.max_operands + 1))


def test_easy_equations_have_integer_solutions():
    env = ArithmeticEnv("easy", equation_probability=1.0)
    for seed in range(50):
        _, info = env.reset(seed=seed)
        assert Fraction(info["answer"]).denominator == 1
        assert -10 <= int(info["answer"]) <= 10


def test_arithmetic_accepts_equivalent_forms():
    env = ArithmeticEnv()
    question, info = env.reset(seed=0)  # Compute 7 + 2 + 1 / 4 (hand-checked: 37/4)
    assert question.startswith("Compute 7 + 2 + 1 / 4.")
    assert info["answer"] == "37/4"
    for answer, reward in [("9.25", 1.0), (r"\frac{37}{4}", 1.0), ("37/40", 0.0), ("9", 0.0)]:
        env.reset(seed=0)
        assert env.step(box(answer))[1] == reward, answer


def test_random_difficulty_draws_both_presets_and_seeds_repeat():
    env = ArithmeticEnv("random")
    assert {env.reset(seed=s)[1]["difficulty"] for s in range(30)} == {"easy", "hard"}
    assert env.reset(seed=3) == env.reset(seed=3)


@pytest.mark.parametrize("difficulty", [None, "easy", "hard", "random"])
def test_check_env_on_arithmetic(difficulty):
    check_env(ArithmeticEnv(difficulty))


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=100))
def test_arithmetic_any_text_is_a_valid_step(action):
    env = ArithmeticEnv()
    env.reset(seed=1)
    _, reward, terminated, truncated, info = env.step(action)
    assert reward in (0.0, 1.0)
    assert (terminated, truncated) == (True, False)
    assert type(info["correct"]) is bool


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"difficulty": "medium"}, ValueError),
        ({"equation_probability": 1.5}, ValueError),
        ({"equation_probability": "half"}, TypeError),
        ({"max_turns": 0}, ValueError),
        ({"max_turns": True}, TypeError),
        ({"grading_timeout_s": 0}, ValueError),
        ({"no_answer_reward": "low"}, TypeError),
    ],
)
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error, match=r"ArithmeticEnv|difficulty"):
        ArithmeticEnv(**kwargs)


def test_python_variants_are_registered():
    assert xpgym.spec("math:Arithmetic-v0-python").kwargs["base_id"] == "math:Arithmetic-v0"
    assert not xpgym.spec("math:Sample-v0-python").requires_download
    env = xpgym.make("math:Sample-v0-python")
    obs, _ = env.reset(seed=0)
    assert "<python>" in obs
    env.close()
