"""QA envs: SQuAD grading, answer extraction, the dataset loader, the shipped sample and
its search variant, registered hub ids (on local files), seeding and snapshots."""

from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("datasets", reason="the QA envs load data with Hugging Face datasets")

import xpgym
from xpgym.core.checks import check_env
from xpgym.core.tools.search.corpus import default_corpus_path, load_corpus
from xpgym.envs.common.answers import last_tagged
from xpgym.envs.common.datasets import load_records
from xpgym.envs.qa import MAX_SEARCH_CALLS
from xpgym.envs.qa.env import FORMAT_ERROR_REWARD, QAEnv, sample_path
from xpgym.envs.qa.grading import (
    exact_match,
    gold_answers,
    normalize_answer,
    token_f1,
)
from xpgym.envs.qa.rewards import make_f1_env

SAMPLE = [json.loads(line) for line in sample_path().read_text("utf-8").splitlines()]
CORPUS = {doc["id"]: doc for doc in load_corpus(default_corpus_path())}
HUB_IDS = [i for i in xpgym.list_envs("qa:*") if xpgym.spec(i).requires_download]


@pytest.fixture(scope="module")
def sample_env() -> QAEnv:
    return QAEnv()


def started(env: QAEnv, index: int) -> QAEnv:
    env.reset(options={"index": index})
    return env


def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


# ----------------------------------------------------------------------------- grading


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Black Sea", "black sea"),
        ("  the  Eiffel-Tower! ", "eiffeltower"),
        ("An apple a day", "apple day"),
        ("Theatre", "theatre"),  # "the" only as a whole word
        ("U.S.A.", "usa"),
        ("Río de la Plata", "río de la plata"),
        ("", ""),
    ],
)
def test_normalize_answer_hand_checked(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_takes_any_gold_after_normalisation():
    assert exact_match("the severn.", ["River Severn", "Severn"]) == 1.0
    assert exact_match("Severn river", ["River Severn", "Severn"]) == 0.0
    assert exact_match("anything", []) == 0.0


@pytest.mark.parametrize(
    ("prediction", "golds", "expected"),
    [
        ("Danube", ["Danube"], 1.0),
        ("the river Danube", ["Danube"], 2 / 3),  # P = 1/2, R = 1
        ("Black Sea coast", ["the Black Sea"], 0.8),  # P = 2/3, R = 1
        ("Vienna", ["Danube", "Vienna Austria"], 2 / 3),  # best gold: P = 1, R = 1/2
        ("Nile", ["Danube"], 0.0),
        ("the", ["a"], 0.0),  # both normalise to nothing
    ],
)
def test_token_f1_hand_checked(prediction, golds, expected):
    assert token_f1(prediction, golds) == pytest.approx(expected)


def test_gold_answers_accepts_strings_numbers_and_lists():
    assert gold_answers("Paris") == ["Paris"]
    assert gold_answers(84) == ["84"]
    assert gold_answers(["a", " ", 2.5]) == ["a", "2.5"]
    with pytest.raises(TypeError, match="a string, a number or a list"):
        gold_answers({"aliases": ["x"]})


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("<answer> Paris </answer>", "Paris"),
        ("<think>x</think><answer>a</answer> then <answer>b</answer>", "b"),
        ("<answer>a</answer> <answer>unclosed", "a"),
        ("<answer>outer <answer>inner</answer>", "inner"),
        ("no tags", None),
        ("</answer><answer>", None),
        ("<ANSWER>x</ANSWER>", None),
    ],
)
def test_last_tagged_takes_the_last_complete_block(action, expected):
    assert last_tagged(action, "answer") == expected


# ------------------------------------------------------------------------------ loader


def test_load_records_reads_a_jsonl_file_with_chosen_keys(tmp_path):
    path = write_jsonl(
        tmp_path / "qa.jsonl",
        [{"problem": "q1", "answer": ["a", "b"]}, {"problem": "q2", "answer": ["c"]}],
    )
    records = load_records(path, question_key="problem")
    assert records == [
        {"question": "q1", "answer": ["a", "b"]},
        {"question": "q2", "answer": ["c"]},
    ]


def test_load_records_reads_csv_and_parquet(tmp_path):
    datasets = pytest.importorskip("datasets")
    table = datasets.Dataset.from_dict({"q": ["x?", "y?"], "a": ["u", "v"], "other": [0, 1]})
    table.to_csv(str(tmp_path / "t.csv"), index=False)
    table.to_parquet(str(tmp_path / "t.parquet"))
    expected = [{"question": "x?", "answer": "u"}, {"question": "y?", "answer": "v"}]
    for name in ("t.csv", "t.parquet"):
        assert load_records(tmp_path / name, question_key="q", answer_key="a") == expected


def test_load_records_names_the_available_columns(tmp_path):
    path = write_jsonl(tmp_path / "qa.jsonl", [{"question": "q", "solution": "s"}])
    with pytest.raises(ValueError, match=r"no column 'answer'.*'question', 'solution'"):
        load_records(path)


def test_load_records_splits_of_a_directory(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [{"question": "tq", "answer": "ta"}])
    write_jsonl(tmp_path / "test.jsonl", [{"question": "eq", "answer": "ea"}])
    files = {"train": "train.jsonl", "test": "test.jsonl"}
    assert load_records(tmp_path, data_files=files, split="test") == [
        {"question": "eq", "answer": "ea"}
    ]
    with pytest.raises(ValueError, match=r"has splits \['train', 'test'\]; pass split= to choose"):
        load_records(tmp_path, data_files=files)
    with pytest.raises(ValueError, match=r"no split 'dev'; its splits are \['train', 'test'\]"):
        load_records(tmp_path, data_files=files, split="dev")


def test_load_records_never_sends_a_missing_file_to_the_hub(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_records(tmp_path / "nope.jsonl")


# ------------------------------------------------------------------------------ sample


def test_sample_has_at_least_twenty_questions_with_answers_in_the_corpus():
    assert len(SAMPLE) >= 20
    for row in SAMPLE:
        texts = [normalize_answer(f"{CORPUS[d]['title']} {CORPUS[d]['text']}") for d in row["docs"]]
        for answer in row["answer"]:
            assert any(normalize_answer(answer) in text for text in texts), (row, answer)


def test_sample_env_serves_every_sample_question(sample_env):
    assert [r["question"] for r in sample_env.records] == [r["question"] for r in SAMPLE]
    assert [r["answers"] for r in sample_env.records] == [r["answer"] for r in SAMPLE]


def test_correct_answer_terminates_with_reward_one(sample_env):
    env = started(sample_env, 1)  # the sea the river through Vienna empties into
    obs, reward, terminated, truncated, info = env.step(
        "<think>Vienna lies on the Danube.</think> <answer>the Black Sea.</answer>"
    )
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["correct"] is True
    assert info["invalid_action"] is False
    assert (info["em"], info["f1"]) == (1.0, 1.0)
    assert info["parsed_action"] == "the Black Sea."
    assert info["metrics"] == {"em": 1.0, "f1": 1.0}
    assert obs.startswith("Correct.")


def test_wrong_answer_scores_zero_and_reports_f1(sample_env):
    env = started(sample_env, 1)
    _, reward, terminated, _, info = env.step("<answer>the Caspian Sea</answer>")
    assert (reward, terminated) == (0.0, True)
    assert info["correct"] is False
    assert info["invalid_action"] is False
    assert info["f1"] == pytest.approx(0.5)  # "caspian sea" vs "black sea"


def test_f1_reward_gives_partial_credit():
    env = started(QAEnv(reward="f1"), 1)
    _, reward, _, _, info = env.step("<answer>the Caspian Sea</answer>")
    assert reward == info["f1"] == pytest.approx(0.5)
    assert info["correct"] is False


@pytest.mark.parametrize("action", ["Black Sea", "<answer>Black Sea", "<answer>  </answer>"])
def test_missing_or_blank_answer_is_invalid_and_scores_zero(sample_env, action):
    env = started(sample_env, 1)
    obs, reward, terminated, truncated, info = env.step(action)
    assert reward == FORMAT_ERROR_REWARD == 0.0
    assert (terminated, truncated) == (True, False)
    assert info["invalid_action"] is True
    assert info["correct"] is False
    assert "<answer>" in obs


@settings(max_examples=200, deadline=None)
@given(st.text() | st.builds(lambda s: f"<answer>{s}</answer>", st.text()))
def test_any_text_is_a_valid_step(action):
    env = FUZZ_ENV
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step(action)
    assert 0.0 <= reward <= 1.0
    assert (terminated, truncated) == (True, False)
    assert isinstance(info["correct"], bool)
    assert info["invalid_action"] is (not last_tagged(action, "answer"))


FUZZ_ENV = QAEnv()


def test_same_seed_same_question_and_seeds_vary(sample_env):
    first = sample_env.reset(seed=7)
    assert sample_env.reset(seed=7) == first
    assert len({sample_env.reset(seed=s)[1]["index"] for s in range(30)}) > 10


def test_reset_index_option_and_its_bounds(sample_env):
    _, info = sample_env.reset(options={"index": 3})
    assert info == {"index": 3, "num_questions": len(SAMPLE)}
    assert sample_env.question == SAMPLE[3]["question"]
    for bad in (-1, len(SAMPLE), "1", True):
        with pytest.raises(ValueError, match=r"options\['index'\]"):
            sample_env.reset(options={"index": bad})


def test_state_round_trip_replays_the_question(sample_env):
    sample_env.reset(seed=11)
    state = pickle.loads(pickle.dumps(sample_env.get_state()))
    question = sample_env.question
    sample_env.reset(seed=12)
    sample_env.set_state(state)
    assert sample_env.question == question
    _, reward, *_ = sample_env.step(f"<answer>{sample_env.answers[0]}</answer>")
    assert reward == 1.0


def test_sample_env_passes_check_env():
    check_env(xpgym.make("qa:Sample-v0"))


def test_bad_arguments_and_bad_data_raise(tmp_path):
    with pytest.raises(ValueError, match="reward must be one of"):
        QAEnv(reward="bleu")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="is empty"):
        QAEnv(tmp_path / "empty.jsonl")
    blank = write_jsonl(tmp_path / "blank.jsonl", [{"question": " ", "answer": "a"}])
    with pytest.raises(ValueError, match=r"row 0 .* has no question"):
        QAEnv(blank)
    no_gold = write_jsonl(tmp_path / "nogold.jsonl", [{"question": "q", "answer": [""]}])
    with pytest.raises(ValueError, match=r"row 0 .* has no gold answer"):
        QAEnv(no_gold)
    nested = write_jsonl(tmp_path / "dict.jsonl", [{"question": "q", "answer": {"a": 1}}])
    with pytest.raises(TypeError, match=r"row 0 .* a string, a number or a list"):
        QAEnv(nested)


# ----------------------------------------------------------------------- search variant


def search_then_answer(env, index: int) -> tuple[float, list[str]]:
    """A scripted agent: search the title of each supporting document, check that the
    results hold the answer, then answer it."""
    row = SAMPLE[index]
    env.reset(options={"index": index})
    seen = []
    for doc in row["docs"]:
        obs, reward, terminated, truncated, info = env.step(
            f"<search>{CORPUS[doc]['title']}</search>"
        )
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert info["tool_calls"][0]["ok"] is True
        seen.append(obs)
    assert normalize_answer(row["answer"][0]) in normalize_answer(seen[-1])
    _, reward, terminated, truncated, info = env.step(f"<answer>{row['answer'][0]}</answer>")
    assert (terminated, truncated) == (True, False)
    assert info["tool_calls_total"] == len(row["docs"])
    return reward, seen


def test_scripted_agent_searches_then_answers_every_sample_question():
    pytest.importorskip("tantivy", reason="the search tool indexes with tantivy")
    env = xpgym.make("qa:Sample-v0-search")
    obs, info = env.reset(seed=0)
    assert "<search>" in obs
    assert info["tools"][0]["function"]["name"] == "search"
    for index in range(len(SAMPLE)):
        reward, _ = search_then_answer(env, index)
        assert reward == 1.0, SAMPLE[index]["question"]
    env.close()


def test_search_budget_ends_the_episode():
    pytest.importorskip("tantivy", reason="the search tool indexes with tantivy")
    env = xpgym.make("qa:Sample-v0-search")
    env.reset(seed=0)
    for _ in range(MAX_SEARCH_CALLS):
        assert env.step("<search>Danube</search>")[2:4] == (False, False)
    _, reward, terminated, truncated, info = env.step("<search>Danube</search>")
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert info["truncated_reason"] == "max_tool_calls"
    env.close()


# check_env deep-copies a wrapped env for its second instance; the search index does not copy
@pytest.mark.filterwarnings("ignore:.*cannot build a second instance")
def test_search_variant_passes_check_env():
    pytest.importorskip("tantivy", reason="the search tool indexes with tantivy")
    env = xpgym.make("qa:Sample-v0-search")
    check_env(env)
    env.close()


def test_f1_env_of_a_multi_agent_id_raises_naming_the_id():
    with pytest.raises(TypeError, match="'multiagent:RockPaperScissors-v0' is not a single"):
        make_f1_env(base_id="multiagent:RockPaperScissors-v0")


def test_f1_variant_pays_the_answers_f1_and_once_for_a_well_formed_search():
    pytest.importorskip("tantivy", reason="the search tool indexes with tantivy")
    env = xpgym.make("qa:Sample-v0-search-f1")
    for index in range(len(SAMPLE)):
        row = SAMPLE[index]
        env.reset(options={"index": index})
        rewards = [env.step("<search></search>")[1]]  # malformed: no format reward
        for doc in row["docs"]:
            rewards.append(env.step(f"<search>{CORPUS[doc]['title']}</search>")[1])
        _, reward, terminated, _, info = env.step(f"<answer>{row['answer'][0]}</answer>")
        assert terminated
        assert rewards == [0.0, 0.1] + [0.0] * (len(row["docs"]) - 1)
        assert reward == 1.0  # the gold answer's F1
        assert info["metrics"]["answer_f1"] == 1.0
        assert info["metrics"]["format_reward"] == 1.0
        words = len(normalize_answer(row["answer"][0]).split())
        assert info["metrics"]["answer_f1/answer_words"] == words
    env.reset(options={"index": 0})
    _, reward, *_ = env.step("<answer>no idea</answer>")  # no search: F1 alone
    assert reward == token_f1("no idea", SAMPLE[0]["answer"])
    env.close()


# --------------------------------------------------------------------- registered hub ids


QA_ENTRY_POINT = "xpgym.envs.qa.env:QAEnv"  # the ids that are a QAEnv (not a variant of one)


def test_hub_ids_are_marked_and_each_has_a_search_variant():
    assert {"qa:HotpotQA-v0", "qa:NaturalQuestions-v0", "qa:TriviaQA-v0"} <= set(HUB_IDS)
    assert not xpgym.spec("qa:Sample-v0").requires_download
    assert not xpgym.spec("qa:Sample-v0-search").requires_download
    bases = [i for i in xpgym.list_envs("qa:*") if xpgym.spec(i).entry_point == QA_ENTRY_POINT]
    assert "qa:Sample-v0" in bases
    for env_id in bases:
        assert xpgym.spec(f"{env_id}-search").requires_download == (env_id in HUB_IDS)
    assert xpgym.spec("qa:HotpotQA-v0").kwargs == {
        "dataset": "axon-rl/HotpotQA",
        "split": "train",
        "question_key": "problem",
    }


@pytest.mark.parametrize("env_id", [i for i in HUB_IDS if not i.endswith("-search")])
def test_hub_id_loads_its_split_and_columns_from_a_local_copy(env_id, tmp_path):
    """Each registered hub id, pointed at a local directory laid out like its hub dataset
    (its split and its question/answer columns), loads and grades through the loader."""
    kwargs = xpgym.spec(env_id).kwargs
    question_key = kwargs.get("question_key", "question")
    rows = [{question_key: "Which river flows through Vienna?", "answer": ["Danube"]}]
    write_jsonl(tmp_path / "part.jsonl", rows)
    env = xpgym.make(env_id, dataset=str(tmp_path), data_files={kwargs["split"]: "part.jsonl"})
    obs, _ = env.reset(seed=0)
    assert obs.endswith("Question: Which river flows through Vienna?")
    assert env.step("<answer>The Danube</answer>")[1] == 1.0
