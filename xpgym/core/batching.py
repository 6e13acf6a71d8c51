"""Deprecated: this module was dissolved; its names live in their homes.

* `xpgym.core.layouts`: `build_rows`, `Layout`, `LAYOUTS`, `UNGROUPED_PREFIX`,
  `on_last_policy_token`, `shift_to_predictions`, `zero_padded_positions`; a row's group id
  is now `RowInfo.group_id` of the rows themselves.
* `xpgym.core.advantages`: `row_returns`, `token_advantages`, `turn_index_from_mask`,
  `per_turn_sums`, `TokenEstimator`, `TOKEN_ESTIMATORS`.

Every name still imports from here, with a `DeprecationWarning` naming its new home.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from xpgym.core.deprecation import moved_names

_moved = moved_names(
    __name__,
    {
        **dict.fromkeys(
            (
                "LAYOUTS",
                "UNGROUPED_PREFIX",
                "Layout",
                "build_rows",
                "on_last_policy_token",
                "shift_to_predictions",
                "zero_padded_positions",
            ),
            "xpgym.core.layouts",
        ),
        **dict.fromkeys(
            (
                "TOKEN_ESTIMATORS",
                "TokenEstimator",
                "per_turn_sums",
                "row_returns",
                "token_advantages",
                "turn_index_from_mask",
            ),
            "xpgym.core.advantages",
        ),
    },
)


def _row_group_ids(episodes: Sequence[Any], rows: Any) -> Any:
    """The old ``row_group_ids(episodes, rows)``: the rows' own `RowInfo.group_id`."""
    return rows.group_id.copy()


def __getattr__(name: str) -> Any:
    if name == "row_group_ids":
        warnings.warn(
            f"{__name__}.row_group_ids is gone: rows carry their group ids, read "
            f"rows.group_id (xpgym.core.layouts.RowInfo)",
            DeprecationWarning,
            stacklevel=2,
        )
        return _row_group_ids
    return _moved(name)
