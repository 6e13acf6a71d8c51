r"""Sokoban: push every box onto a goal square in a small walled room.

Episode rules:

* `reset()` generates a room of ``size`` x ``size`` cells (the outer ring is wall) with
  ``num_walls`` extra interior walls (the floor stays connected), ``num_boxes`` goals and as
  many boxes. The puzzle is made by **reverse play**: boxes start on the goals, the player on
  a random free floor cell, and ``pull_steps`` random reverse moves are played, each a step
  onto a free floor cell that, when a box stands right behind the player, pulls it along
  (with probability 0.8). Played backwards, those moves are legal pushes that put every box
  back on a goal, so every puzzle is solvable by construction; they are kept as
  `SokobanEnv.pull_solution` (direction names, cut where it solves). Rooms where a box still
  sits on a goal, or whose shortest solution (breadth-first search, `solve`, kept as
  `SokobanEnv.solution`) is under ``min_moves`` moves, are drawn again; after 200 tries the
  room with the longest shortest solution is kept.
* Every `step()` is one turn, whatever the action holds. The move is the content of the
  **last** ``\boxed{...}`` of the action: ``up``, ``down``, ``left`` or ``right`` (either
  case; ``u``, ``d``, ``l``, ``r`` also work), e.g. ``\boxed{left}``. The player steps one
  cell that way; a box in that cell is pushed one cell further. Text around the box is
  ignored.
* A move is illegal when it walks into a wall, or pushes a box into a wall or another box;
  an illegal or unparsable move changes nothing. Boxes can only be pushed, never pulled.
* The episode terminates when every box is on a goal. If the last allowed turn
  (``turn == max_turns``) does not solve it, it is truncated (``terminated=False,
  truncated=True``). A box stuck in a corner off a goal does not end the episode.

Rewards, per turn:

=================================================  =======  ======================
Action                                             reward   ``info``
=================================================  =======  ======================
legal move that puts the last box on a goal        ``1.0``  ``correct=True``
other legal move                                   ``0.0``
illegal move (wall, box into wall or box), no      ``-0.1`` ``invalid_action=True``
``\boxed{}``, or unparsable content
=================================================  =======  ======================

The board is shown as text, one row per line: ``#`` wall, ``_`` floor, ``@`` player, ``$``
box, ``.`` goal, ``*`` box on a goal, ``+`` player on a goal. The observation after each
step shows the board, the moves made and the turns left. ``info`` after every step:
``correct`` (bool), ``invalid_action`` (bool), ``parsed_action`` (the stripped text inside
the last ``\boxed{}``, or `None`), ``turn`` (``1..max_turns``), ``moves`` (legal moves so
far) and ``pushes`` (legal moves that pushed a box).

Difficulty presets (`DIFFICULTIES`): ``"easy"`` is a 6x6 room (4x4 floor) with 1 box, 1
interior wall, 20 reverse steps, a shortest solution of at least 6 moves and 30 turns;
``"hard"`` a 7x7 room (5x5 floor) with 2 boxes, 2 interior walls, 40 reverse steps, at least
12 moves and 60 turns; ``"random"`` draws one of the two at every reset. Without a
difficulty: 7x7 with 1 box, 2 interior walls, 30 reverse steps, at least 8 moves, 40 turns.
The turn limit is at least the number of reverse steps, so both kept solutions always fit.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any, ClassVar, NamedTuple

from xpgym.envs.common.presets import PresetEnv, override_preset, resolve_presets

__all__ = [
    "DIFFICULTIES",
    "DIRECTIONS",
    "INVALID_REWARD",
    "MOVE_REWARD",
    "SOLVED_REWARD",
    "Settings",
    "SokobanEnv",
    "parse_move",
    "solve",
]

SOLVED_REWARD = 1.0
MOVE_REWARD = 0.0
INVALID_REWARD = -0.1

DIRECTIONS: dict[str, tuple[int, int]] = {
    "up": (-1, 0),
    "down": (1, 0),
    "left": (0, -1),
    "right": (0, 1),
}
"""Direction name -> (row delta, column delta)."""

_ALIASES = {name[0]: name for name in DIRECTIONS} | {name: name for name in DIRECTIONS}
_OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_PULL_PROBABILITY = 0.8
_TRIES = 200

Cell = tuple[int, int]


class Settings(NamedTuple):
    """One game size (see the `SokobanEnv` arguments)."""

    size: int
    num_boxes: int
    num_walls: int
    pull_steps: int
    max_turns: int
    min_moves: int


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(size=6, num_boxes=1, num_walls=1, pull_steps=20, max_turns=30, min_moves=6),
    "hard": Settings(size=7, num_boxes=2, num_walls=2, pull_steps=40, max_turns=60, min_moves=12),
}
"""Presets selected by `SokobanEnv(difficulty=...)`."""

_DEFAULT = Settings(size=7, num_boxes=1, num_walls=2, pull_steps=30, max_turns=40, min_moves=8)


def parse_move(action: str) -> tuple[str | None, str | None]:
    r"""Parse the move in `action`.

    Returns:
        ``(boxed, direction)``: `boxed` is the stripped content of the last ``\boxed{...}``
        (or `None`); `direction` is one of `DIRECTIONS` (``"up"``...), or `None` if the
        content is not a direction name or its first letter. Never raises.
    """
    matches = _BOXED.findall(action)
    if not matches:
        return None, None
    boxed = matches[-1].strip()
    return boxed, _ALIASES.get(boxed.lower())


def _turns(n: int) -> str:
    return "1 turn" if n == 1 else f"{n} turns"


def _shift(cell: Cell, direction: str, times: int = 1) -> Cell:
    dr, dc = DIRECTIONS[direction]
    return cell[0] + dr * times, cell[1] + dc * times


class SokobanEnv(PresetEnv[Settings]):
    r"""Push every box onto a goal; each move ``\boxed{up}`` (or down/left/right) in ``\boxed{}``.

    Args:
        size: Room side including the outer wall (5..10).
        num_boxes: Boxes and goals (1..4).
        num_walls: Interior walls (0..``(size-2)**2 // 4``).
        pull_steps: Reverse moves played to generate the puzzle (1..500).
        max_turns: Turns before the episode is truncated (at least 1).
        min_moves: Shortest-solution length a generated room should reach (best effort).
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"``. A preset from
            `DIFFICULTIES` gives the defaults; numbers passed explicitly replace the preset's.

    Attributes:
        settings: This episode's `Settings`. episode_difficulty: This episode's preset name.
        walls, goals: Frozen sets of ``(row, col)`` cells (0-based, row 0 at the top).
        boxes: Set of box cells. player: Player cell. turn, moves, pushes: Counters.
        solution: A shortest list of direction names that solves the puzzle from its start.
        pull_solution: The generating pulls, reversed into pushes (also solves it).

    Raises:
        ValueError: unknown difficulty or a number out of its range. TypeError: not an int.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(
        self,
        size: int | None = None,
        num_boxes: int | None = None,
        num_walls: int | None = None,
        pull_steps: int | None = None,
        max_turns: int | None = None,
        min_moves: int | None = None,
        difficulty: str | None = None,
    ) -> None:
        presets = resolve_presets(difficulty, DIFFICULTIES, _DEFAULT)
        overrides = (size, num_boxes, num_walls, pull_steps, max_turns, min_moves)
        super().__init__(
            difficulty, {name: _validated(preset, overrides) for name, preset in presets.items()}
        )
        self.walls: frozenset[Cell] = frozenset()
        self.goals: frozenset[Cell] = frozenset()
        self.boxes: set[Cell] = set()
        self.player: Cell = (1, 1)
        self.solution: list[str] = []
        self.pull_solution: list[str] = []
        self.turn = 0
        self.moves = 0
        self.pushes = 0

    def _apply_preset(self, settings: Settings) -> None:
        self.settings = settings
        self.max_turns = self.settings.max_turns

    # ------------------------------------------------------------------ generation

    def _random_walls(self) -> frozenset[Cell]:
        """The outer ring plus `num_walls` interior walls that keep the floor connected."""
        n = self.settings.size
        ring = {(r, c) for r in range(n) for c in range(n) if r in (0, n - 1) or c in (0, n - 1)}
        interior = [(r, c) for r in range(1, n - 1) for c in range(1, n - 1)]
        for _ in range(_TRIES):
            picks = self.np_random.choice(len(interior), self.settings.num_walls, replace=False)
            walls = ring | {interior[int(i)] for i in picks}
            if _connected([cell for cell in interior if cell not in walls]):
                return frozenset(walls)
        return frozenset(ring)

    def _generate(self) -> None:
        """Draw a room and play it backwards; see the module docstring."""
        best: tuple[int, tuple[Any, ...]] | None = None
        for _ in range(_TRIES):
            walls = self._random_walls()
            n = self.settings.size
            floor = [(r, c) for r in range(n) for c in range(n) if (r, c) not in walls]
            picks = self.np_random.choice(len(floor), self.settings.num_boxes + 1, replace=False)
            cells = [floor[int(i)] for i in picks]
            goals = frozenset(cells[1:])
            boxes, player = set(goals), cells[0]
            pulls: list[str] = []
            for _ in range(self.settings.pull_steps):
                options = [
                    d
                    for d in DIRECTIONS
                    if _shift(player, d) not in walls and _shift(player, d) not in boxes
                ]
                if not options:
                    break
                direction = options[int(self.np_random.integers(len(options)))]
                behind = _shift(player, _OPPOSITE[direction])
                if behind in boxes and self.np_random.random() < _PULL_PROBABILITY:
                    boxes.remove(behind)
                    boxes.add(player)
                player = _shift(player, direction)
                pulls.append(direction)
            if boxes & goals:
                continue
            optimal = solve(walls, goals, boxes, player)
            if optimal is None:  # pragma: no cover - reverse play is always solvable
                raise AssertionError("SokobanEnv: generated an unsolvable room")
            candidate = (walls, goals, boxes, player, pulls, optimal)
            if best is None or len(optimal) > best[0]:
                best = (len(optimal), candidate)
            if len(optimal) >= self.settings.min_moves:
                break
        if best is None:  # pragma: no cover - needs 200 rooms with a box left on a goal
            raise RuntimeError("SokobanEnv: could not generate an unsolved room")
        self.walls, self.goals, boxes, self.player, pulls, self.solution = best[1]
        self.boxes = set(boxes)
        self.pull_solution = self._replay([_OPPOSITE[d] for d in reversed(pulls)])

    def _replay(self, moves: list[str]) -> list[str]:
        """`moves` cut right after the move that solves the current position."""
        boxes, player = set(self.boxes), self.player
        for i, direction in enumerate(moves):
            target = _shift(player, direction)
            if target in boxes:
                boxes.remove(target)
                boxes.add(_shift(target, direction))
            player = target
            if boxes == self.goals:
                return moves[: i + 1]
        raise AssertionError("SokobanEnv: reversed pulls do not solve the room")  # pragma: no cover

    # ------------------------------------------------------------------ play

    def board(self) -> str:
        """The board as text, one row per line (legend in the module docstring)."""
        n = self.settings.size
        rows = []
        for r in range(n):
            row = []
            for c in range(n):
                cell = (r, c)
                if cell in self.walls:
                    row.append("#")
                elif cell == self.player:
                    row.append("+" if cell in self.goals else "@")
                elif cell in self.boxes:
                    row.append("*" if cell in self.goals else "$")
                else:
                    row.append("." if cell in self.goals else "_")
            rows.append("".join(row))
        return "\n".join(rows)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Generate a solvable room (for ``difficulty="random"``, first draw the preset).

        Returns:
            The instructions and board, and info ``{"difficulty", "size", "num_boxes",
            "max_turns"}``.
        """
        super().reset(seed=seed)
        self._generate()
        self.turn = 0
        self.moves = 0
        self.pushes = 0
        boxes = "box" if self.settings.num_boxes == 1 else "boxes"
        obs = (
            f"Sokoban: push every box onto a goal square. Legend: # wall, _ floor, @ you, "
            f"$ box, . goal, * box on a goal, + you on a goal. Each turn, step one cell up, "
            "down, left or right; walking into a box pushes it one cell further, but you cannot "
            "push a box into a wall or another box, and you can never pull. "
            f"{self.settings.num_boxes} {boxes}, {_turns(self.max_turns)}. Write each move in "
            "\\boxed{}, e.g. \\boxed{left}; only the last \\boxed{} in your reply counts.\n"
            f"{self.board()}"
        )
        info = {
            "difficulty": self.episode_difficulty,
            "size": self.settings.size,
            "num_boxes": self.settings.num_boxes,
            "max_turns": self.max_turns,
        }
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take one turn; see the module docstring for the rules and rewards."""
        self.turn += 1
        boxed, direction = parse_move(action)
        prefix = f"Turn {self.turn}/{self.max_turns}:"
        correct = False
        problem = None
        target = beyond = self.player
        if direction is None:
            problem = (
                "no \\boxed{} found"
                if boxed is None
                else f"{boxed!r:.40} is not a move like \\boxed{{left}}"
            )
        else:
            target = _shift(self.player, direction)
            beyond = _shift(self.player, direction, 2)
            if target in self.walls:
                problem = f"a wall blocks {direction}"
            elif target in self.boxes and beyond in self.walls:
                problem = f"the box {direction} of you would be pushed into a wall"
            elif target in self.boxes and beyond in self.boxes:
                problem = f"the box {direction} of you would be pushed into another box"
        if problem is not None:
            reward = INVALID_REWARD
            feedback = f"{prefix} illegal move: {problem}; nothing moved."
        else:
            pushed = target in self.boxes
            if pushed:
                self.boxes.remove(target)
                self.boxes.add(beyond)
                self.pushes += 1
            self.player = target
            self.moves += 1
            correct = self.boxes == self.goals
            reward = SOLVED_REWARD if correct else MOVE_REWARD
            feedback = f"{prefix} moved {direction}" + (", pushing a box." if pushed else ".")
            if correct:
                feedback += f" Solved in {self.moves} moves!"
        feedback += f"\n{self.board()}"
        truncated = not correct and self.turn >= self.max_turns
        if truncated:
            feedback += "\nNo turns left."
        elif not correct:
            feedback += f"\n{_turns(self.max_turns - self.turn)} left."
        info = {
            "correct": correct,
            "invalid_action": problem is not None,
            "parsed_action": boxed,
            "turn": self.turn,
            "moves": self.moves,
            "pushes": self.pushes,
        }
        return feedback, reward, correct, truncated, info

    def sample_random_action(self) -> str:
        r"""``\boxed{<direction>}`` with a direction drawn from `np_random` (may be illegal)."""
        names = list(DIRECTIONS)
        return f"\\boxed{{{names[int(self.np_random.integers(len(names)))]}}}"

    def _episode_state(self) -> dict[str, Any]:
        """For `get_state()`: the room, the solutions and the counters (fresh copies)."""
        return {
            "walls": sorted(self.walls),
            "goals": sorted(self.goals),
            "boxes": sorted(self.boxes),
            "player": self.player,
            "solution": list(self.solution),
            "pull_solution": list(self.pull_solution),
            "turn": self.turn,
            "moves": self.moves,
            "pushes": self.pushes,
        }

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        """Restore what `_episode_state` took."""
        self.walls = frozenset(tuple(cell) for cell in state["walls"])
        self.goals = frozenset(tuple(cell) for cell in state["goals"])
        self.boxes = {tuple(cell) for cell in state["boxes"]}
        self.player = tuple(state["player"])
        self.solution = list(state["solution"])
        self.pull_solution = list(state["pull_solution"])
        self.turn = state["turn"]
        self.moves = state["moves"]
        self.pushes = state["pushes"]


def solve(
    walls: frozenset[Cell], goals: frozenset[Cell], boxes: set[Cell], player: Cell
) -> list[str] | None:
    """A shortest list of moves (direction names) that puts every box on a goal.

    Breadth-first search over (player, boxes) positions; fine for the small rooms here.
    Returns ``[]`` if already solved and `None` if the room cannot be solved.
    """
    start = (player, frozenset(boxes))
    if start[1] == goals:
        return []
    parents: dict[tuple[Cell, frozenset[Cell]], tuple[tuple[Cell, frozenset[Cell]], str]] = {}
    seen = {start}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        here, placed = state
        for direction in DIRECTIONS:
            target = _shift(here, direction)
            if target in walls:
                continue
            moved = placed
            if target in placed:
                beyond = _shift(target, direction)
                if beyond in walls or beyond in placed:
                    continue
                moved = (placed - {target}) | {beyond}
            nxt = (target, moved)
            if nxt in seen:
                continue
            seen.add(nxt)
            parents[nxt] = (state, direction)
            if moved == goals:
                path = []
                while nxt != start:
                    nxt, step = parents[nxt]
                    path.append(step)
                return path[::-1]
            queue.append(nxt)
    return None


def _connected(cells: list[Cell]) -> bool:
    """Whether `cells` form one 4-connected region (an empty list counts as connected)."""
    if not cells:
        return True
    remaining = set(cells)
    queue = deque([cells[0]])
    remaining.discard(cells[0])
    while queue:
        r, c = queue.popleft()
        for dr, dc in DIRECTIONS.values():
            nxt = (r + dr, c + dc)
            if nxt in remaining:
                remaining.remove(nxt)
                queue.append(nxt)
    return not remaining


def _validated(preset: Settings, overrides: tuple[int | None, ...]) -> Settings:
    settings = override_preset(preset, overrides, "SokobanEnv")
    limits = {
        "size": (5, 10),
        "num_boxes": (1, 4),
        "num_walls": (0, (settings.size - 2) ** 2 // 4),
        "pull_steps": (1, 500),
        "max_turns": (1, 10**6),
        "min_moves": (0, 10**6),
    }
    for name, (low, high) in limits.items():
        value = getattr(settings, name)
        if not low <= value <= high:
            raise ValueError(f"SokobanEnv: {name} must be {low}..{high}, got {value}")
    return settings
