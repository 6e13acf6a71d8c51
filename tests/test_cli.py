"""`python -m xpgym list`: the table, pattern filtering and JSON output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import xpgym
from xpgym.__main__ import main

GUESS_IDS = [
    "game:GuessTheNumber-v0",
    "game:GuessTheNumber-v0-easy",
    "game:GuessTheNumber-v0-hard",
    "game:GuessTheNumber-v0-python",
    "game:GuessTheNumber-v0-random",
]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "xpgym", *args], capture_output=True, text=True, check=False
    )


def test_list_prints_every_guess_the_number_id_in_a_subprocess():
    done = run_cli("list")
    assert done.returncode == 0
    listed = [line.split()[0] for line in done.stdout.splitlines()[1:]]
    assert set(GUESS_IDS) <= set(listed)


def test_list_prints_a_header_and_one_row_per_id(capsys):
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ID", "DESCRIPTION", "ENTRY", "POINT"]
    assert len(lines) == 1 + len(xpgym.list_envs(include_families=True))  # rg: ids too


def test_list_rows_show_description_and_entry_point(capsys):
    main(["list", "game:GuessTheNumber-v0-easy"])
    row = capsys.readouterr().out.splitlines()[1]
    assert xpgym.spec("game:GuessTheNumber-v0-easy").description in row
    assert row.endswith("xpgym.envs.games.guess_the_number:GuessTheNumberEnv")


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("game:GuessTheNumber-v0-*", GUESS_IDS[1:]),
        ("*Guess*-hard", ["game:GuessTheNumber-v0-hard"]),
        ("GuessTheNumber-v0-easy", ["game:GuessTheNumber-v0-easy"]),  # no wildcard: substring
        ("GuessTheNumber-v0-r", ["game:GuessTheNumber-v0-random"]),
    ],
)
def test_list_filters_by_pattern(capsys, pattern, expected):
    assert main(["list", pattern]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert listed == expected


def test_list_with_no_match_exits_1_with_a_message(capsys):
    assert main(["list", "no-such-env"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no env ids match 'no-such-env'" in captured.err


def test_list_json_parses_to_id_description_entry_point_and_kwargs():
    done = run_cli("list", "--json", "game:GuessTheNumber-*")
    assert done.returncode == 0
    rows = json.loads(done.stdout)
    assert [row["id"] for row in rows] == GUESS_IDS
    assert rows[1] == {
        "id": "game:GuessTheNumber-v0-easy",
        "description": xpgym.spec("game:GuessTheNumber-v0-easy").description,
        "entry_point": "xpgym.envs.games.guess_the_number:GuessTheNumberEnv",
        "kwargs": {"difficulty": "easy"},
        "requires_download": False,
    }


def test_list_json_with_no_match_is_an_empty_list(capsys):
    assert main(["list", "--json", "no-such-env"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_missing_command_is_a_usage_error():
    done = run_cli()
    assert done.returncode == 2
    assert "usage: xpgym" in done.stderr
