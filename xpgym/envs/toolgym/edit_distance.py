"""EditDistance: the Levenshtein distance of two hidden strings, by filling a DP table.

Config: ``{"source": str, "target": str}`` (lengths 0..30). ``Observe`` shows both lengths;
``CompareCharacters(i, j)`` says whether ``source[i] == target[j]``; ``SetDPTableCell(i, j,
value)`` and ``GetDPTableCell(i, j)`` write and read the ``(len(source) + 1) x (len(target) +
1)`` table the tools keep (cells start empty). The answer is the edit distance (insertions,
deletions and substitutions, each costing 1).

The oracle fills the table row by row (the border cells directly, every inner cell after one
comparison) and reads the last cell: ``2 * m * n + m + n + 4`` calls for lengths m, n.

Sizes: easy lengths 2..3, medium 4..6, hard 7..9; letters from a 4-letter alphabet.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from xpgym.core.tools.decorator import ToolError, tool
from xpgym.envs.toolgym.base import ToolGymEnv, draw_length

__all__ = ["ALPHABET", "SIZES", "EditDistanceEnv", "edit_distance"]

SIZES: dict[str, tuple[int, int]] = {"easy": (2, 3), "medium": (4, 6), "hard": (7, 9)}
"""Inclusive bounds of each string's length per difficulty."""
ALPHABET = "abcd"
_MAX_LENGTH = 30


def edit_distance(source: str, target: str) -> int:
    """Levenshtein distance by the classic two-row dynamic programme."""
    previous = list(range(len(target) + 1))
    for i, a in enumerate(source, 1):
        current = [i]
        for j, b in enumerate(target, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b)))
        previous = current
    return previous[-1]


class EditDistanceEnv(ToolGymEnv):
    """Find the edit distance of two hidden strings with a DP table kept by the tools."""

    name: ClassVar[str] = "EditDistance"
    answer_type: ClassVar[Any] = int
    answer_doc: ClassVar[str] = "The edit distance between the source and the target."

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """Two strings of SIZES[difficulty] letters from ALPHABET."""
        source, target = (
            "".join(rng.choice(list(ALPHABET), size=draw_length(rng, SIZES[difficulty])))
            for _ in range(2)
        )
        return {"source": source, "target": target}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check the config; the state is the empty table: ``{"table": [[None, ...], ...]}``."""
        source, target = config["source"], config["target"]
        if not isinstance(source, str) or not isinstance(target, str):
            raise ValueError("'source' and 'target' must be strings")
        if max(len(source), len(target)) > _MAX_LENGTH:
            raise ValueError(f"strings longer than {_MAX_LENGTH} characters")
        return {"table": [[None] * (len(target) + 1) for _ in range(len(source) + 1)]}

    def visible(self) -> dict[str, Any]:
        """Both lengths."""
        return {
            "source_length": len(self.config["source"]),
            "target_length": len(self.config["target"]),
        }

    def statement(self) -> str:
        """The task in two sentences."""
        return (
            "Two hidden strings are given, a source and a target. Find the edit distance: the "
            "fewest single-character insertions, deletions and substitutions that turn the "
            "source into the target. Submit it with Done."
        )

    def reference_answer(self) -> int:
        """`edit_distance` of the two strings."""
        return edit_distance(self.config["source"], self.config["target"])

    def _cell(self, i: int, j: int) -> None:
        rows, columns = len(self.state["table"]), len(self.state["table"][0])
        if not (0 <= i < rows and 0 <= j < columns):
            raise ToolError(
                f"cell ({i}, {j}) is outside the table 0..{rows - 1} x 0..{columns - 1}"
            )

    @tool
    def compare_characters(self, i: int, j: int) -> str:
        """Whether source[i] equals target[j]; returns true or false.

        Args:
            i: A position in the source, 0-based.
            j: A position in the target, 0-based.
        """
        source, target = self.config["source"], self.config["target"]
        if not 0 <= i < len(source):
            raise ToolError(f"i = {i} is out of range 0..{len(source) - 1}")
        if not 0 <= j < len(target):
            raise ToolError(f"j = {j} is out of range 0..{len(target) - 1}")
        return json.dumps(source[i] == target[j])

    @tool(name="SetDPTableCell")
    def set_dp_table_cell(self, i: int, j: int, value: int) -> str:
        """Write a value into cell (i, j) of the DP table; rows 0..len(source), columns
        0..len(target).

        Args:
            i: The row.
            j: The column.
            value: The value to store.
        """
        self._cell(i, j)
        self.state["table"][i][j] = value
        return f"cell ({i}, {j}) = {value}"

    @tool(name="GetDPTableCell")
    def get_dp_table_cell(self, i: int, j: int) -> str:
        """Read cell (i, j) of the DP table (null if it was never set).

        Args:
            i: The row.
            j: The column.
        """
        self._cell(i, j)
        return json.dumps(self.state["table"][i][j])

    def oracle(self) -> None:
        """Fill the table row by row, then read its last cell."""
        seen = json.loads(self.call("Observe"))
        m, n = seen["source_length"], seen["target_length"]
        table = [[0] * (n + 1) for _ in range(m + 1)]
        for i in range(m + 1):
            for j in range(n + 1):
                if i == 0 or j == 0:
                    table[i][j] = i + j
                else:
                    same = json.loads(self.call("CompareCharacters", i=i - 1, j=j - 1))
                    table[i][j] = min(
                        table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + (not same)
                    )
                self.call("SetDPTableCell", i=i, j=j, value=table[i][j])
        self.call("Done", answer=int(self.call("GetDPTableCell", i=m, j=n)))
