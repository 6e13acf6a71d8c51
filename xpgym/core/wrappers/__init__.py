"""Wrappers, grouped by what they change.

* `observation`: what the model sees: `LastObservation`, `ObservationHistory`,
  `ObservationActionHistory`, `ChatMessages`, `ChatTemplate`.
* `limits`: when an episode is cut short: `MaxTurns`, and `HorizonSchedule` (the
  ScalingInter-RL turn curriculum) with `PiecewiseTurnSchedule` / `LinearTurnSchedule`.
* `statistics`: what is measured: `EpisodeStatistics` (``info["episode"]``).
* `tools`: ``ToolEnvWrapper`` adds `xpgym.core.tools` tools to any env. A tool turn marks
  ``info["tool_calls"]`` (a count or a list of calls) and puts the call text in
  ``info["parsed_action"]``, so the wrappers above label its output with the ``"tool"``
  chat role, record the call instead of the raw text, and count the calls in
  ``info["episode"]["tool_calls"]``.
* `rewards`: `RewardWrapper` computes reward functions (`xpgym.core.rewards`) on each step,
  aggregates them over the trajectory (sum, last, max), adds a format reward and reports
  ``info["metrics"]``.
* `tool_variants`: `register_tool_variant` registers ``<base id>-<toolset>`` ids whose envs
  are the base env in a ``ToolEnvWrapper`` with fresh tools.

Usual order, innermost first: tools, limits, rewards, observation, statistics, e.g.
``EpisodeStatistics(ChatTemplate(RewardWrapper(MaxTurns(ToolEnvWrapper(env, ...), 10),
[fn]), tokenizer))``.
Every wrapper keeps its state in `get_wrapper_state`, so ``get_state()`` of the whole stack
restores history, counters and schedules together.
"""

from xpgym.core.wrappers.limits import (
    HorizonSchedule,
    LinearTurnSchedule,
    MaxTurns,
    PiecewiseTurnSchedule,
)
from xpgym.core.wrappers.observation import (
    ChatMessages,
    ChatTemplate,
    LastObservation,
    ObservationActionHistory,
    ObservationHistory,
)
from xpgym.core.wrappers.rewards import RewardWrapper
from xpgym.core.wrappers.statistics import EpisodeStatistics, count_tool_calls
from xpgym.core.wrappers.tools import ToolEnvWrapper

__all__ = [
    "ChatMessages",
    "ChatTemplate",
    "EpisodeStatistics",
    "HorizonSchedule",
    "LastObservation",
    "LinearTurnSchedule",
    "MaxTurns",
    "ObservationActionHistory",
    "ObservationHistory",
    "PiecewiseTurnSchedule",
    "RewardWrapper",
    "ToolEnvWrapper",
    "count_tool_calls",
]
