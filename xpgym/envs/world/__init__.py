"""Long-horizon text worlds (AgentGym-RL's decision-making families, from their published
rules). Ids: ``world:<Name>-v0[-easy|-hard|-random]``.

* ``world:Crafting``: a TextCraft-style recipe graph, inventory and goal item
  (`xpgym.envs.world.crafting`);
* ``world:GridWorld``: a BabyAI-style grid of rooms, doors, keys and objects seen in part
  (`xpgym.envs.world.gridworld`);
* ``world:ScienceLab``: SciWorld-style heat / cool / measure / mix tasks with sub-goal
  credit (`xpgym.envs.world.science_lab`).

Every world lists its admissible actions (`Env.available_actions`, and as the
``available_actions`` tool in the ``world:<Name>-v0-actions`` variants), has a solver that wins
every seed, and shares the turn loop of `xpgym.envs.world.common`. The rules, sources and
differences from the originals: docs/envs.md.
"""

from __future__ import annotations

from xpgym.core.wrappers.tool_variants import register_tool_variant
from xpgym.envs.common.presets import register_presets

_ACTIONS_TOOL = "xpgym.core.tools.available_actions:available_actions_tools"


def register_envs() -> None:
    """Register the world ids; entry points are imported only by `xpgym.make`."""
    register_presets(
        "world",
        "Crafting",
        "xpgym.envs.world.crafting:CraftingEnv",
        "Craft a goal item through a depth-2 recipe tree (3 distractor recipes, 1 generic "
        "ingredient); 20 turns.",
        "Craft a goal item from base materials (a depth-1 recipe, 2 distractors); 10 turns.",
        "Craft a goal item through a depth-4 recipe tree (4 distractor recipes, 2 generic "
        "ingredients); 40 turns.",
    )
    register_presets(
        "world",
        "GridWorld",
        "xpgym.envs.world.gridworld:GridWorldEnv",
        "Go to, pick up or open a door across two rooms joined by a closed door; 20 turns.",
        "Go to an object in one room; 10 turns.",
        "Put an object next to another across three rooms, one door locked (fetch its key); "
        "40 turns.",
    )
    register_presets(
        "world",
        "ScienceLab",
        "xpgym.envs.world.science_lab:ScienceLabEnv",
        "Heat, cool, measure or mix across 2-3 rooms, with sub-goal credit; 20 turns.",
        "One short lab task (heat or measure) in one room, with sub-goal credit; 12 turns.",
        "Mix, then boil or freeze and measure, across 4 rooms, with sub-goal credit; 30 turns.",
    )
    for name in ("Crafting", "GridWorld", "ScienceLab"):
        register_tool_variant(f"world:{name}-v0", _ACTIONS_TOOL, "actions", max_tool_calls=20)
