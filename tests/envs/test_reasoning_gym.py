"""reasoning-gym envs: the lazy ``rg:`` family, answer extraction, sandboxed scoring,
a deterministic sample of tasks through `check_env`, gold answers, seeding and snapshots."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpgym
from xpgym.__main__ import main as cli
from xpgym.core.checks import check_env
from xpgym.envs.reasoning_gym import env as rg_env
from xpgym.envs.reasoning_gym.env import ReasoningGymEnv, extract_answer

rg = pytest.importorskip("reasoning_gym", reason="the rg: envs need reasoning-gym")

TASKS = sorted(set(rg.factory.DATASETS) - {"composite"})
SAMPLE = [*TASKS[::10], "letter_counting", "n_queens", "game_of_life", "arc_1d"]
"""Every tenth task in name order, plus tasks with something particular: a plain string
scorer, one that `eval`s the answer, one whose generator needs cellpylib (replaced by a
stand-in inside the scoring sandbox) and one built from generator functions."""


@pytest.fixture(scope="module")
def counting() -> ReasoningGymEnv:
    return ReasoningGymEnv("letter_counting")


def answer_tag(text: str) -> str:
    return f"<think>working</think> <answer>{text}</answer>"


# ----------------------------------------------------------------------------- registry


def test_import_xpgym_and_other_ids_do_not_import_reasoning_gym():
    probe = (
        "import sys, xpgym\n"
        "xpgym.list_envs(); xpgym.list_envs('game:*'); xpgym.make('game:GuessTheNumber-v0')\n"
        "print('reasoning_gym' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]


def test_every_task_has_an_id_listed_only_when_asked_for():
    assert xpgym.list_envs("rg:*") == [f"rg:{task}-v0" for task in TASKS]
    assert not [i for i in xpgym.list_envs() if i.startswith("rg:")]
    assert xpgym.list_envs("rg:letter_*") == ["rg:letter_counting-v0", "rg:letter_jumble-v0"]
    assert "rg:composite-v0" not in xpgym.list_envs("rg:*")


def test_cli_lists_rg_ids(capsys):
    assert cli(["list", "rg:"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ID")
    assert [line.split()[0] for line in lines[1:]] == [f"rg:{task}-v0" for task in TASKS]


def test_spec_of_an_rg_id_builds_that_task():
    env_spec = xpgym.spec("rg:letter_counting-v0")
    assert env_spec.kwargs == {"task": "letter_counting"}
    assert not env_spec.requires_download
    env = xpgym.make("rg:letter_counting-v0")
    assert (env.task, env.spec.id) == ("letter_counting", "rg:letter_counting-v0")


def test_unknown_rg_id_suggests_close_ones():
    with pytest.raises(xpgym.UnknownEnvError, match="did you mean 'rg:letter_counting-v0'"):
        xpgym.make("rg:leter_counting-v0")


# ----------------------------------------------------------------------- registry family


@pytest.fixture
def toy_family(monkeypatch):
    """A `register_family` family ``toyfam:`` whose loader counts its calls."""
    from xpgym.core import registry as reg

    monkeypatch.setattr(reg, "_families", dict(reg._families))
    monkeypatch.setattr(reg, "_family_specs", dict(reg._family_specs))
    monkeypatch.setattr(reg, "registry", dict(reg.registry))
    calls = []

    def specs():
        calls.append(1)
        return [
            reg.EnvSpec(f"toyfam:{name}-v0", "xpgym.envs.games.guess_the_number:GuessTheNumberEnv")
            for name in ("Alpha", "Beta")
        ]

    reg.register_family("toyfam", specs)
    return reg, calls


def test_a_family_is_loaded_once_and_only_when_needed(toy_family):
    reg, calls = toy_family
    assert "toyfam:Alpha-v0" not in xpgym.list_envs()
    assert xpgym.list_envs("game:*")
    assert calls == []
    assert xpgym.make("toyfam:Alpha-v0").spec.id == "toyfam:Alpha-v0"
    assert xpgym.list_envs("toyfam:*") == ["toyfam:Alpha-v0", "toyfam:Beta-v0"]
    assert xpgym.list_envs("*toyfam:B*") == ["toyfam:Beta-v0"]
    assert calls == [1]
    reg.register("toyfam:Alpha-v0", "toy_envs:ToyEnv")  # a registered id wins
    assert xpgym.spec("toyfam:Alpha-v0").entry_point == "toy_envs:ToyEnv"
    with pytest.raises(ValueError, match="a family for 'toyfam' is registered"):
        reg.register_family("toyfam", "m:f")


def test_include_families_lists_every_family_and_skips_a_missing_package(toy_family):
    reg, calls = toy_family
    listed = xpgym.list_envs("*Alpha*", include_families=True)
    assert "toyfam:Alpha-v0" in listed
    assert "toyfam:Beta-v0" not in listed
    assert calls == [1]

    def missing():
        raise ImportError("toyfam needs a package")

    reg.register_family("toyfam", missing, override=True)
    everything = xpgym.list_envs(include_families=True)  # no raise: the family is left out
    assert "game:GuessTheNumber-v0" in everything
    assert not [i for i in everything if i.startswith("toyfam:")]


def test_the_cli_list_shows_the_rg_family(capsys):
    from xpgym.__main__ import main

    assert main(["list", "letter_counting"]) == 0
    assert "rg:letter_counting-v0" in capsys.readouterr().out


def test_a_failing_family_loader_is_retried(toy_family, monkeypatch):
    reg, _ = toy_family
    attempts = []

    def missing():
        attempts.append(1)
        raise ImportError("toyfam needs a package; install it with pip install x")

    reg.register_family("toyfam", missing, override=True)
    for _ in range(2):
        with pytest.raises(ImportError, match="install it with"):
            xpgym.make("toyfam:Alpha-v0")
    assert len(attempts) == 2


def test_a_family_must_produce_ids_of_its_category(toy_family):
    reg, _ = toy_family
    reg.register_family("toyfam", lambda: [reg.EnvSpec("game:X-v0", "m:f")], override=True)
    with pytest.raises(ValueError, match="family 'toyfam' produced the id 'game:X-v0'"):
        xpgym.spec("toyfam:X-v0")


# ----------------------------------------------------------------------------- answers


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("<answer> 42 </answer>", "42"),
        ("\\boxed{7} then <answer>8</answer>", "8"),  # <answer> wins over \boxed
        ("the answer is \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("<answer>\\boxed{x + 1}</answer>", "x + 1"),
        ("<answer> \\boxed { 3 } </answer>", "3"),
        ("<answer>\\boxed{\\boxed{5}}</answer>", "\\boxed{\\boxed{5}}"),
        ("<answer>\\boxed{1} and \\boxed{2}</answer>", "\\boxed{1} and \\boxed{2}"),
        ("\\boxed{1} \\boxed{2", "1"),  # an unbalanced \boxed{ is ignored
        ("42", None),
    ],
)
def test_extract_answer(action, expected):
    assert extract_answer(action) == expected


# ----------------------------------------------------------------------------- episodes


def test_gold_answer_scores_one_and_ends_the_episode(counting):
    obs, info = counting.reset(seed=3)
    assert obs.startswith(counting.entry["question"])
    assert "<answer>" in obs
    assert info == {"task": "letter_counting", "index": counting.index}
    gold = counting.entry["answer"]
    obs, reward, terminated, truncated, info = counting.step(answer_tag(gold))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["correct"] is True
    assert info["invalid_action"] is False
    assert (info["parsed_action"], info["reference_answer"], info["score_error"]) == (
        gold,
        gold,
        None,
    )
    assert info["metrics"] == {"score": 1.0}
    assert obs.startswith("Correct.")


@pytest.mark.parametrize("answer", ["{gold} letters", "-1", "many"])
def test_reward_is_the_tasks_own_score(counting, answer):
    counting.reset(options={"index": 4})
    entry = counting.entry
    answer = answer.format(gold=entry["answer"])
    expected = counting.dataset.score_answer(answer, entry)  # a plain string: safe here
    _, reward, _, _, info = counting.step(answer_tag(answer))
    assert reward == info["score"] == pytest.approx(expected)
    assert info["correct"] is (expected == 1.0)


def test_missing_answer_is_invalid_and_not_scored(counting, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("an action without an answer must not be scored")

    monkeypatch.setattr(rg_env, "score_answer", fail)
    counting.reset(seed=0)
    obs, reward, terminated, truncated, info = counting.step("I think it is 3")
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert info["invalid_action"] is True
    assert info["correct"] is False
    assert info["parsed_action"] is None
    assert "<answer>" in obs


@pytest.mark.parametrize("task", SAMPLE)
def test_sampled_task_passes_check_env_and_scores_its_gold_answer(task):
    env = xpgym.make(f"rg:{task}-v0")
    check_env(env, num_episodes=1)
    env.reset(seed=5)
    gold = env.entry["answer"]
    if gold is None:  # tasks that only verify (e.g. rubiks_cube) have no reference answer
        pytest.skip(f"{task} has no reference answer to replay")
    _, reward, _, _, info = env.step(answer_tag(gold))
    assert (reward, info["correct"], info["score_error"]) == (1.0, True, None)


@settings(max_examples=25, deadline=None)
@given(
    st.text(max_size=60)
    | st.builds(answer_tag, st.text(max_size=30))
    | st.builds(lambda s: f"\\boxed{{{s}}}", st.text(max_size=30))
)
def test_any_text_is_a_valid_step(action):
    env = FUZZ_ENV
    env.reset(seed=1)
    _, reward, terminated, truncated, info = env.step(action)
    assert 0.0 <= reward <= 1.0
    assert (terminated, truncated) == (True, False)
    assert info["invalid_action"] is (extract_answer(action) is None)


FUZZ_ENV = ReasoningGymEnv("n_queens")


# ----------------------------------------------------------------------------- sandbox


def test_an_answer_evaluated_by_the_scorer_cannot_touch_the_host(tmp_path):
    """n_queens' scorer calls eval() on the answer: it runs, but inside the sandbox."""
    target = tmp_path / "pwned"
    env = ReasoningGymEnv("n_queens")
    env.reset(seed=0)
    _, reward, _, _, info = env.step(
        answer_tag(f"__import__('pathlib').Path({str(target)!r}).write_text('x')")
    )
    assert not target.exists()
    assert (reward, info["correct"]) == (0.0, False)


def test_a_scorer_that_never_returns_times_out():
    env = ReasoningGymEnv("n_queens", score_timeout_s=1.0)
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(answer_tag("9**9**9**9**9"))
    assert (reward, terminated, info["score_error"]) == (0.0, True, "timeout")
    assert "could not be scored (timeout)" in obs


def test_an_answer_cannot_print_its_own_score():
    env = ReasoningGymEnv("n_queens")
    env.reset(seed=0)
    forged = "__import__('os').write(1, b'\\n1.0\\n') and __import__('os')._exit(0)"
    _, reward, _, _, info = env.step(answer_tag(forged))
    assert (reward, info["score_error"]) == (0.0, "no_score")


# ----------------------------------------------------------------------------- seeding


def test_same_seed_same_question_and_seeds_vary(counting):
    first = counting.reset(seed=9)
    assert counting.reset(seed=9) == first
    assert len({counting.reset(seed=s)[1]["index"] for s in range(20)}) > 10


def test_two_instances_draw_the_same_questions_for_the_same_seed(counting):
    other = ReasoningGymEnv("letter_counting")
    assert other.reset(seed=21) == counting.reset(seed=21)
    assert other.entry == counting.entry


def test_dataset_seed_and_size_choose_the_questions():
    a = ReasoningGymEnv("basic_arithmetic", size=7, dataset_seed=1)
    b = ReasoningGymEnv("basic_arithmetic", size=7, dataset_seed=2)
    questions_a = {a.reset(options={"index": i})[0] for i in range(7)}
    questions_b = {b.reset(options={"index": i})[0] for i in range(7)}
    assert questions_a != questions_b
    assert {a.reset(seed=s)[0] for s in range(40)} <= questions_a


def test_state_round_trip_restores_the_question(counting):
    counting.reset(seed=13)
    state = pickle.loads(pickle.dumps(counting.get_state()))
    entry = counting.entry
    counting.reset(seed=14)
    counting.set_state(state)
    assert counting.entry == entry
    assert counting.step(answer_tag(entry["answer"]))[1] == 1.0


def test_task_config_reaches_the_dataset():
    env = ReasoningGymEnv("basic_arithmetic", config={"min_terms": 2, "max_terms": 2})
    assert env.dataset.config.max_terms == 2


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="unknown task 'leter_counting'; did you mean"):
        ReasoningGymEnv("leter_counting")
    with pytest.raises(ValueError, match="not in config"):
        ReasoningGymEnv("letter_counting", config={"seed": 1})
    with pytest.raises(ValueError, match="size must be a positive int"):
        ReasoningGymEnv("letter_counting", size=0)
    env = ReasoningGymEnv("letter_counting", size=5)
    with pytest.raises(ValueError, match=r"options\['index'\] must be an int in \[0, 5\)"):
        env.reset(options={"index": 5})


def test_listing_json_of_rg_ids_is_plain_data(capsys):
    assert cli(["list", "rg:letter_c", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [
        {
            "id": "rg:letter_counting-v0",
            "description": xpgym.spec("rg:letter_counting-v0").description,
            "entry_point": "xpgym.envs.reasoning_gym.env:ReasoningGymEnv",
            "kwargs": {"task": "letter_counting"},
            "requires_download": False,
        }
    ]
