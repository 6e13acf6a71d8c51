"""`parse_dataclass_args`: recipe flags from a dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from xpgym.recipe_args import parse_dataclass_args


@dataclass
class Args:
    env_id: str = "game:GuessTheNumber-v0-easy"
    num_envs: int = 8
    lr: float = 3e-4
    dry_run: bool = False


def test_defaults_and_flags_with_dashes():
    assert parse_dataclass_args(Args, "d", []) == Args()
    args = parse_dataclass_args(
        Args, "d", ["--env-id", "game:Wordle-v0", "--num-envs", "2", "--lr", "1e-3", "--dry-run"]
    )
    assert args == Args("game:Wordle-v0", 2, 1e-3, True)
    assert isinstance(args.num_envs, int)


def test_bad_values_are_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_dataclass_args(Args, "d", ["--num-envs", "two"])
    assert exit_info.value.code == 2
    assert "--num-envs" in capsys.readouterr().err


def test_only_dataclasses_with_plain_defaults():
    with pytest.raises(TypeError, match="not a dataclass"):
        parse_dataclass_args(dict, "d", [])

    @dataclass
    class Listy:
        items: list = field(default_factory=list)

    with pytest.raises(TypeError, match="plain default"):
        parse_dataclass_args(Listy, "d", [])
