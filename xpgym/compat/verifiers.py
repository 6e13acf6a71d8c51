"""xpgym envs as verifiers environments (verifiers 0.4, ``verifiers.v1``).

`load_environment(env_id, seeds=...)` returns a verifiers `Env` whose episodes are xpgym
episodes: the env plays the user, the model plays the agent.

* The dataset (`XpgymTaskset`) is one task per seed: the prompt is the first observation of
  ``reset(seed=seed)``, the task data carries the env id, the seed and `xpgym.make`'s
  keyword arguments.
* An episode (`XpgymEnv.run`) makes its own xpgym env (concurrent rollouts never share one),
  resets it with the task's seed, and opens the model's interaction: the model speaks first
  (the first observation is its prompt), each reply is one `step` (the reply's raw text is
  the action), each observation goes back as the next user message, until the episode
  ends. The env is closed when the episode ends, however it ends.
* The reward is the episode's return, recorded on the trace as the reward ``"return"``;
  verifiers' score (`Trace.reward`) is that return. The episode's end is kept on the trace:
  `Trace.stop_condition` is ``"terminated"``, ``"truncated"`` or ``"infra_error"`` when the
  xpgym env ended it (verifiers' own conditions, e.g. a turn limit, otherwise), and
  ``trace.info["xpgym"]`` is an `EpisodeSummary` as a dict.
* Infrastructure failures (`xpgym.core.errors`: a `step` that raises, or a step whose info
  carries the marker) end the episode and fail the trace (`Trace.ok` false, the cause in
  `Trace.errors` as an `InfraError`), so the episode is not `ok` either: verifiers counts it
  as an errored rollout and ``vf-eval --resume`` plays it again (`Env.complete`), the
  counterpart of xpgym's ``outcome == "infra_error"``.
* The model is reached through verifiers' interception server like any verifiers harness;
  the bundled `XpgymChatHarness` makes one chat completion per turn, in process, with no
  tools, so a rollout needs no sandbox and no network besides the model's endpoint.

verifiers loads a taskset by the name of an installed top-level package (``--env.taskset.id``),
so the plugin is published as the package ``xpgym_verifiers`` (`TASKSET_ID`), which exports
this module's `XpgymTaskset`, `XpgymEnv` and `XpgymChatHarness`; verifiers' own command line
runs it too: ``vf-eval xpgym_verifiers --env.taskset.env game:Wordle-v0 ...``.

verifiers 0.4 pins versions of mcp and openai that xpgym's other extras exclude: install it
in a venv of its own (scripts/setup.sh builds one, ``.venv/interop/verifiers``). Only text
observations are supported. Nothing here is imported by ``import xpgym``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from xpgym.compat.common import bridged_env
from xpgym.core.env import Env, EnvCore
from xpgym.core.errors import (
    INFRA_ERROR_KEY,
    InfraCause,
    InfraError,
    find_infra_cause,
    step_failure_info,
)
from xpgym.core.optional import import_optional

if TYPE_CHECKING:
    import openai
    import verifiers.v1 as vf
    from pydantic import Field
    from verifiers.v1.dialects.chat import message_to_wire
    from verifiers.v1.runtimes import ProgramResult
else:
    _INSTALL = (
        'pip install "verifiers==0.4.*" in a venv of its own (it pins mcp and openai versions '
        "that xpgym's other extras exclude; scripts/setup.sh builds .venv/interop/verifiers)"
    )
    vf = import_optional("verifiers.v1", needed_by="xpgym.compat.verifiers", install=_INSTALL)
    import openai  # openai and pydantic are dependencies of verifiers
    from pydantic import Field
    from verifiers.v1.dialects.chat import message_to_wire
    from verifiers.v1.runtimes import ProgramResult

__all__ = [
    "TASKSET_ID",
    "EpisodeSummary",
    "XpgymChatHarness",
    "XpgymChatHarnessConfig",
    "XpgymEnv",
    "XpgymEnvConfig",
    "XpgymTask",
    "XpgymTaskData",
    "XpgymTaskset",
    "XpgymTasksetConfig",
    "load_environment",
]

logger = logging.getLogger(__name__)

TASKSET_ID = "xpgym_verifiers"
"""The taskset id verifiers loads this plugin by (``--env.taskset.id``): the top-level
package ``xpgym_verifiers``, which exports this module's plugin classes."""

RETURN_REWARD = "return"
"""The name of the reward the episode's return is recorded under (`Trace.rewards`)."""


class XpgymTasksetConfig(vf.TasksetConfig):
    """Which xpgym episodes the taskset holds (``--env.taskset.*`` on verifiers' command line).

    Attributes:
        env: The xpgym id, e.g. ``"game:Wordle-v0"`` (single-agent, text observations).
        seeds: One task per seed, in this order.
        make_kwargs: Keyword arguments for `xpgym.make`.
        system_prompt_text: Each task's system prompt (verifiers' own ``system_prompt``
            setting, a file, overrides it).
    """

    env: str = ""
    seeds: list[int] = Field(default_factory=lambda: [0])
    make_kwargs: dict[str, Any] = Field(default_factory=dict)
    system_prompt_text: str | None = None


class XpgymTaskData(vf.TaskData):
    """One task: `TaskData` (the prompt is the first observation) plus how to replay it."""

    env_id: str
    seed: int
    make_kwargs: dict[str, Any] = Field(default_factory=dict)


class XpgymTask(vf.Task[XpgymTaskData]):
    """A task of `XpgymTaskset`; the reward is recorded by `XpgymEnv.run`, not by hooks."""


class XpgymTaskset(vf.Taskset[XpgymTask, XpgymTasksetConfig]):
    """One task per seed of `config.seeds`: the first observation of ``reset(seed=seed)``
    as the prompt (one env is made for the whole listing and closed after it).

    Raises (when iterated):
        ValueError: `config.env` is empty (its default, so that verifiers' command line can
            build the config before it reads ``--env.taskset.env``).
        TypeError: the id is a multi-agent env, or its first observation is not text.
    """

    def load(self) -> Iterator[XpgymTask]:
        config = self.config
        if not config.env:
            raise ValueError("no xpgym env id: set env (--env.taskset.env on verifiers' CLI)")
        env = _make(config.env, config.make_kwargs)
        try:
            for seed in config.seeds:
                observation, _ = env.reset(seed=seed)
                yield XpgymTask(
                    XpgymTaskData(
                        name=f"{config.env}#{seed}",
                        prompt=_text(observation, env, "reset"),
                        system_prompt=config.system_prompt_text,
                        env_id=config.env,
                        seed=seed,
                        make_kwargs=config.make_kwargs,
                    ),
                    config.task,
                )
        finally:
            env.close()


@dataclasses.dataclass
class EpisodeSummary:
    """How an xpgym episode went, as ``trace.info["xpgym"]`` holds it (`dataclasses.asdict`).

    Attributes:
        env_id: The xpgym id.
        seed: The seed of ``reset``.
        steps: Steps taken (model replies the env judged, a step that raised included).
        episode_return: The sum of the step rewards (also the reward ``"return"``).
        terminated: The last step's `terminated`.
        truncated: The last step's `truncated` (also true after an infrastructure failure).
        infra_error: The failure's `InfraCause` as a dict, or `None`.
    """

    env_id: str
    seed: int
    steps: int = 0
    episode_return: float = 0.0
    terminated: bool = False
    truncated: bool = False
    infra_error: dict[str, str] | None = None

    @property
    def ended(self) -> str | None:
        """``"infra_error"``, ``"terminated"`` or ``"truncated"`` once the xpgym env ended
        the episode, `None` while it runs (or when verifiers ended the exchange first)."""
        if self.infra_error is not None:
            return "infra_error"
        if self.terminated:
            return "terminated"
        if self.truncated:
            return "truncated"
        return None

    def record(self, reward: float, terminated: bool, truncated: bool, info: dict) -> None:
        """Count one step; its `info` may report an infrastructure failure
        (`find_infra_cause`), which ends the episode."""
        self.steps += 1
        self.episode_return += float(reward)
        self.terminated, self.truncated = bool(terminated), bool(truncated)
        cause = find_infra_cause(info)
        if cause is not None:
            self.fail(cause)

    def fail(self, cause: InfraCause) -> None:
        """End the episode on an infrastructure failure (truncated, the cause kept)."""
        self.truncated = True
        self.infra_error = cause.to_dict()


class XpgymEnvConfig(vf.EnvConfig):
    """The env's one role, ``player``: the model. Its runtime defaults to a local
    subprocess workspace (the bundled harness runs no program in it), not verifiers'
    remote sandbox."""

    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class XpgymEnv(vf.Env[XpgymEnvConfig]):
    """One xpgym episode per verifiers episode (see the module docstring)."""

    async def run(self, task: XpgymTask, agents: vf.Agents) -> None:
        """Play `task`'s episode: a fresh env, reset with the task's seed, stepped with each
        reply of the model until it ends; record the return and the `EpisodeSummary`.

        Raises:
            ValueError: the env's first observation differs from the task's prompt (its
                ``reset`` is not deterministic for a seed); the episode fails.
        """
        data = task.data
        env = await asyncio.to_thread(_make, data.env_id, data.make_kwargs)
        summary = EpisodeSummary(env_id=data.env_id, seed=data.seed)
        try:
            observation, _ = await asyncio.to_thread(env.reset, seed=data.seed)
            if _text(observation, env, "reset") != data.prompt:
                raise ValueError(
                    f"{data.env_id}: reset(seed={data.seed}) gave another first observation "
                    "than when the task was listed; the env's reset is not deterministic"
                )
            async with agents.player.interaction(task) as interaction:
                segment = await interaction.turn()  # the prompt is the first observation
                while not segment.terminated:
                    observation = await _step(env, _reply(segment), summary)
                    if summary.ended is not None:
                        interaction.trace.stop(summary.ended)
                        break
                    segment = await interaction.turn(_text(observation, env, "step"))
            trace = interaction.trace
            trace.record_reward(RETURN_REWARD, summary.episode_return)
            trace.info["xpgym"] = dataclasses.asdict(summary)
            if summary.infra_error is not None:
                trace.record_error(InfraError(**summary.infra_error))
        finally:
            await asyncio.to_thread(env.close)


class XpgymChatHarnessConfig(vf.HarnessConfig):
    """`XpgymChatHarness` has no settings of its own."""


class XpgymChatHarness(vf.Harness[XpgymChatHarnessConfig]):
    """The model's side of a text game: one chat completion per turn, no tools.

    It runs in process (verifiers' harness contract allows it: every model call goes
    through the rollout's interception endpoint, which records it on the trace and applies
    the run's model and sampling settings); each turn sends the whole conversation
    (verifiers' default `resume`), so the harness keeps no state between turns.
    """

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
    ) -> ProgramResult:
        """Send the segment's conversation (`data.prompt`, after the system prompt) to the
        interception `endpoint` once; the trace records the reply."""
        system_prompt, prompt = self.resolve_prompt(data)
        messages: list[Any] = []  # wire-format chat messages
        if system_prompt is not None:
            messages.append({"role": "system", "content": system_prompt})
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages += [message_to_wire(message) for message in prompt or ()]
        async with openai.AsyncOpenAI(base_url=endpoint, api_key=secret) as client:
            await client.chat.completions.create(model=ctx.model, messages=messages)
        return ProgramResult(exit_code=0, stdout="", stderr="")


def load_environment(
    env_id: str,
    *,
    seeds: Iterable[int] = (0,),
    make_kwargs: Mapping[str, Any] | None = None,
    system_prompt: str | None = None,
    max_turns: int | None = None,
) -> XpgymEnv:
    """A verifiers env of the xpgym env `env_id`: one task per seed (see the module docstring).

    Run it as any verifiers env: inside ``async with env.serving():``, `env.run_slot` (or
    `env.run_episode`) of each of ``env.slots(task, n)`` for the tasks of ``env.taskset``,
    with a `vf.ModelContext` naming the model, its endpoint and sampling settings.

    Args:
        env_id: A registered single-agent xpgym id with text observations.
        seeds: The seeds of the tasks, in order.
        make_kwargs: Keyword arguments for `xpgym.make` (a mapping, so that they never
            clash with this function's own).
        system_prompt: Sent before each episode's first observation (none by default).
        max_turns: verifiers' limit on the model's turns (`None`: the xpgym env's own end);
            when it ends the exchange first, the trace's stop condition is ``"max_turns"``.

    Raises:
        pydantic.ValidationError: a seed is not an integer.
        ModuleNotFoundError: the plugin package ``xpgym_verifiers`` is not importable (it
            ships with xpgym; an editable install made before it existed needs redoing).
    """
    taskset: dict[str, Any] = {
        "id": TASKSET_ID,
        "env": env_id,
        "seeds": list(seeds),
        "make_kwargs": dict(make_kwargs or {}),
        "system_prompt_text": system_prompt,
    }
    config = vf.resolve_env_config({"taskset": taskset, "player": {"max_turns": max_turns}})
    return vf.load_environment(config)


def _make(env_id: str, make_kwargs: dict[str, Any]) -> Env:
    env: EnvCore = bridged_env(env_id, make_kwargs)
    if not isinstance(env, Env):
        env.close()
        raise TypeError(
            f"{env_id} is not a single-agent xpgym Env ({type(env).__name__}); "
            "verifiers environments play single-agent envs"
        )
    return env


def _text(observation: Any, env: Env, where: str) -> str:
    if not isinstance(observation, str):
        raise TypeError(
            f"{env}: {where}() gave a {type(observation).__name__} observation; "
            "xpgym.compat.verifiers plays envs whose observations are text"
        )
    return observation


def _reply(segment: vf.Segment) -> str:
    """The model's reply as the env's action: the raw text of the segment's last assistant
    message (`Segment.last_reply` would strip it), ``""`` when it has none."""
    for message in reversed(segment.messages):
        if message.role == "assistant":
            return message.content or ""
    return ""


async def _step(env: Env, action: str, summary: EpisodeSummary) -> Any:
    """Step `env` with `action` off the event loop, count it in `summary` and return the
    observation. A step that raises is an infrastructure failure (`step_failure_info`, as in
    xpgym's episode runner): it ends the episode and returns `None`."""
    try:
        observation, reward, terminated, truncated, info = await asyncio.to_thread(env.step, action)
    except Exception as exc:  # an env must judge any text; a raise is not the model's doing
        logger.warning("%s: step raised; the episode ends as an infra error", env, exc_info=True)
        summary.steps += 1
        summary.fail(InfraCause.from_dict(step_failure_info(exc)[INFRA_ERROR_KEY]))
        return None
    summary.record(reward, terminated, truncated, info)
    return observation
