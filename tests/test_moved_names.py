"""Names that moved keep importing from their old paths, with a `DeprecationWarning`."""

from __future__ import annotations

import importlib

import pytest
from adapter_cases import GROUPS, episodes

from xpgym.core.layouts import episode_rows

MOVED = [
    ("xpgym.core.trajectory", "ChatPromptBuilder", "xpgym.core.chat"),
    ("xpgym.core.trajectory", "PromptTokenizer", "xpgym.core.chat"),
    ("xpgym.core.trajectory", "PackedRows", "xpgym.core.layouts"),
    ("xpgym.core.trajectory", "PaddedRows", "xpgym.core.layouts"),
    ("xpgym.core.trajectory", "SplitRows", "xpgym.core.layouts"),
    ("xpgym.core.trajectory", "RowInfo", "xpgym.core.layouts"),
    ("xpgym.core.trajectory", "PrefixMismatchError", "xpgym.core.layouts"),
    ("xpgym.core.trajectory", "episode_rows", "xpgym.core.layouts"),
    ("xpgym.core.trajectory", "turn_rows", "xpgym.core.layouts"),
    ("xpgym.core.rollout", "observation_messages", "xpgym.core.chat"),
    ("xpgym.core.policies", "Message", "xpgym.core.chat"),
    ("xpgym.core.policies", "Prompt", "xpgym.core.chat"),
    ("xpgym.core.policies", "encode_prompt", "xpgym.core.chat"),
    ("xpgym.core.wrappers", "Message", "xpgym.core.chat"),
    ("xpgym.core.wrappers", "ChatTokenizer", "xpgym.core.chat"),
    ("xpgym.core.wrappers.observation", "Message", "xpgym.core.chat"),
    ("xpgym.core.wrappers.observation", "ChatTokenizer", "xpgym.core.chat"),
    *(
        ("xpgym.core.batching", name, "xpgym.core.layouts")
        for name in (
            "LAYOUTS",
            "UNGROUPED_PREFIX",
            "Layout",
            "build_rows",
            "on_last_policy_token",
            "shift_to_predictions",
            "zero_padded_positions",
        )
    ),
    *(
        ("xpgym.core.batching", name, "xpgym.core.advantages")
        for name in (
            "TOKEN_ESTIMATORS",
            "TokenEstimator",
            "per_turn_sums",
            "row_returns",
            "token_advantages",
            "turn_index_from_mask",
        )
    ),
]


@pytest.mark.parametrize(("old", "name", "new"), MOVED)
def test_a_moved_name_imports_from_its_old_path_with_a_warning(
    old: str, name: str, new: str
) -> None:
    with pytest.warns(
        DeprecationWarning, match=rf"{old}\.{name} moved to {new}\.{name}; import it from {new}"
    ):
        value = getattr(importlib.import_module(old), name)
    assert value is getattr(importlib.import_module(new), name)


def test_the_old_row_group_ids_reads_the_rows_group_ids() -> None:
    eps = episodes()
    with pytest.warns(DeprecationWarning, match="rows.group_id"):
        from xpgym.core.batching import row_group_ids
    assert row_group_ids(eps, episode_rows(eps)).tolist() == GROUPS


def test_an_unknown_name_of_an_old_path_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        importlib.import_module("xpgym.core.batching").nothing  # noqa: B018
