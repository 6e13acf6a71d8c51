r"""Science lab: heat, cool, measure and mix tasks in a small house (ScienceWorld-style).

A text version of ScienceWorld (Wang et al., EMNLP 2022) as AgentGym-RL trains on it,
written from the published descriptions. The turn loop, the ``\boxed{command}`` parsing,
``help``, invalid actions and truncation are `xpgym.envs.world.common.WorldEnv`'s.

World (built from `np_random` at every reset):

* Rooms: one (the kitchen) or a hallway joined by a door to each other room (kitchen,
  workshop, greenhouse, bathroom). Doors start closed. The agent starts in a random room.
* Things: substances (each a species of `SUBSTANCES`, in a vessel, with a temperature in
  whole degrees; its state of matter follows from it: solid below the melting point, gas
  at or above the boiling point, else liquid; its name depends on the state, e.g. ice /
  water / steam), vessels (cup, jar, ...: hold substances; can be carried), a thermometer
  (can be carried), a stove (kitchen; holds vessels; off or on), a freezer (holds vessels;
  always cold) and a red and a blue answer box (fixed).
* Time: every valid command (not ``help``) is one tick. At each tick a substance whose
  vessel is on the stove while the stove is on gains ``HEAT_STEP`` degrees (up to
  ``MAX_STOVE``); one whose vessel is in the freezer loses ``COOL_STEP`` (down to
  ``MIN_FREEZER``). Nothing else changes temperature.

Commands (``<obj>`` is a thing's current name; things in the room, in its stove or freezer,
and carried are in reach): ``look around``, ``inventory``, ``wait``, ``open door to
<room>``, ``close door to <room>``, ``go to <room>`` (through an open door), ``pick up
<obj>`` (a vessel or the thermometer), ``put <substance> in <vessel>`` (pour it over),
``put <vessel> on stove``, ``put <vessel> in freezer`` (other prepositions are refused),
``activate stove``, ``deactivate stove``, ``use thermometer on <substance>`` (carried
thermometer: reports the temperature), ``mix <vessel>`` (its contents are exactly a
`RECIPES` pair: they become the product, at their mean temperature), ``focus on <obj>``.
Anything else, or an unknown thing, gives "No known action matches that input."; a known
command that cannot be done now says why. Both are invalid actions (nothing changes, no
tick, reward ``0``).

Tasks (`TASKS`), each an ordered list of sub-goals; the **score** is the number of leading
sub-goals that hold now divided by their number:

* ``heat``: boil water, or melt ice / chocolate / butter: focus on the substance; its
  vessel is on the stove; the stove is on; the substance is in the goal state (done).
* ``cool``: freeze a liquid: focus on it; its vessel is in the freezer; it is solid (done).
* ``measure``: focus on the substance; carry the thermometer; measure it; focus on the red
  box if the reading is above the task's threshold, else on the blue box (done).
* ``mix``: the two ingredients in one vessel (or the product made); the product made; focus
  on the product (done).
* ``mix_heat`` / ``mix_cool`` (hard): make the product, then boil / freeze it on the stove
  / in the freezer (its vessel there, stove on, in the goal state), carry the thermometer,
  measure it while in the goal state, and answer with a box as in ``measure``.

Focusing on anything but the task's substance or its answer ends the episode
(``terminated``, ``correct=False``), as in ScienceWorld; so does a wrong answer (a box
that does not match the last reading, or any answer before the other sub-goals hold).
Completing every sub-goal ends it with ``correct=True``.

Rewards: the per-turn reward is the rise of the running maximum of the score, so every
reward is ``>= 0`` and the episode return equals the highest score reached (``1.0`` when
solved); undoing a sub-goal lowers the score shown but costs nothing.

Observation: the task and the starting room at reset; then each command's reply (going to a
room describes it), with the score. Info keys: `WorldEnv`'s.

Presets (`DIFFICULTIES`): ``easy`` one room, a heat or measure task, one distractor, 12
turns; default 2-3 rooms, any of heat / cool / measure / mix, two distractors, 20 turns;
``hard`` 4 rooms, ``mix_heat`` or ``mix_cool``, two distractors, 30 turns. `solve` wins
every preset within its limit: its longest plans over seeds 0-4999 are 6, 12 and 24
commands (every room is at most two doors away; a state change takes at most 3 ticks).
"""

from __future__ import annotations

import copy
import re
from typing import Any, ClassVar, NamedTuple

from xpgym.envs.common.presets import resolve_presets
from xpgym.envs.world.common import Outcome, WorldEnv

__all__ = [
    "COOL_STEP",
    "DIFFICULTIES",
    "HEAT_STEP",
    "MAX_STOVE",
    "MIN_FREEZER",
    "NO_MATCH",
    "RECIPES",
    "SUBSTANCES",
    "TASKS",
    "ScienceLabEnv",
    "Settings",
    "Substance",
    "solve",
]

NO_MATCH = "No known action matches that input."
ROOM_TEMPERATURE = 20
HEAT_STEP = 30
MAX_STOVE = 200
COOL_STEP = 15
MIN_FREEZER = -25
HALLWAY = "hallway"
OTHER_ROOMS = ("workshop", "greenhouse", "bathroom")
VESSELS = ("cup", "jar", "bowl", "beaker", "flask", "mug", "glass")
BOXES = ("red box", "blue box")
STATES = ("solid", "liquid", "gas")


class Substance(NamedTuple):
    """A species: its names when solid, liquid and gas, melting and boiling points (deg C)."""

    names: tuple[str, str, str]
    melting: int
    boiling: int


def _species(name: str, melting: int, boiling: int) -> Substance:
    """A species that is liquid at room temperature, with generic solid and gas names."""
    return Substance((f"frozen {name}", name, f"{name} vapour"), melting, boiling)


SUBSTANCES: dict[str, Substance] = {
    "water": Substance(("ice", "water", "steam"), 0, 100),
    "chocolate": Substance(("chocolate", "melted chocolate", "chocolate smoke"), 35, 1000),
    "butter": Substance(("butter", "melted butter", "butter smoke"), 32, 1000),
    "salt": Substance(("salt", "molten salt", "salt vapour"), 801, 1465),
    "sugar": Substance(("sugar", "melted sugar", "sugar smoke"), 186, 1000),
    "orange juice": _species("orange juice", -2, 100),
    "milk": _species("milk", -1, 100),
    "tea": _species("tea", 0, 100),
    "soup": _species("soup", -1, 100),
    "salt water": _species("salt water", -6, 102),
    "sugar water": _species("sugar water", -3, 101),
    "chocolate milk": _species("chocolate milk", -2, 101),
    "red paint": _species("red paint", -5, 100),
    "blue paint": _species("blue paint", -5, 100),
    "yellow paint": _species("yellow paint", -5, 100),
    "green paint": _species("green paint", -5, 100),
    "orange paint": _species("orange paint", -5, 100),
    "violet paint": _species("violet paint", -5, 100),
}
"""Every species, by key; names are unique across species and states."""

RECIPES: dict[tuple[str, str], str] = {
    ("salt", "water"): "salt water",
    ("sugar", "water"): "sugar water",
    ("chocolate", "milk"): "chocolate milk",
    ("blue paint", "red paint"): "violet paint",
    ("blue paint", "yellow paint"): "green paint",
    ("red paint", "yellow paint"): "orange paint",
}
"""The chemistry table: a sorted pair of species keys -> the product's key."""

# (species, start temperature, goal state) for the heat and cool tasks; measure targets.
_HEAT = (("water", 20, "gas"), ("water", -10, "liquid"), ("chocolate", 20, "liquid"),
         ("butter", 20, "liquid"))  # fmt: skip
_COOL = ("water", "orange juice", "milk", "tea")
_MEASURE = ("tea", "soup", "milk", "water")
TASKS = ("heat", "cool", "measure", "mix", "mix_heat", "mix_cool")


class Settings(NamedTuple):
    """One preset: the tasks drawn from, rooms (inclusive range), distractors, turn limit."""

    tasks: tuple[str, ...]
    min_rooms: int
    max_rooms: int
    distractors: int
    max_turns: int


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(("heat", "measure"), 1, 1, 1, 12),
    "hard": Settings(("mix_heat", "mix_cool"), 4, 4, 2, 30),
}
"""Presets selected by `ScienceLabEnv(difficulty=...)`."""

_DEFAULT = Settings(("heat", "cool", "measure", "mix"), 2, 3, 2, 20)

# Each command: its pattern, the method that does it (with the pattern's groups, then the
# fixed arguments). A method returns its reply, an `Outcome` (refused or ending), or `None`
# when a name is no thing in reach (then the input matches no known action).
_COMMANDS: list[tuple[re.Pattern[str], str, tuple[bool, ...]]] = [
    (re.compile(pattern), method, args)
    for pattern, method, args in [
        (r"look around", "_describe_room", ()),
        (r"inventory", "_inventory", ()),
        (r"wait", "_wait", ()),
        (r"open door to (.+)", "_set_door", (True,)),
        (r"close door to (.+)", "_set_door", (False,)),
        (r"go to (.+)", "_go", ()),
        (r"pick up (.+)", "_pick_up", ()),
        (r"put (.+?) (in|on) (.+)", "_put", ()),
        (r"activate (.+)", "_switch", (True,)),
        (r"deactivate (.+)", "_switch", (False,)),
        (r"use thermometer on (.+)", "_measure", ()),
        (r"mix (.+)", "_mix", ()),
        (r"focus on (.+)", "_focus", ()),
    ]
]
_SNAPSHOT = ("rooms", "doors", "room", "things", "task", "focused", "answered", "reading", "best")


def state_of(species: str, temperature: int) -> str:
    """``"solid"``, ``"liquid"`` or ``"gas"`` for `species` at `temperature`."""
    substance = SUBSTANCES[species]
    if temperature < substance.melting:
        return "solid"
    return "gas" if temperature >= substance.boiling else "liquid"


class ScienceLabEnv(WorldEnv[Settings]):
    r"""ScienceWorld-style lab tasks with sub-goal credit; see the module docstring.

    Args:
        max_turns: Replaces the preset's turn limit (at least 1).
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"`` (easy or hard at each
            reset).

    Attributes:
        rooms: Room names; doors: ``"<hallway>|<room>"`` -> open; room: where the agent is.
        things: Thing key (a species key for substances, else its name) -> ``{"kind",
            "where" (a room, ``"inventory"`` or a holder's key), "temp", "on"}``.
        task: ``{"kind", "target", "goal", "ingredients", "threshold"}`` (unused ones `None`).
        focused: The task substance has been focused on. answered: answered right.
        reading: The last thermometer reading of the task's target, or `None`.
        best: The highest score reached this episode.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(self, max_turns: int | None = None, difficulty: str | None = None) -> None:
        presets = resolve_presets(difficulty, DIFFICULTIES, _DEFAULT)
        if max_turns is not None:
            if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
                raise ValueError(f"ScienceLabEnv: max_turns must be an int >= 1, got {max_turns!r}")
            presets = {name: p._replace(max_turns=max_turns) for name, p in presets.items()}
        super().__init__(difficulty, presets)
        self._clear()

    def _apply_preset(self, settings: Settings) -> None:
        self.settings = settings
        self.max_turns = settings.max_turns

    def _clear(self) -> None:
        self.rooms: list[str] = []
        self.doors: dict[str, bool] = {}
        self.room = ""
        self.things: dict[str, dict[str, Any]] = {}
        self.task: dict[str, Any] = {}
        self.focused = False
        self.answered = False
        self.reading: int | None = None
        self.best = 0.0

    # ----- generation -------------------------------------------------------------------

    def _pick(self, options: tuple[Any, ...] | list[Any]) -> Any:
        return options[int(self.np_random.integers(len(options)))]

    def _generate(self) -> str:
        self._clear()
        count = int(self.np_random.integers(self.settings.min_rooms, self.settings.max_rooms + 1))
        if count == 1:
            self.rooms = ["kitchen"]
        else:
            others = [str(r) for r in self.np_random.permutation(OTHER_ROOMS)[: count - 2]]
            self.rooms = [HALLWAY, "kitchen", *sorted(others)]
            self.doors = {f"{HALLWAY}|{room}": False for room in self.rooms[1:]}
        self.room = self._pick(self.rooms)
        self._add("stove", "kitchen")
        self._add("freezer", self._pick(self.rooms))
        self._add("thermometer", self._pick(self.rooms))
        boxes_at = self._pick(self.rooms)
        for box in BOXES:
            self._add(box, boxes_at)
        vessels = [str(v) for v in self.np_random.permutation(VESSELS)]
        used = self._make_task(vessels)
        pool = sorted(set(SUBSTANCES) - used - set(RECIPES.values()))
        for species in self.np_random.permutation(pool)[: self.settings.distractors]:
            self._add_substance(str(species), vessels, ROOM_TEMPERATURE)
        self._add(vessels.pop(), self._pick(self.rooms))  # one empty vessel
        return f"{self._task_text()}\n{self._describe_room()}"

    def _add(self, key: str, where: str) -> None:
        kind = "vessel" if key in VESSELS else "box" if key in BOXES else key
        self.things[key] = {"kind": kind, "where": where, "temp": ROOM_TEMPERATURE, "on": False}

    def _add_substance(self, species: str, vessels: list[str], temp: int) -> None:
        vessel = vessels.pop()
        self._add(vessel, self._pick(self.rooms))
        self.things[species] = {"kind": "substance", "where": vessel, "temp": temp, "on": False}

    def _make_task(self, vessels: list[str]) -> set[str]:
        """Draw the task, add its substances (in vessels taken from `vessels`); return the
        species it involves."""
        kind = self._pick(self.settings.tasks)
        task: dict[str, Any] = dict.fromkeys(("target", "goal", "ingredients", "threshold"))
        task["kind"] = kind
        if kind == "heat":
            species, temp, task["goal"] = self._pick(_HEAT)
            task["target"] = species
            self._add_substance(species, vessels, temp)
        elif kind == "cool":
            task["target"], task["goal"] = self._pick(_COOL), "solid"
            self._add_substance(task["target"], vessels, ROOM_TEMPERATURE)
        elif kind == "measure":
            task["target"] = self._pick(_MEASURE)
            temp = int(self.np_random.integers(5, 96))
            task["threshold"] = int(self._pick([t for t in range(20, 81, 5) if t != temp]))
            self._add_substance(task["target"], vessels, temp)
        else:
            pair = self._pick(sorted(RECIPES))
            task["ingredients"], task["target"] = list(pair), RECIPES[pair]
            for species in pair:
                self._add_substance(species, vessels, ROOM_TEMPERATURE)
            if kind == "mix_heat":
                task["goal"], task["threshold"] = "gas", int(self.np_random.integers(100, 200))
            elif kind == "mix_cool":
                task["goal"], task["threshold"] = "solid", int(self.np_random.integers(-25, -5))
        self.task = task
        return {task["target"], *(task["ingredients"] or [])}

    def _task_text(self) -> str:
        task = self.task
        kind, target = task["kind"], task["target"]
        names = SUBSTANCES[target].names
        answer = (
            f"measure its temperature with the thermometer: if it is above "
            f"{task['threshold']} degrees, focus on the red box, otherwise on the blue box."
        )
        if kind == "heat":
            verb = "boil" if task["goal"] == "gas" else "melt"
            start = names[STATES.index(self._state(target))]
            text = f"Your task is to {verb} {start}. First, focus on the {start}."
        elif kind == "cool":
            text = f"Your task is to freeze {names[1]}. First, focus on the {names[1]}."
        elif kind == "measure":
            text = f"Your task is to measure the temperature of the {names[1]}. First, focus on "
            text += f"the {names[1]}, then {answer}"
        else:
            a, b = task["ingredients"]
            text = f"Your task is to make {target} by mixing {a} and {b}."
            if kind == "mix":
                text += f" When you are done, focus on the {target}."
            else:
                verb = "boil" if task["goal"] == "gas" else "freeze"
                text += f" Then {verb} it, and while it is {task['goal']}, {answer}"
        return text

    # ----- the world model --------------------------------------------------------------

    def _state(self, key: str) -> str:
        return state_of(key, self.things[key]["temp"])

    def thing_name(self, key: str) -> str:
        """The name commands use for a thing now (a substance's depends on its state)."""
        if self.things[key]["kind"] != "substance":
            return key
        return SUBSTANCES[key].names[STATES.index(self._state(key))]

    def place(self, key: str) -> str:
        """The room a thing is in, or ``"inventory"`` (following its holders)."""
        where = self.things[key]["where"]
        while where in self.things:
            where = self.things[where]["where"]
        return where

    def _reachable(self) -> dict[str, str]:
        """Name -> key of every thing in reach, sorted by name."""
        keys = [k for k in self.things if self.place(k) in (self.room, "inventory")]
        return dict(sorted((self.thing_name(k), k) for k in keys))

    def _neighbours(self) -> list[str]:
        if len(self.rooms) == 1:
            return []
        return self.rooms[1:] if self.room == HALLWAY else [HALLWAY]

    def _door(self, room: str) -> str:
        return f"{HALLWAY}|{room if room != HALLWAY else self.room}"

    def _holder(self, key: str) -> str | None:
        """``"stove"`` / ``"freezer"`` when a substance's vessel is on or in it, else `None`."""
        vessel = self.things[key]["where"]
        holder = self.things.get(vessel, {}).get("where")
        return holder if holder in ("stove", "freezer") else None

    def _tick(self) -> None:
        for key, thing in self.things.items():
            if thing["kind"] != "substance":
                continue
            holder = self._holder(key)
            if holder == "stove" and self.things["stove"]["on"]:
                thing["temp"] = min(thing["temp"] + HEAT_STEP, MAX_STOVE)
            elif holder == "freezer":
                thing["temp"] = max(thing["temp"] - COOL_STEP, MIN_FREEZER)

    def _contents(self, key: str) -> str:
        inside = sorted(self.thing_name(k) for k, t in self.things.items() if t["where"] == key)
        return ", ".join(inside) if inside else "nothing"

    def _describe(self, key: str) -> str:
        kind = self.things[key]["kind"]
        if kind == "vessel":
            return f"a {key} (containing {self._contents(key)})"
        if kind == "stove":
            state = "on" if self.things[key]["on"] else "off"
            return f"a stove ({state}), holding {self._contents(key)}"
        if kind == "freezer":
            return f"a freezer, holding {self._contents(key)}"
        return f"a {key}"

    def _describe_room(self) -> str:
        here = sorted(k for k, t in self.things.items() if t["where"] == self.room)
        text = f"You are in the {self.room}. You see: {'; '.join(map(self._describe, here))}."
        doors = [
            f"to the {r} ({'open' if self.doors[self._door(r)] else 'closed'})"
            for r in self._neighbours()
        ]
        return text + (f" Doors: {', '.join(doors)}." if doors else "")

    # ----- scoring ----------------------------------------------------------------------

    def subgoals(self) -> list[bool]:
        """Which of the task's ordered sub-goals hold now (see the module docstring)."""
        task, things = self.task, self.things
        kind, target = task["kind"], task["target"]
        if kind == "measure":
            return [self.focused, self._carried("thermometer"), self.reading is not None,
                    self.answered]  # fmt: skip
        if kind in ("heat", "cool"):
            changed = [self._state(target) == task["goal"]]
            if kind == "heat":
                return [self.focused, self._holder(target) == "stove", things["stove"]["on"],
                        *changed]  # fmt: skip
            return [self.focused, self._holder(target) == "freezer", *changed]
        made = target in things
        a, b = task["ingredients"]
        together = made or (a in things and things[a]["where"] == things[b]["where"])
        if kind == "mix":
            return [together, made, self.answered]
        device = "stove" if kind == "mix_heat" else "freezer"
        on = things["stove"]["on"] if kind == "mix_heat" else True
        return [
            together,
            made,
            made and self._holder(target) == device,
            made and on,
            made and self._state(target) == task["goal"],
            self._carried("thermometer"),
            self.reading is not None and state_of(target, self.reading) == task["goal"],
            self.answered,
        ]

    def score(self) -> float:
        """The share of leading sub-goals that hold now, in [0, 1]."""
        goals = self.subgoals()
        held = next((i for i, ok in enumerate(goals) if not ok), len(goals))
        return held / len(goals)

    def _carried(self, key: str) -> bool:
        return self.things[key]["where"] == "inventory"

    # ----- commands ---------------------------------------------------------------------

    def _execute(self, command: str) -> Outcome:
        for pattern, method, args in _COMMANDS:
            found = pattern.fullmatch(command)
            reply = None if found is None else getattr(self, method)(*found.groups(), *args)
            if isinstance(reply, Outcome):
                return reply
            if reply is not None:
                return self._after(reply)
        return Outcome(NO_MATCH, valid=False)

    def _after(self, reply: str, ended: bool = False) -> Outcome:
        """Tick, rescore and pay the rise of the running maximum score."""
        self._tick()
        score = self.score()
        reward = max(0.0, score - self.best)
        self.best = max(self.best, score)
        done = ended or score == 1.0
        text = f"{reply} Score: {score:.2f}."
        if score == 1.0:
            text += " Task complete!"
        elif done:
            text += f" The episode ends; best score {self.best:.2f}."
        return Outcome(text, reward=reward, done=done, correct=score == 1.0)

    def _refuse(self, why: str) -> Outcome:
        return Outcome(why, valid=False)

    def _find(self, name: str) -> str | None:
        return self._reachable().get(name)

    def _inventory(self) -> str:
        return f"You carry: {self._contents('inventory')}."

    def _wait(self) -> str:
        return "You wait."

    def _set_door(self, room: str, opened: bool) -> str | Outcome | None:
        if room not in self._neighbours():
            return None
        verb = "open" if opened else "closed"
        if self.doors[self._door(room)] == opened:
            return self._refuse(f"The door to the {room} is already {verb}.")
        self.doors[self._door(room)] = opened
        return f"The door to the {room} is now {verb}."

    def _go(self, room: str) -> str | Outcome | None:
        if room not in self._neighbours():
            return None
        if not self.doors[self._door(room)]:
            return self._refuse(f"The door to the {room} is closed.")
        self.room = room
        return self._describe_room()

    def _pick_up(self, name: str) -> str | Outcome | None:
        key = self._find(name)
        if key is None:
            return None
        if self.things[key]["kind"] not in ("vessel", "thermometer"):
            return self._refuse(f"You cannot pick up the {name}.")
        if self._carried(key):
            return self._refuse(f"You already carry the {name}.")
        self.things[key]["where"] = "inventory"
        return f"You pick up the {name}."

    def _put(self, name: str, preposition: str, target: str) -> str | Outcome | None:
        key, holder = self._find(name), self._find(target)
        if key is None or holder is None:
            return None
        kind, holder_kind = self.things[key]["kind"], self.things[holder]["kind"]
        fits = (kind, holder_kind) == ("substance", "vessel") or (
            kind == "vessel" and holder_kind in ("stove", "freezer")
        )
        if not fits:
            return self._refuse(f"The {name} cannot go into the {target}.")
        wanted = "on" if holder_kind == "stove" else "in"
        if preposition != wanted:
            return self._refuse(f"Say: put {name} {wanted} {target}.")
        if self.things[key]["where"] == holder:
            return self._refuse(f"The {name} is already there.")
        self.things[key]["where"] = holder
        return f"You move the {name} to the {target}."

    def _switch(self, name: str, on: bool) -> str | Outcome | None:
        if self._find(name) is None:
            return None
        if name != "stove":
            return self._refuse(f"The {name} cannot be switched on or off.")
        if self.things["stove"]["on"] == on:
            return self._refuse(f"The stove is already {'on' if on else 'off'}.")
        self.things["stove"]["on"] = on
        return f"The stove is now {'on' if on else 'off'}."

    def _measure(self, name: str) -> str | Outcome | None:
        key = self._find(name)
        if key is None:
            return None
        if not self._carried("thermometer"):
            return self._refuse("You do not carry the thermometer.")
        if self.things[key]["kind"] != "substance":
            return self._refuse(f"The thermometer measures substances, not the {name}.")
        temp = self.things[key]["temp"]
        if key == self.task["target"]:
            self.reading = temp
        return f"The thermometer reads {temp} degrees."

    def _mix(self, name: str) -> str | Outcome | None:
        key = self._find(name)
        if key is None:
            return None
        inside = tuple(sorted(k for k, t in self.things.items() if t["where"] == key))
        if inside not in RECIPES:
            return self._refuse(f"Mixing what the {name} holds makes nothing new.")
        product = RECIPES[inside]
        temp = sum(self.things.pop(k)["temp"] for k in inside) // 2
        self.things[product] = {"kind": "substance", "where": key, "temp": temp, "on": False}
        return f"You mix the {name}: it now holds {self.thing_name(product)}."

    def _focus(self, name: str) -> str | Outcome | None:
        key = self._find(name)
        if key is None:
            return None
        kind, target = self.task["kind"], self.task["target"]
        if key == target and kind in ("heat", "cool", "measure"):
            if self.focused:
                return self._refuse(f"You already focus on the {name}.")
            self.focused = True
            return f"You focus on the {name}."
        answers = BOXES if self.task["threshold"] is not None else (target,)
        if key in answers and all(self.subgoals()[:-1]):
            if key == target:
                self.answered = True
            elif self.reading is not None:
                self.answered = (key == "red box") == (self.reading > self.task["threshold"])
        if self.answered:
            return self._after(f"You focus on the {name}.")
        return self._after(f"You focus on the {name}, which is not the right answer.", True)

    def available_actions(self) -> list[str]:
        """Every command that is valid now, over the things in reach, in a stable order."""
        acts = ["look around", "inventory", "wait"]
        for room in self._neighbours():
            opened = self.doors[self._door(room)]
            if opened:
                acts += [f"go to {room}", f"close door to {room}"]
            else:
                acts.append(f"open door to {room}")
        reach = self._reachable()
        kinds = {name: self.things[key]["kind"] for name, key in reach.items()}
        devices = [n for n in ("stove", "freezer") if n in reach]
        for name, key in reach.items():
            kind, where = kinds[name], self.things[key]["where"]
            if kind in ("vessel", "thermometer") and where != "inventory":
                acts.append(f"pick up {name}")
            if kind == "substance":
                acts += [f"put {name} in {v}" for v in reach if kinds[v] == "vessel" and v != where]
            if kind == "vessel":
                acts += [
                    f"put {name} {'on' if d == 'stove' else 'in'} {d}"
                    for d in devices
                    if d != where
                ]
                if tuple(sorted(k for k, t in self.things.items() if t["where"] == key)) in RECIPES:
                    acts.append(f"mix {name}")
            if kind == "substance" and self._carried("thermometer"):
                acts.append(f"use thermometer on {name}")
        if "stove" in reach:
            acts.append("deactivate stove" if self.things["stove"]["on"] else "activate stove")
        target = self.task["target"]
        acts += [
            f"focus on {name}"
            for name, key in reach.items()
            if not (key == target and self.focused)
        ]
        return acts

    def sample_random_action(self) -> str:
        r"""Mostly ``\boxed{an available action}``; one time in ten a malformed reply."""
        if self.np_random.random() < 0.1:
            return self._pick(["go north", "\\boxed{}", "\\boxed{pick up the moon}", "wait"])
        return f"\\boxed{{{self._pick(self.available_actions())}}}"

    # ----- snapshots --------------------------------------------------------------------

    def _episode_state(self) -> dict[str, Any]:
        return copy.deepcopy({field: getattr(self, field) for field in _SNAPSHOT})

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        for field in _SNAPSHOT:
            setattr(self, field, copy.deepcopy(state[field]))


def solve(env: ScienceLabEnv) -> list[str]:
    """The commands that complete `env`'s task from its current state (a scripted plan).

    The plan is played on a copy of the env (the env itself is unchanged): walk through the
    hallway to each room it needs, opening doors on the way, then per task: fetch the
    substance's vessel (and the thermometer), focus, put the vessel on the stove or in the
    freezer, switch the stove on, wait for the change of state, measure, answer.
    """
    sim = copy.deepcopy(env)
    plan: list[str] = []

    def do(command: str) -> None:
        outcome = sim._execute(command)
        if not outcome.valid:
            raise RuntimeError(f"solve: {command!r} was refused: {outcome.text}")
        plan.append(command)

    def go(room: str) -> None:
        path = [room] if sim.room == HALLWAY or room == HALLWAY else [HALLWAY, room]
        for step in path if room != sim.room else []:
            if not sim.doors[sim._door(step)]:
                do(f"open door to {step}")
            do(f"go to {step}")

    def fetch(key: str) -> None:
        if sim.place(key) != "inventory":
            go(sim.place(key))
            do(f"pick up {key}")

    def wait_for(state: str, key: str) -> None:
        for _ in range(sim.max_turns):
            if sim._state(key) == state:
                return
            do("wait")
        raise RuntimeError(f"solve: the {key} never became {state}")

    task = sim.task
    kind, target = task["kind"], task["target"]
    if task["threshold"] is not None:
        fetch("thermometer")
    if kind == "mix" or kind.startswith("mix_"):
        first, second = task["ingredients"]
        fetch(sim.things[first]["where"])
        go(sim.place(second))
        do(f"put {sim.thing_name(first)} in {sim.things[second]['where']}")
        do(f"mix {sim.things[second]['where']}")
    else:
        go(sim.place(target))
        do(f"focus on {sim.thing_name(target)}")
    if kind != "mix" and kind != "measure":
        vessel = sim.things[target]["where"]
        device = "stove" if kind in ("heat", "mix_heat") else "freezer"
        fetch(vessel)
        go(sim.place(device))
        do(f"put {vessel} {'on' if device == 'stove' else 'in'} {device}")
        if device == "stove":
            do("activate stove")
        wait_for(task["goal"], target)
    if task["threshold"] is not None:
        do(f"use thermometer on {sim.thing_name(target)}")
        go(sim.place("red box"))
        do(f"focus on {'red' if sim.reading > task['threshold'] else 'blue'} box")
    elif kind == "mix":
        do(f"focus on {sim.thing_name(target)}")
    return plan
