"""xpgym envs as Gymnasium envs, and text Gymnasium envs as xpgym envs.

* `XpgymToGymnasium` (or ``gymnasium.make(gymnasium_id(<id>))``): an xpgym `Env` as a
  `gymnasium.Env` with `gymnasium.spaces.Text` observation and action spaces
  (`xpgym.compat.common`). `reset(seed=...)`, `terminated`/`truncated` and `info` are the
  xpgym env's, unchanged; the bridge's `np_random` *is* the xpgym env's generator.
* `GymnasiumToXpgym` (`from_gymnasium`): a `gymnasium.Env` whose observations and actions are
  `str` as an xpgym `Env`.

Importing this module registers every xpgym id (families such as ``rg:`` included when their
package is installed) with Gymnasium under `gymnasium_id`: ``"xpgym/<id>"`` with the ``":"``
after the category written ``"."`` (``game:Wordle-v0-easy`` is ``xpgym/game.Wordle-v0-easy``),
because `gymnasium.make` reads a ``":"`` as ``"module:id"``. That reading also works:
``gymnasium.make("xpgym.compat.gymnasium:xpgym/game.Wordle-v0")`` imports this module first.
Call `register_gymnasium_envs` again for ids registered later. Where Gymnasium's `check_env`
and xpgym's semantics differ, docs/compat.md says how and why.
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from xpgym.compat.common import (
    MAX_ACTION_LENGTH,
    MAX_OBSERVATION_LENGTH,
    TEXT_CHARSET,
    bridged_env,
    text_space,
)
from xpgym.core.env import Env
from xpgym.core.multiagent import MultiAgentEnv
from xpgym.core.optional import import_optional
from xpgym.core.registry import list_envs

if TYPE_CHECKING:
    import gymnasium
else:
    gymnasium = import_optional(
        "gymnasium", needed_by="xpgym.compat.gymnasium", install='pip install "xpgym[compat]"'
    )

__all__ = [
    "NAMESPACE",
    "GymnasiumToXpgym",
    "XpgymToGymnasium",
    "from_gymnasium",
    "gymnasium_id",
    "register_gymnasium_envs",
]

logger = logging.getLogger(__name__)

NAMESPACE = "xpgym"
"""Gymnasium namespace of the registered ids: ``gymnasium.make("xpgym/game.Wordle-v0")``."""


def gymnasium_id(env_id: str) -> str:
    """The Gymnasium id of the xpgym id `env_id`, e.g. ``"xpgym/game.Wordle-v0"``.

    The ``":"`` after the category becomes ``"."``; a category has no ``"."``, so the first
    ``"."`` after the namespace always marks it.
    """
    return f"{NAMESPACE}/{env_id.replace(':', '.', 1)}"


class XpgymToGymnasium(gymnasium.Env[str, str]):
    """An xpgym `Env` seen through the `gymnasium.Env` API.

    `reset` and `step` are the xpgym env's, with `reward` a `float` and the flags `bool`s.
    Observations and actions are `str`; the spaces are `Text` spaces of `charset` up to the
    given lengths (text outside them is passed through, see `xpgym.compat.common`).
    Randomness: `np_random` is the xpgym env's own generator, so ``reset(seed=s)`` gives the
    xpgym episode of seed `s`. ``render_mode="ansi"`` makes `render()` return the last
    observation.

    Args:
        env: An xpgym `Env`, or a registered single-agent id to `xpgym.make`.
        render_mode: ``None`` or ``"ansi"``.
        charset: Characters of both spaces.
        max_observation_length: Longest observation in `observation_space`.
        max_action_length: Longest action in `action_space` (and `action_space.sample()`).
        **make_kwargs: Keyword arguments for `xpgym.make` when `env` is an id.

    Raises:
        TypeError: `env` is a `MultiAgentEnv` (use `xpgym.compat.pettingzoo`), or neither an
            xpgym `Env` nor an id, or `make_kwargs` are given with an env instance.
        ValueError: `render_mode` is not ``None`` or ``"ansi"``.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}  # type: ignore[misc]  # gymnasium.Env omits the ClassVar

    def __init__(
        self,
        env: Env | str,
        *,
        render_mode: str | None = None,
        charset: str = TEXT_CHARSET,
        max_observation_length: int = MAX_OBSERVATION_LENGTH,
        max_action_length: int = MAX_ACTION_LENGTH,
        **make_kwargs: Any,
    ) -> None:
        bridged = bridged_env(env, make_kwargs)
        if isinstance(bridged, MultiAgentEnv):
            raise TypeError(
                f"{bridged} is a MultiAgentEnv; bridge it with "
                "xpgym.compat.pettingzoo.to_pettingzoo"
            )
        if not isinstance(bridged, Env):
            raise TypeError(f"XpgymToGymnasium needs an xpgym Env or env id, got {bridged!r:.80}")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.xpgym_env = bridged
        self.render_mode = render_mode
        self.observation_space = text_space(max_observation_length, charset)
        self.action_space = text_space(max_action_length, charset)
        self._last_observation: str | None = None

    # Gymnasium's Env keeps its generator in `_np_random` (and its checker reads that name);
    # here it is the xpgym env's, so there is one stream, seeded by the xpgym env's reset.
    @property
    def _np_random(self) -> np.random.Generator:
        return self.xpgym_env.np_random

    @_np_random.setter
    def _np_random(self, value: np.random.Generator) -> None:
        self.xpgym_env.np_random = value

    @property
    def np_random_seed(self) -> int:
        """The seed of the xpgym env's generator (`-1` if one was assigned directly)."""
        seed = self.xpgym_env.np_random_seed
        return -1 if seed is None else seed

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode: the xpgym env's ``reset(seed=seed, options=options)``."""
        observation, info = self.xpgym_env.reset(seed=seed, options=options)
        self._last_observation = observation
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply the text `action`: the xpgym env's `step`, reward as `float`, flags as `bool`.

        Stepping after the episode ended raises xpgym's `EpisodeFinishedError`.
        """
        observation, reward, terminated, truncated, info = self.xpgym_env.step(action)
        self._last_observation = observation
        return observation, float(reward), bool(terminated), bool(truncated), info

    def render(self) -> str | None:
        """The last observation when ``render_mode == "ansi"``, else `None`."""
        return self._last_observation if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Close the xpgym env (idempotent)."""
        self.xpgym_env.close()

    def __str__(self) -> str:
        return f"<XpgymToGymnasium{self.xpgym_env}>"


class GymnasiumToXpgym(Env[str]):
    """A `gymnasium.Env` with text observations and actions seen through the xpgym `Env` API.

    * `reset`/`step` are the Gymnasium env's, with `reward` a `float` and flags `bool`s; the
      xpgym lifecycle checks apply (step before reset or after the end raises).
    * `np_random` is the Gymnasium env's generator.
    * `sample_random_action()` samples the Gymnasium env's `action_space`, which is reseeded
      by every ``reset(seed=s)`` (with `s`), so seeded episodes repeat with their actions.
    * `get_state()` is a deep copy of the whole Gymnasium env (spaces and generators
      included); `set_state` continues from another copy of it. Envs holding processes,
      sockets or other uncopyable resources cannot be snapshotted (`TypeError`).

    Args:
        env: The Gymnasium env (wrapped or not). Its observations must be `str`.

    Raises:
        TypeError: `env` is not a `gymnasium.Env`.
    """

    def __init__(self, env: gymnasium.Env) -> None:
        if not isinstance(env, gymnasium.Env):
            raise TypeError(f"from_gymnasium needs a gymnasium.Env, got {type(env).__name__}")
        self.gymnasium_env = env

    @property
    def np_random(self) -> np.random.Generator:
        return self.gymnasium_env.np_random

    @np_random.setter
    def np_random(self, value: np.random.Generator) -> None:
        self.gymnasium_env.np_random = value

    @property
    def np_random_seed(self) -> int | None:
        return self.gymnasium_env.np_random_seed

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        observation, info = self.gymnasium_env.reset(seed=seed, options=options)
        if seed is not None:
            self.gymnasium_env.action_space.seed(seed)
        return self._text(observation, "reset()"), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.gymnasium_env.step(action)
        return (
            self._text(observation, "step()"),
            float(reward),
            bool(terminated),
            bool(truncated),
            info,
        )

    def sample_random_action(self) -> str:
        return self._text(self.gymnasium_env.action_space.sample(), "action_space.sample()")

    def get_state(self) -> dict[str, Any]:
        return {"gymnasium_env": copy.deepcopy(self.gymnasium_env)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.gymnasium_env = copy.deepcopy(state["gymnasium_env"])

    def close(self) -> None:
        self.gymnasium_env.close()

    def _text(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise TypeError(
                f"{self}: the Gymnasium env's {where} gave {type(value).__name__}, not str; "
                "only text envs (Text spaces) can be xpgym envs"
            )
        return value

    def __str__(self) -> str:
        return f"<GymnasiumToXpgym{self.gymnasium_env}>"


def from_gymnasium(env: gymnasium.Env) -> GymnasiumToXpgym:
    """The text `gymnasium.Env` `env` as an xpgym `Env` (see `GymnasiumToXpgym`)."""
    return GymnasiumToXpgym(env)


def register_gymnasium_envs(*, include_families: bool = True) -> list[str]:
    """Register every xpgym id not yet known to Gymnasium, under its `gymnasium_id`.

    Multi-agent ids are registered too; `gymnasium.make` of one raises `TypeError` pointing at
    `xpgym.compat.pettingzoo`. Safe to call again (after `xpgym.register`, say).

    Args:
        include_families: Also register the ids of lazy families (``rg:``), which imports
            their packages; families whose package is missing are left out.

    Returns:
        The Gymnasium ids this call registered.
    """
    added = []
    for env_id in list_envs(include_families=include_families):
        name = gymnasium_id(env_id)
        if name in gymnasium.registry:
            continue
        gymnasium.register(
            name,
            entry_point=f"{__name__}:XpgymToGymnasium",
            kwargs={"env": env_id},
        )
        added.append(name)
    logger.debug("registered %d xpgym ids with gymnasium", len(added))
    return added


register_gymnasium_envs()
