r"""Tic-Tac-Toe for two agents, ``"x"`` and ``"o"``, taking turns (sequential mode).

Episode rules:

* `reset()` empties the 3x3 board; ``"x"`` always moves first, then the agents alternate.
  The start uses no randomness (only `sample_random_action` draws from `np_random`).
* Each `step()` takes the action of the agent whose turn it is. The move is the content of
  the **last** ``\boxed{...}`` of the action: a row and a column, each ``1``, ``2`` or ``3``
  (row 1 is the top, column 1 the left), e.g. ``\boxed{2 3}``; ``\boxed{23}``,
  ``\boxed{2,3}`` and ``\boxed{(2, 3)}`` are read the same. Text around the box is ignored.
* The mover's mark goes on that cell. Three marks of one agent in a row, column or diagonal
  win; a full board with no line is a draw.
* **Illegal move rule: the offender forfeits.** A move is illegal when the action has no
  ``\boxed{}``, its content is not a row and column in 1..3, or the cell is taken. The board
  is unchanged, the offender loses (``-1``), the opponent wins (``+1``) and the episode ends.
* Every episode ends with both agents terminated (never truncated) after at most 9 steps.

Rewards, given to both agents in the step that ends the episode (all other steps give
``0.0`` to both):

==========================================  ==============  ==============  ==================
Outcome                                     winner          loser           ``info["reason"]``
==========================================  ==============  ==============  ==================
three in a row                              ``+1.0``        ``-1.0``        ``"three_in_a_row"``
full board, no line (draw)                  ``0.0`` (both)                  ``"draw"``
illegal / unparsable move (forfeit)         ``+1.0``        ``-1.0``        ``"illegal_move"``
==========================================  ==============  ==============  ==================

``info`` for **both** agents after every step: ``mover`` (the agent that acted),
``parsed_action`` (the stripped text inside the mover's last ``\boxed{}``, or `None`),
``invalid_action`` (bool: the mover's move was illegal), ``move`` (``(row, col)`` 1-based, or
`None` if illegal), ``winner`` (``"x"``, ``"o"`` or `None`), ``reason`` (see the table; `None`
while the game goes on) and ``turn`` (moves attempted so far, ``1..9``).

The observation of an agent shows the rules, its mark, the board (rows and columns
numbered), the last move, and whose turn it is (or the result once the game is over).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from xpgym.core.multiagent import MultiAgentEnv

__all__ = [
    "AGENTS",
    "DRAW_REWARD",
    "EMPTY",
    "LINES",
    "LOSS_REWARD",
    "WIN_REWARD",
    "TicTacToeEnv",
    "legal_moves",
    "parse_move",
    "winner_of",
]

AGENTS = ("x", "o")
EMPTY = "."
WIN_REWARD = 1.0
LOSS_REWARD = -1.0
DRAW_REWARD = 0.0

LINES: tuple[tuple[int, int, int], ...] = (
    (0, 1, 2),
    (3, 4, 5),
    (6, 7, 8),
    (0, 3, 6),
    (1, 4, 7),
    (2, 5, 8),
    (0, 4, 8),
    (2, 4, 6),
)
"""Cell indices (``3 * (row - 1) + (col - 1)``) of the eight winning lines."""

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_MOVE = re.compile(r"\(?\s*([1-3])\s*[,\s]?\s*([1-3])\s*\)?")


def parse_move(action: str) -> tuple[str | None, tuple[int, int] | None]:
    r"""Parse the move in `action`.

    Returns:
        ``(boxed, move)``: `boxed` is the stripped content of the last ``\boxed{...}`` (or
        `None`); `move` is ``(row, col)`` 1-based, or `None` if the content is not a row and
        a column in 1..3. Never raises.
    """
    matches = _BOXED.findall(action)
    if not matches:
        return None, None
    boxed = matches[-1].strip()
    found = _MOVE.fullmatch(boxed)
    if found is None:
        return boxed, None
    return boxed, (int(found[1]), int(found[2]))


def winner_of(board: list[str] | tuple[str, ...]) -> str | None:
    """The agent (``"x"``/``"o"``) with three in a row on `board` (9 cells), else `None`."""
    for a, b, c in LINES:
        if board[a] != EMPTY and board[a] == board[b] == board[c]:
            return board[a]
    return None


def legal_moves(board: list[str] | tuple[str, ...]) -> list[tuple[int, int]]:
    """Empty cells of `board` as 1-based ``(row, col)``, row-major order."""
    return [(i // 3 + 1, i % 3 + 1) for i, cell in enumerate(board) if cell == EMPTY]


class TicTacToeEnv(MultiAgentEnv):
    r"""Two agents alternate ``\boxed{row col}`` moves on a 3x3 board; see the module docstring.

    Attributes:
        board: 9 cells, row-major; ``"."`` empty, else the agent id ``"x"`` or ``"o"``.
        turn: Moves attempted this episode (legal or not).
        winner: ``"x"``, ``"o"`` or `None`. reason: why the game ended (`None` while running).
        last_move: ``(agent, row, col)`` of the last legal move, or `None`.
        history: ``(agent, action text)`` of every step, in order.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True, "multi_agent": True}

    def __init__(self) -> None:
        super().__init__(list(AGENTS), mode="sequential")
        self.board: list[str] = [EMPTY] * 9
        self.turn = 0
        self.winner: str | None = None
        self.reason: str | None = None
        self.last_move: tuple[str, int, int] | None = None
        self.history: list[tuple[str, str]] = []

    # ------------------------------------------------------------------ hooks

    def _reset(self, options: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
        self.board = [EMPTY] * 9
        self.turn = 0
        self.winner = None
        self.reason = None
        self.last_move = None
        self.history = []
        return {agent: {"mark": agent.upper(), "first": AGENTS[0]} for agent in AGENTS}

    def _step(
        self, actions: dict[str, str]
    ) -> tuple[dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]]:
        ((mover, text),) = actions.items()
        opponent = AGENTS[1] if mover == AGENTS[0] else AGENTS[0]
        self.turn += 1
        self.history.append((mover, text))
        boxed, move = parse_move(text)
        invalid = move is None or self.board[_index(move)] != EMPTY
        rewards: dict[str, float] = {}
        done = False
        if invalid:
            self.winner, self.reason, done = opponent, "illegal_move", True
        else:
            assert move is not None
            self.board[_index(move)] = mover
            self.last_move = (mover, *move)
            if winner_of(self.board) == mover:
                self.winner, self.reason, done = mover, "three_in_a_row", True
            elif EMPTY not in self.board:
                self.reason, done = "draw", True
        if done:
            if self.winner is None:
                rewards = dict.fromkeys(AGENTS, DRAW_REWARD)
            else:
                loser = AGENTS[1] if self.winner == AGENTS[0] else AGENTS[0]
                rewards = {self.winner: WIN_REWARD, loser: LOSS_REWARD}
        info = {
            "mover": mover,
            "parsed_action": boxed,
            "invalid_action": invalid,
            "move": None if invalid else move,
            "winner": self.winner,
            "reason": self.reason,
            "turn": self.turn,
        }
        terminations = dict.fromkeys(AGENTS, done)
        return rewards, terminations, {}, {agent: dict(info) for agent in AGENTS}

    def observe(self, agent: str) -> str:
        """Rules, the agent's mark, the board, the last move and whose turn it is (or result)."""
        lines = [
            f"Tic-Tac-Toe. You are {agent!r} and play the mark {agent.upper()}; 'x' moves "
            "first. Get three of your marks in a row, column or diagonal. Write your move as "
            "row and column (1-3, row 1 is the top) in \\boxed{}, e.g. \\boxed{2 3}; only the "
            "last \\boxed{} counts. An illegal move (taken cell, bad format) loses at once.",
            f"Board:\n{self.render()}",
        ]
        if self.history:
            mover, text = self.history[-1]
            if self.reason == "illegal_move":
                boxed, _ = parse_move(text)
                shown = "no \\boxed{}" if boxed is None else f"\\boxed{{{boxed:.40}}}"
                lines.append(f"Last move: {mover!r} played an illegal move ({shown}).")
            elif self.last_move is not None:
                who, row, col = self.last_move
                lines.append(f"Last move: {who!r} played row {row}, column {col}.")
        if self.reason is not None:
            if self.winner is None:
                lines.append("Game over: draw.")
            else:
                result = "you win" if self.winner == agent else "you lose"
                how = "three in a row" if self.reason == "three_in_a_row" else "illegal move"
                lines.append(f"Game over: {self.winner!r} wins by {how} ({result}).")
        else:
            selected = self.agent_selector.selected_agent
            whose = "your turn" if selected == agent else f"waiting for {selected!r}"
            lines.append(f"To move: {selected!r} ({whose}).")
        return "\n".join(lines)

    def render(self) -> str:
        """The board as text: a header of column numbers, then one numbered line per row."""
        rows = ["   1 2 3"]
        for r in range(3):
            cells = " ".join(c.upper() for c in self.board[3 * r : 3 * r + 3])
            rows.append(f"{r + 1}  {cells}")
        return "\n".join(rows)

    def sample_random_action(self, agent: str) -> str:
        r"""``\boxed{row col}`` of an empty cell drawn from `np_random` (always legal)."""
        moves = legal_moves(self.board) or [(1, 1)]
        row, col = moves[int(self.np_random.integers(len(moves)))]
        return f"\\boxed{{{row} {col}}}"

    def _get_state(self) -> dict[str, Any]:
        return {
            "board": list(self.board),
            "turn": self.turn,
            "winner": self.winner,
            "reason": self.reason,
            "last_move": self.last_move,
            "history": list(self.history),
        }

    def _set_state(self, state: dict[str, Any]) -> None:
        self.board = list(state["board"])
        self.turn = state["turn"]
        self.winner = state["winner"]
        self.reason = state["reason"]
        self.last_move = state["last_move"]
        self.history = list(state["history"])


def _index(move: tuple[int, int]) -> int:
    return 3 * (move[0] - 1) + (move[1] - 1)
