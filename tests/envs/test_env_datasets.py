"""xpgym.envs.common.datasets: the one loader of the dataset-backed envs (local files by suffix, hub
ids without a network, splits, columns, errors) and `pick_index`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from xpgym.envs.common.datasets import (
    DatasetLoadError,
    DatasetSchemaError,
    check_table,
    describe_source,
    load_records,
    load_split,
    pick_index,
)

datasets = pytest.importorskip("datasets", reason="the loader reads data with `datasets`")

ROWS = {"q": ["What is 1 + 1?", "Capital of France?"], "a": ["2", "Paris"], "n": [1, 2]}


def write(tmp_path, name: str, rows: dict[str, list] = ROWS) -> str:
    """`rows` (column -> values) as a data file in the format of `name`'s suffix."""
    path = tmp_path / name
    table = datasets.Dataset.from_dict(rows)
    suffix = name.rsplit(".", 1)[1]
    if suffix == "jsonl":
        records = table.to_list()
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    elif suffix == "csv":
        table.to_csv(str(path), index=False)
    elif suffix == "parquet":
        table.to_parquet(str(path))
    else:  # arrow: the file `save_to_disk` writes is an Arrow stream
        table.save_to_disk(str(tmp_path / "saved"))
        (arrow,) = (tmp_path / "saved").glob("*.arrow")
        arrow.rename(path)
    return str(path)


@pytest.fixture
def hub(monkeypatch):
    """A fake ``datasets.load_dataset``: records its calls, answers with ``hub.answer``."""

    class Hub:
        def __init__(self) -> None:
            self.calls: list = []
            self.answer = datasets.DatasetDict({"train": datasets.Dataset.from_dict(ROWS)})

        def __call__(self, *args, **kwargs):
            self.calls.append((args, kwargs))
            return self.answer

    fake = Hub()
    monkeypatch.setattr(datasets, "load_dataset", fake)
    return fake


# ------------------------------------------------------------------------ local files


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.csv", "rows.parquet", "rows.arrow"])
def test_local_files_load_by_suffix(tmp_path, name):
    table = load_split(write(tmp_path, name))
    assert table.to_dict() == ROWS


def test_missing_local_file_is_never_sent_to_the_hub(tmp_path, hub):
    with pytest.raises(FileNotFoundError, match=r"CodeEnv: dataset file '.*nope\.parquet'"):
        load_split(tmp_path / "nope.parquet", owner="CodeEnv")
    assert hub.calls == []


def test_empty_local_file_is_named(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match=r"'.*empty\.jsonl' is empty"):
        load_split(tmp_path / "empty.jsonl")


def test_data_files_with_a_data_file_is_refused(tmp_path, hub):
    with pytest.raises(ValueError, match="data_files is for a hub id"):
        load_split(write(tmp_path, "rows.jsonl"), data_files=["other.jsonl"])
    assert hub.calls == []


# ------------------------------------------------------------------ hub ids and splits


def test_hub_id_goes_to_load_dataset_with_its_name_and_data_files(hub):
    table = load_split("owner/set", name="main", data_files={"train": "t.jsonl"})
    assert hub.calls == [(("owner/set", "main"), {"data_files": {"train": "t.jsonl"}})]
    assert table["a"] == ROWS["a"]


def test_split_choice_and_errors_list_the_splits(tmp_path):
    train = write(tmp_path, "train.jsonl", {"q": ["t"], "a": ["1"]})
    test = write(tmp_path, "test.jsonl", {"q": ["e"], "a": ["2"]})
    files = {"train": train, "test": test}
    assert load_split("json", data_files=files, split="test")["q"] == ["e"]
    with pytest.raises(DatasetSchemaError, match=r"has splits \['train', 'test'\]; pass split="):
        load_split("json", data_files=files)
    with pytest.raises(DatasetSchemaError, match=r"no split 'dev'; its splits are \['train',"):
        load_split("json", data_files=files, split="dev")


def test_the_only_split_is_taken_when_none_is_named(hub):
    hub.answer = datasets.DatasetDict({"validation": datasets.Dataset.from_dict(ROWS)})
    assert load_split("owner/set").num_rows == 2


def test_a_failing_load_dataset_is_a_load_error_naming_owner_and_source(monkeypatch):
    offline = ConnectionError("cannot reach the Hub")

    def fail(*args, **kwargs):
        raise offline

    monkeypatch.setattr(datasets, "load_dataset", fail)
    with pytest.raises(DatasetLoadError) as caught:
        load_split("owner/set", name="cfg", owner="'qa:X-v0'")
    assert str(caught.value) == (
        "'qa:X-v0': datasets.load_dataset failed for dataset 'owner/set' (name='cfg'): "
        "ConnectionError: cannot reach the Hub"
    )
    assert caught.value.__cause__ is offline


# -------------------------------------------------------------------------- columns


def test_missing_column_names_the_argument_and_the_columns(tmp_path):
    path = write(tmp_path, "rows.csv")
    with pytest.raises(DatasetSchemaError) as caught:
        load_split(path, columns={"question_key": "q", "answer_key": "answer"}, owner="QAEnv")
    message = str(caught.value)
    assert message.startswith(f"QAEnv: dataset {path!r} has no column 'answer' (answer_key)")
    assert message.endswith("it has columns ['q', 'a', 'n']: pass answer_key= with one of them")


def test_schema_errors_are_value_and_key_errors_with_a_plain_message():
    error = DatasetSchemaError("no column 'x'")
    assert isinstance(error, ValueError)
    assert isinstance(error, KeyError)
    assert str(error) == "no column 'x'"  # not KeyError's quoted repr


def test_a_split_without_rows_is_refused(hub):
    hub.answer = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"q": [], "a": []})})
    with pytest.raises(ValueError, match=r"^X: dataset 'owner/set' has no rows$"):
        load_split("owner/set", owner="X")


def test_check_table_on_a_given_dataset():
    table = datasets.Dataset.from_dict(ROWS)
    check_table(table, {"statement_key": "q"}, source="the dataset")  # no error
    with pytest.raises(KeyError, match=r"^the dataset has no column 'tests' \(tests_key\)"):
        check_table(table, {"tests_key": "tests"}, source="the dataset")


def test_describe_source_names_only_what_was_given():
    assert describe_source("a/b") == "dataset 'a/b'"
    assert describe_source("json", data_files=["x.jsonl"], split="test") == (
        "dataset 'json' (data_files=['x.jsonl'], split='test')"
    )


def test_load_records_renames_the_chosen_columns(tmp_path):
    records = load_records(write(tmp_path, "rows.parquet"), question_key="q", answer_key="n")
    assert records == [
        {"question": "What is 1 + 1?", "answer": 1},
        {"question": "Capital of France?", "answer": 2},
    ]


# -------------------------------------------------------------------- progress bars


def test_progress_bars_are_off_during_a_load_and_restored_after(monkeypatch):
    seen = []

    def load(*args, **kwargs):
        seen.append(datasets.are_progress_bars_disabled())
        if len(seen) == 2:
            raise OSError("broken")
        return datasets.DatasetDict({"train": datasets.Dataset.from_dict(ROWS)})

    monkeypatch.setattr(datasets, "load_dataset", load)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_DISABLE_PROGRESS_BARS", None)
    datasets.enable_progress_bars()
    load_split("owner/set")
    assert datasets.is_progress_bar_enabled()
    with pytest.raises(DatasetLoadError):
        load_split("owner/set")  # restored after a failure too
    assert datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        load_split("owner/set")
        assert datasets.are_progress_bars_disabled()  # left off, as it was
    finally:
        datasets.enable_progress_bars()
    assert seen == [True, True, True]


# ----------------------------------------------------------------------- pick_index


def test_pick_index_takes_the_option():
    rng = np.random.default_rng(0)
    assert pick_index({"index": 3}, 5, rng, "Env") == 3
    assert pick_index({"index": np.int64(4)}, 5, rng, "Env") == 4
    assert rng.bit_generator.state == np.random.default_rng(0).bit_generator.state  # no draw


@pytest.mark.parametrize("options", [None, {}, {"index": None}, {"other": 1}])
def test_pick_index_draws_once_from_the_generator_without_an_index(options):
    expected = int(np.random.default_rng(7).integers(5))
    assert pick_index(options, 5, np.random.default_rng(7), "Env") == expected


@pytest.mark.parametrize("bad", [5, -1, True, "1", 1.0])
def test_pick_index_refuses_a_bad_index(bad):
    with pytest.raises(ValueError, match=r"^Env: options\['index'\] must be an int in \[0, 5\)"):
        pick_index({"index": bad}, 5, np.random.default_rng(0), "Env")
