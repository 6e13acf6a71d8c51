"""Pieces brief G's toolgym envs share, on top of the helpers in `xpgym.envs.toolgym.base`.

`check_int_pairs` checks a config list of ``[a, b]`` pairs (edges, intervals,
ranges), and `HiddenListEnv` is a `ToolGymEnv` whose config holds ``"numbers"``:
``Observe`` shows its length and ``GetNumber(index)`` reads one element. A subclass adds its
own tools and the rest of the template.
"""

from __future__ import annotations

from typing import Any

from xpgym.core.tools.decorator import tool
from xpgym.envs.toolgym.base import ToolGymEnv, item_at

__all__ = ["HiddenListEnv", "check_int_pairs"]


def check_int_pairs(
    value: Any,
    name: str,
    *,
    min_length: int = 1,
    max_length: int,
    low: int | None = None,
    high: int | None = None,
    ordered: bool = False,
) -> None:
    """For `initial_state`: check that config entry `name` is a list of ``min_length..
    max_length`` pairs ``[a, b]`` of ints (bools refused), each in ``low..high`` when given,
    with ``a <= b`` when `ordered`.

    Raises:
        ValueError: naming the entry, the pair and the rule it breaks.
    """
    if not isinstance(value, list) or not min_length <= len(value) <= max_length:
        raise ValueError(f"{name!r} must be a list of {min_length}..{max_length} [a, b] pairs")
    for pair in value:
        if not (isinstance(pair, list) and len(pair) == 2 and all(type(x) is int for x in pair)):
            raise ValueError(f"{name!r}: {pair!r} is not a pair [a, b] of ints")
        if (low is not None and min(pair) < low) or (high is not None and max(pair) > high):
            raise ValueError(f"{name!r}: {pair!r} holds a value outside {low}..{high}")
        if ordered and pair[0] > pair[1]:
            raise ValueError(f"{name!r}: {pair!r} must have a <= b")


class HiddenListEnv(ToolGymEnv):
    """A toolgym env over a hidden list ``config["numbers"]`` (not registered itself).

    ``Observe`` shows ``{"length": n}`` plus `extra_visible`; ``GetNumber(index)`` reads one
    element. Subclasses check the list in `initial_state` with `check_int_list`.
    """

    def extra_visible(self) -> dict[str, Any]:
        """More visible fields besides the length (none by default)."""
        return {}

    def visible(self) -> dict[str, Any]:
        """The list's length and `extra_visible`."""
        return {"length": len(self.config["numbers"]), **self.extra_visible()}

    @tool
    def get_number(self, index: int) -> str:
        """Read the number at a position of the hidden list.

        Args:
            index: The position, 0-based (0 <= index < length).
        """
        return item_at(self.config["numbers"], index)
