r"""Crafting: a TextCraft-style recipe graph; get base materials, craft up to the goal item.

A text version of TextCraft (Prasad et al., "ADaPT", 2023; one of AgentGym-RL's families),
written from its published rules. Each episode draws a new world from `np_random`:

* a **goal item** at the top of a recipe tree of depth `depth` (depth 1: the goal is made
  from base materials; depth ``d``: at least one ingredient chain of ``d`` crafts). Items are
  invented from the word lists below: a *base material* is ``<material> <raw form>`` (``oak
  log``, ``tin ore``), a *refined item* is made from the base of its material (``oak
  planks``, ``tin wire``), a *product* from other items (``cedar lantern``);
* every recipe produces a fixed count of its target from fixed counts of 1 to
  `max_ingredients` ingredients. Each craftable item has exactly one recipe;
* `distractors` extra recipes that the goal does not need;
* `tags` ingredients written as a **kind** (``planks``) instead of an item: any item of that
  kind (``oak planks``, ``birch planks``) fits, and the world holds a second recipe for the
  kind (TextCraft's "generic ingredients may be replaced by specific types").

The first observation names the goal and lists every recipe (goal tree and distractors,
sorted) as a craft command; the inventory starts empty.

Commands (lower-case, whitespace collapsed, in the last ``\boxed{}``; `WorldEnv` reads them):

* ``get <count> <item>``: add `count` (1..`MAX_COUNT`) of a base material (an item no recipe
  makes) to the inventory.
* ``craft <count> <target> using <count> <ingredient>, ...``: apply a recipe: the listed
  counts, or all of them times the same whole number ``k`` (``k`` crafts in one turn). Each
  ingredient is named as a held item; a kind in the recipe takes any held item of the kind.
  The order of the ingredients is free.
* ``inventory``: list the held items. ``help`` (every world): list the admissible actions.

Invalid (nothing changes, reward ``0.0``, ``info["invalid_action"] = True``, the reply says
why): an unknown command, a count that is not a whole number 1..`MAX_COUNT`, an unknown
item, ``get`` of an item a recipe makes, ``craft`` of a base material or of an item no
recipe makes, ingredients or counts that do not fit the recipe, an ingredient not held in
that count, and any command that would leave more than `MAX_COUNT` of one item held.

Rewards: ``1.0`` on the turn the goal item is crafted (the episode terminates,
``info["correct"] = True``); every other turn ``0.0``. An episode's return is 0 or 1.

Observation after a step: the world's reply (``Got 2 oak log.``, ``Crafted 4 oak planks.``,
the inventory, or why the command is invalid) and the turns left. ``info``: the keys of
`xpgym.envs.world.common` (``turn``, ``correct``, ``invalid_action``, ``parsed_action``,
``available_actions``: ``inventory``, a ``get`` of every base material with room for it, and
every recipe that the held items allow now, counts as listed, in a stable order).

Presets (`DIFFICULTIES`; the AgentGym-RL test split is by depth 1..4):

=========  =====  ===========  ===========  ====  =========
preset     depth  ingredients  distractors  tags  max_turns
=========  =====  ===========  ===========  ====  =========
easy       1      1..2         2            0     10
(default)  2      1..3         3            1     20
hard       4      1..3         4            2     40
=========  =====  ===========  ===========  ====  =========

``"random"`` draws easy or hard at every reset. Every world is solvable: `solve` wins it in
at most ``max_turns // 2`` commands (the generator redraws until it does, and its last try
is a chain that always fits; `_validated` refuses settings where that chain may not).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import numpy as np

from xpgym.envs.common.presets import override_preset, resolve_presets
from xpgym.envs.world.common import Outcome, WorldEnv

__all__ = [
    "DIFFICULTIES",
    "MAX_COUNT",
    "SOLVED_REWARD",
    "CraftingEnv",
    "Recipe",
    "Settings",
    "World",
    "craft_command",
    "generate_world",
    "solve",
]

MAX_COUNT = 64
"""The most of one item the inventory holds, and the largest count a command takes."""
SOLVED_REWARD = 1.0

# kind of material: (materials, raw form of its base material, refined items made from it)
MATERIALS: dict[str, tuple[tuple[str, ...], str, tuple[str, ...]]] = {
    "wood": (
        ("oak", "birch", "cedar", "maple", "pine", "willow", "ash", "elm"),
        "log",
        ("planks", "stick", "beam", "board"),
    ),
    "metal": (
        ("iron", "copper", "tin", "silver", "gold", "zinc", "cobalt", "nickel"),
        "ore",
        ("ingot", "rod", "plate", "wire", "gear"),
    ),
    "stone": (
        ("granite", "marble", "slate", "basalt", "sandstone", "flint"),
        "rock",
        ("brick", "slab", "tile"),
    ),
    "fiber": (("cotton", "linen", "hemp", "wool", "silk", "jute"), "bale", ("thread", "rope")),
    "gem": (("quartz", "amber", "jade", "ruby", "topaz", "opal"), "shard", ("lens", "bead")),
}
PRODUCTS = (
    "lantern", "chest", "compass", "anvil", "loom", "clock", "telescope", "cart", "bell",
    "furnace", "pickaxe", "shield", "kettle", "sign", "barrel", "ladder", "helmet", "mill",
    "sextant", "drum", "crate", "hammer", "bucket", "saddle",
)  # fmt: skip
_BASES = [(kind, material) for kind, (names, _, _) in MATERIALS.items() for material in names]
_EXTRA_CRAFTED = 0.3  # chance that an ingredient past the first is itself crafted
_TRIES = 20  # redraws before the last, always-fitting chain

_NUMBER = r"(\d+)"
_GET = re.compile(rf"{_NUMBER} (.+)")
_CRAFT = re.compile(rf"{_NUMBER} (.+?) using (.+)")


class Settings(NamedTuple):
    """One world size (see the module docstring's table)."""

    depth: int
    max_ingredients: int
    distractors: int
    tags: int
    max_turns: int


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(depth=1, max_ingredients=2, distractors=2, tags=0, max_turns=10),
    "hard": Settings(depth=4, max_ingredients=3, distractors=4, tags=2, max_turns=40),
}
"""Presets selected by `CraftingEnv(difficulty=...)`."""

_DEFAULT = Settings(depth=2, max_ingredients=3, distractors=3, tags=1, max_turns=20)


def craft_command(target: str, count: int, ingredients: Iterable[tuple[str, int]]) -> str:
    """``craft <count> <target> using <n> <ingredient>, ...`` for ``(ingredient, n)`` pairs."""
    return f"craft {count} {target} using " + ", ".join(f"{n} {name}" for name, n in ingredients)


def noun(item: str) -> str:
    """The kind of an item: its last word (``oak planks`` is of kind ``planks``)."""
    return item.rsplit(" ", 1)[-1]


class Recipe(NamedTuple):
    """`count` of `target` from ``(item or kind, count)`` `ingredients`."""

    target: str
    count: int  # type: ignore[assignment]  # the field shadows tuple.count, as NamedTuple allows
    ingredients: tuple[tuple[str, int], ...]

    @property
    def text(self) -> str:
        """The recipe as the craft command that applies it once."""
        return craft_command(self.target, self.count, self.ingredients)


@dataclass
class World:
    """A crafting world: the goal, the recipes by target, and the kinds used as ingredients.

    Attributes:
        bases: The base materials (ingredients no recipe makes), sorted.
    """

    goal: str
    recipes: dict[str, Recipe]
    kinds: frozenset[str] = frozenset()
    bases: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        keys = {key for r in self.recipes.values() for key, _ in r.ingredients}
        self.bases = tuple(sorted(keys - self.kinds - set(self.recipes)))

    def fits(self, key: str, item: str) -> bool:
        """Whether `item` can stand for the recipe ingredient `key` (an item or a kind)."""
        if key in self.kinds:
            return noun(item) == key and item in self.recipes
        return item == key

    def resolve(self, key: str) -> str:
        """The item `solve` uses for `key`: itself, or the first item of the kind."""
        if key not in self.kinds:
            return key
        return min(item for item in self.recipes if noun(item) == key)

    def to_state(self) -> dict[str, Any]:
        """JSON-like copy (`from_state` inverts it)."""
        return {
            "goal": self.goal,
            "recipes": [
                [r.target, r.count, [list(i) for i in r.ingredients]] for r in self.recipes.values()
            ],
            "kinds": sorted(self.kinds),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> World:
        recipes = {
            target: Recipe(target, count, tuple((key, n) for key, n in ingredients))
            for target, count, ingredients in state["recipes"]
        }
        return cls(state["goal"], recipes, frozenset(state["kinds"]))


def _plan(world: World) -> tuple[Counter[str], list[tuple[str, int]]]:
    """What `solve` does: the amount of each item needed, and ``(item, crafts)`` in the order
    to craft them (ingredients first)."""
    order: list[str] = []

    def visit(item: str) -> None:
        if item in world.recipes and item not in order:
            for key, _ in world.recipes[item].ingredients:
                visit(world.resolve(key))
            order.append(item)

    visit(world.goal)
    need: Counter[str] = Counter({world.goal: 1})
    crafts = []
    for item in reversed(order):  # every item before its ingredients
        recipe = world.recipes[item]
        times = -(-need[item] // recipe.count)
        crafts.append((item, times))
        for key, n in recipe.ingredients:
            need[world.resolve(key)] += times * n
    return need, crafts[::-1]


def solve(world: World) -> list[str]:
    """Commands that craft the goal from an empty inventory: one ``get`` per base material
    needed (its whole amount), then one ``craft`` per item (all its crafts at once),
    ingredients before the items made from them. Kinds take `World.resolve`'s item."""
    need, crafts = _plan(world)
    commands = [f"get {need[item]} {item}" for item in sorted(need) if item not in world.recipes]
    for item, times in crafts:
        recipe = world.recipes[item]
        used = [(world.resolve(key), times * n) for key, n in recipe.ingredients]
        commands.append(craft_command(item, times * recipe.count, used))
    return commands


def _plan_fits(world: World, max_commands: int) -> bool:
    need, crafts = _plan(world)
    made = (times * world.recipes[item].count for item, times in crafts)
    return len(need) <= max_commands and max(*need.values(), *made) <= MAX_COUNT


class _Drawer:
    """Draws one world's items and recipes from `rng` (`generate_world` uses it)."""

    def __init__(self, rng: np.random.Generator, settings: Settings, chain: bool) -> None:
        self.rng, self.settings, self.chain = rng, settings, chain
        picks = rng.choice(len(_BASES), settings.max_ingredients + settings.depth, replace=False)
        self.pool = [_BASES[i] for i in sorted(picks)]
        self.recipes: dict[str, Recipe] = {}
        self.refined: set[str] = set()
        self.used = {f"{m} {MATERIALS[k][1]}" for k, m in _BASES}

    def pick(self, options: Sequence[Any]) -> Any:
        return options[int(self.rng.integers(len(options)))]

    def count(self, options: tuple[int, ...]) -> int:
        return 1 if self.chain else int(self.pick(options))

    def base(self) -> str:
        kind, material = self.pick(self.pool)
        return f"{material} {MATERIALS[kind][1]}"

    def add(self, target: str, first: str, others: list[str], count: int) -> str:
        """Record a recipe for `target` from `first` and `others` (repeats dropped)."""
        keys = list(dict.fromkeys([first, *others]))
        ingredients = tuple((key, self.count((1, 1, 2, 3))) for key in keys)
        self.recipes[target] = Recipe(target, count, ingredients)
        self.used.add(target)
        return target

    def extra_bases(self) -> list[str]:
        return [self.base() for _ in range(int(self.rng.integers(self.settings.max_ingredients)))]

    def refined_item(self, base: tuple[str, str] | None = None) -> str:
        """A refined item made from its material's base (from the pool unless given)."""
        choices = [
            (kind, material, f"{material} {form}")
            for kind, material in ([base] if base else self.pool)
            for form in MATERIALS[kind][2]
            if f"{material} {form}" not in self.used
        ]
        if not choices:  # every refined name of the pool is taken: use any material
            return self.refined_item(self.pick(_BASES))
        kind, material, name = self.pick(choices)
        self.refined.add(name)
        return self.add(
            name, f"{material} {MATERIALS[kind][1]}", self.extra_bases(), self.count((1, 2, 4))
        )

    def product_name(self) -> str:
        while True:
            name = f"{self.pick(_BASES)[1]} {self.pick(PRODUCTS)}"
            if name not in self.used:
                return name

    def item(self, depth: int) -> str:
        """A new item `depth` crafts above the base materials, with its whole recipe tree."""
        if depth == 1:
            return self.refined_item()
        name = self.product_name()
        self.used.add(name)  # reserve it before the ingredients draw names
        others = []
        for _ in range(int(self.rng.integers(self.settings.max_ingredients))):
            crafted = not self.chain and self.rng.random() < _EXTRA_CRAFTED
            others.append(self.item(int(self.rng.integers(1, depth))) if crafted else self.base())
        return self.add(name, self.item(depth - 1), others, self.count((1, 1, 2)))

    def tag(self, target: str) -> None:
        """Write one refined ingredient of `target` as its kind and add a second recipe for
        the kind; no-op if none can be."""
        recipe = self.recipes[target]
        nouns = Counter(noun(key) for key, _ in recipe.ingredients)
        slots = [
            i
            for i, (key, _) in enumerate(recipe.ingredients)
            if key in self.refined and nouns[noun(key)] == 1
        ]
        if not slots:
            return
        i = self.pick(slots)
        key, n = recipe.ingredients[i]
        kind = next(k for k, (_, _, forms) in MATERIALS.items() if noun(key) in forms)
        others = [(kind, m) for m in MATERIALS[kind][0] if f"{m} {noun(key)}" not in self.used]
        if not others:
            return
        _, material = self.pick(others)
        alternative = f"{material} {noun(key)}"
        source = self.recipes[key]
        base = f"{material} {MATERIALS[kind][1]}"
        rest = tuple(i for i in source.ingredients[1:] if i[0] != base)
        self.recipes[alternative] = source._replace(
            target=alternative, ingredients=((base, source.ingredients[0][1]), *rest)
        )
        self.used.add(alternative)
        self.refined.add(alternative)
        ingredients = list(recipe.ingredients)
        ingredients[i] = (noun(key), n)
        self.recipes[target] = recipe._replace(ingredients=tuple(ingredients))

    def distractor(self) -> None:
        if self.rng.random() < 0.5:
            self.refined_item(self.pick(_BASES))
        else:
            name = self.product_name()
            self.add(name, self.base(), self.extra_bases(), self.count((1, 2)))


def generate_world(rng: np.random.Generator, settings: Settings) -> World:
    """A world for `settings` drawn from `rng` that `solve` wins in ``max_turns // 2``
    commands with every count within `MAX_COUNT` (see the module docstring)."""
    for attempt in range(_TRIES + 1):
        drawer = _Drawer(rng, settings, chain=attempt == _TRIES)
        goal = drawer.item(settings.depth)
        products = sorted(t for t in drawer.recipes if t not in drawer.refined)
        for _ in range(settings.tags if products else 0):  # depth 1: no product to tag
            drawer.tag(drawer.pick(products))
        for _ in range(settings.distractors):
            drawer.distractor()
        kinds = frozenset(
            noun(k) for r in drawer.recipes.values() for k, _ in r.ingredients if " " not in k
        )
        world = World(goal, dict(sorted(drawer.recipes.items())), kinds)
        if _plan_fits(world, settings.max_turns // 2):
            return world
    raise RuntimeError(f"no world fits {settings}; _validated should have refused it")


def _count(text: str) -> int | None:
    """`text` as a count 1..`MAX_COUNT`, else `None` (never parses a huge number)."""
    return int(text) if len(text) <= 3 and 1 <= int(text) <= MAX_COUNT else None


def _quote(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _listing(items: dict[str, int]) -> str:
    return ", ".join(f"{n} {item}" for item, n in sorted(items.items())) or "nothing"


class CraftingEnv(WorldEnv[Settings]):
    r"""Craft the goal item from base materials through a recipe tree (module docstring).

    Args:
        depth: Crafts from the base materials up to the goal (1..8).
        max_ingredients: Most ingredients of one recipe (1..4).
        distractors: Recipes the goal does not need (0..10).
        tags: Ingredients written as a kind, e.g. ``planks`` (0..3).
        max_turns: Turns before truncation (at least twice the longest plan these settings
            guarantee, see `_validated`).
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"``; a preset from
            `DIFFICULTIES` gives the defaults, numbers passed explicitly replace its own.

    Attributes:
        world: This episode's `World`. inventory: Held items and counts (no zero entries).

    Raises:
        ValueError: unknown difficulty or a number out of its range. TypeError: not an int.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(
        self,
        depth: int | None = None,
        max_ingredients: int | None = None,
        distractors: int | None = None,
        tags: int | None = None,
        max_turns: int | None = None,
        difficulty: str | None = None,
    ) -> None:
        given = (depth, max_ingredients, distractors, tags, max_turns)
        presets = resolve_presets(difficulty, DIFFICULTIES, _DEFAULT)
        super().__init__(
            difficulty, {name: _validated(preset, given) for name, preset in presets.items()}
        )
        self.world = World("", {})
        self.inventory: dict[str, int] = {}

    def _apply_preset(self, settings: Settings) -> None:
        self.settings = settings
        self.max_turns = settings.max_turns

    def _generate(self) -> str:
        self.world = generate_world(self.np_random, self.settings)
        self.inventory = {}
        recipes = "\n".join(f"  {r.text}" for r in sorted(self.world.recipes.values()))
        text = (
            f"Crafting. Goal: craft {self.world.goal}. Recipes:\n{recipes}\n"
            "Commands: 'get <count> <item>' takes a base material (an item no recipe makes); "
            "'craft <count> <item> using <count> <ingredient>, ...' applies a recipe as "
            "listed, or with all its counts times the same whole number; 'inventory' lists "
            f"what you hold (nothing yet). You can hold at most {MAX_COUNT} of each item."
        )
        if self.world.kinds:
            kind = min(self.world.kinds)
            example = self.world.resolve(kind)
            text += (
                f" A kind alone in a recipe (such as '{kind}') takes any item of that kind "
                f"(such as '{example}'): name the item you use."
            )
        return text

    def _execute(self, command: str) -> Outcome:
        verb, _, rest = command.partition(" ")
        if command == "inventory":
            return Outcome(f"Inventory: {_listing(self.inventory)}.")
        if verb == "get":
            return self._get(rest)
        if verb == "craft":
            return self._craft(rest)
        return Outcome(
            f"Unknown command {_quote(command)}: use get, craft or inventory.", valid=False
        )

    def _invalid_item(self, item: str, action: str) -> Outcome:
        """Why `item` cannot be the object of `action` (``get`` or ``craft``)."""
        if item in self.world.kinds:
            example = self.world.resolve(item)
            why = f"{item!r} is a kind of item: name the item you mean, e.g. {example!r}."
        elif action == "get" and item in self.world.recipes:
            why = f"{item!r} is not a base material: craft it."
        elif action == "craft" and item in self.world.bases:
            why = f"{item!r} is a base material: get it."
        else:
            why = f"Unknown item {_quote(item)}."
        return Outcome(why, valid=False)

    def _room_for(self, item: str, count: int) -> bool:
        return self.inventory.get(item, 0) + count <= MAX_COUNT

    def _get(self, rest: str) -> Outcome:
        found = _GET.fullmatch(rest)
        if found is None:
            return Outcome("Write 'get <count> <item>', e.g. 'get 1 oak log'.", valid=False)
        count, item = _count(found[1]), found[2]
        if count is None:
            return Outcome(f"The count must be a whole number 1..{MAX_COUNT}.", valid=False)
        if item not in self.world.bases:
            return self._invalid_item(item, "get")
        if not self._room_for(item, count):
            return Outcome(f"You can hold at most {MAX_COUNT} {item}.", valid=False)
        self.inventory[item] = self.inventory.get(item, 0) + count
        return Outcome(f"Got {count} {item}.")

    def _craft(self, rest: str) -> Outcome:
        found = _CRAFT.fullmatch(rest)
        matches = [_GET.fullmatch(p.strip()) for p in found[3].split(",")] if found else [None]
        parts = [m for m in matches if m is not None]
        if found is None or len(parts) < len(matches):
            return Outcome(
                "Write 'craft <count> <item> using <count> <ingredient>, ...', as in the recipes.",
                valid=False,
            )
        given = [_count(found[1]), *(_count(p[1]) for p in parts)]
        counts = [n for n in given if n is not None]
        if len(counts) < len(given):
            return Outcome(f"Counts must be whole numbers 1..{MAX_COUNT}.", valid=False)
        target = found[2]
        recipe = self.world.recipes.get(target)
        if recipe is None:
            return self._invalid_item(target, "craft")
        used = [(p[2], n) for p, n in zip(parts, counts[1:], strict=True)]
        times = counts[0] // recipe.count
        if counts[0] % recipe.count or not self._fits_recipe(recipe, used, times):
            return Outcome(
                f"That does not follow the recipe '{recipe.text}' (or all its counts times "
                "the same whole number).",
                valid=False,
            )
        for item, n in used:
            if self.inventory.get(item, 0) < n:
                have = self.inventory.get(item, 0)
                return Outcome(f"You need {n} {item} and have {have}.", valid=False)
        if not self._room_for(target, counts[0]):
            return Outcome(f"You can hold at most {MAX_COUNT} {target}.", valid=False)
        for item, n in used:
            self.inventory[item] -= n
            if not self.inventory[item]:
                del self.inventory[item]
        self.inventory[target] = self.inventory.get(target, 0) + counts[0]
        if target == self.world.goal:
            return Outcome(
                f"Crafted {counts[0]} {target}: that is the goal!",
                reward=SOLVED_REWARD,
                done=True,
                correct=True,
            )
        return Outcome(f"Crafted {counts[0]} {target}.")

    def _fits_recipe(self, recipe: Recipe, used: list[tuple[str, int]], times: int) -> bool:
        """Whether `used` names one fitting item per ingredient of `recipe`, in `times` its
        counts (any order)."""
        if len(used) != len(recipe.ingredients) or len({item for item, _ in used}) != len(used):
            return False
        wanted = dict(recipe.ingredients)
        for item, n in used:
            key = next((k for k in wanted if self.world.fits(k, item)), None)
            if key is None or wanted.pop(key) * times != n:
                return False
        return True

    def available_actions(self) -> list[str]:
        """``inventory``; ``get <n> <base>`` for every base material with room for ``n``
        (the most any recipe takes of it); every recipe applicable once now, a kind filled
        by each held item of the kind. Stable order: as listed, bases and recipes sorted."""
        takes: Counter[str] = Counter()
        for recipe in self.world.recipes.values():
            for key, n in recipe.ingredients:
                takes[key] = max(takes[key], n)
        actions = ["inventory"]
        actions += [f"get {takes[b]} {b}" for b in self.world.bases if self._room_for(b, takes[b])]
        for target, recipe in self.world.recipes.items():
            if not self._room_for(target, recipe.count):
                continue
            options = [
                [
                    item
                    for item in sorted(self.inventory)
                    if self.inventory[item] >= n and self.world.fits(key, item)
                ]
                for key, n in recipe.ingredients
            ]
            for items in itertools.product(*options):
                counts = (n for _, n in recipe.ingredients)
                actions.append(craft_command(target, recipe.count, zip(items, counts, strict=True)))
        return actions

    def sample_random_action(self) -> str:
        r"""``\boxed{}`` of an available action drawn from `np_random` 8 times in 10; else an
        invalid command in a box (a bad count, ``get`` of the goal, an unknown ingredient or
        verb) or, 1 time in 20, an available action without a box."""
        actions = self.available_actions()
        draw = float(self.np_random.random())
        action = actions[int(self.np_random.integers(len(actions)))]
        if draw < 0.8:
            return f"\\boxed{{{action}}}"
        if draw >= 0.95:
            return action
        goal = self.world.goal
        junk = [f"get 0 {goal}", f"get 1 {goal}", f"craft 1 {goal} using 1 nothing", "mine"]
        return f"\\boxed{{{junk[int(self.np_random.integers(len(junk)))]}}}"

    def _episode_state(self) -> dict[str, Any]:
        """For `get_state()`: the world and the inventory (fresh, JSON-like)."""
        return {"world": self.world.to_state(), "inventory": dict(self.inventory)}

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        self.world = World.from_state(state["world"])
        self.inventory = dict(state["inventory"])


def _validated(preset: Settings, given: Sequence[int | None]) -> Settings:
    settings = override_preset(preset, given, "CraftingEnv")
    ranges = {"depth": (1, 8), "max_ingredients": (1, 4), "distractors": (0, 10), "tags": (0, 3)}
    for name, (low, high) in ranges.items():
        value = getattr(settings, name)
        if not low <= value <= high:
            raise ValueError(f"CraftingEnv: {name} must be {low}..{high}, got {value}")
    # the last draw is a chain: depth crafts, the pool's bases, and each kind's bases
    longest = settings.depth * 2 + settings.max_ingredients * (1 + settings.tags)
    if settings.max_turns < 2 * longest:
        raise ValueError(
            f"CraftingEnv: max_turns must be >= {2 * longest} for these settings (twice the "
            f"longest plan they guarantee), got {settings.max_turns}"
        )
    return settings
