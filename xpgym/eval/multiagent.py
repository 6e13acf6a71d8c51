"""Play one episode of a `MultiAgentEnv` with one policy per agent id.

The loop: ``env.reset(seed=seed)``; then, while agents are live, every agent in
``env.agent_selector.active_agents()`` (the selected agent in sequential mode, every live
agent in parallel mode) gets its prompt, the prompts of the step are submitted at once, and
the joint action goes to ``env.step``. `max_turns` bounds the number of env steps (the
loop-side `xpgym.rollout.recorder.TurnLimit`, counted in joint steps).

Prompts are chat messages, one conversation per agent, as in the collector's
``"messages"`` mode: an optional system message, then for each time the agent acts its
current observation (``env.observe(agent)``) as a ``"user"`` message followed by its
action as an ``"assistant"`` message. So envs whose observation is only what is new since
the agent's last action (``multiagent:CustomerService-v0``) and envs whose observation
restates the whole game (Tic-Tac-Toe) both work. Policies must take chat messages.

Context: when a policy has a tokenizer and a ``max_prompt_tokens``, a prompt longer than
that is not sent; the episode stops with ``truncated_reason = "context"`` (as does a
policy's `ContextLengthError`).

The transcript is a list of steps, each::

    {"observations": {agent: text},    # the new observation of each acting agent
     "actions": {agent: text},
     "rewards": {agent: float}, "terminations": {...}, "truncations": {...},
     "infos": {agent: {...}}}          # every agent live at the start of the step

An agent's return sums its rewards over all steps (it may be rewarded on a step in which it
did not act, e.g. the loser of a board game); its turns, invalid actions and tokens count
only the steps it acted in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from xpgym.core.chat import Message, encode_prompt, with_system_prompt
from xpgym.core.multiagent import AgentID, MultiAgentEnv
from xpgym.eval.metrics import is_success
from xpgym.rollout.policies import ConcurrentPolicy, ContextLengthError
from xpgym.rollout.recorder import TurnLimit

__all__ = ["AgentOutcome", "MultiAgentEpisode", "play_multiagent"]


@dataclass
class AgentOutcome:
    """One agent's part of an episode (see the module docstring for the counting rules)."""

    episode_return: float = 0.0
    turns: int = 0
    invalid_actions: int = 0
    tokens: int | None = 0
    final_info: dict[str, Any] = field(default_factory=dict)

    def result(self) -> dict[str, Any]:
        """The metric fields of a record's ``results`` entry (`xpgym.eval.records`)."""
        return {
            "return": self.episode_return,
            "turns": self.turns,
            "success": is_success(self.final_info, self.episode_return),
            "invalid_actions": self.invalid_actions,
            "tokens": self.tokens,
        }


@dataclass
class MultiAgentEpisode:
    """A played episode: its `transcript` steps, each agent's outcome, and
    ``truncated_reason``: ``"max_turns"`` or ``"context"`` if a limit stopped it, else
    `None`."""

    transcript: list[dict[str, Any]]
    agents: dict[AgentID, AgentOutcome]
    truncated_reason: str | None = None


def play_multiagent(
    env: MultiAgentEnv,
    policies: Mapping[AgentID, ConcurrentPolicy],
    *,
    seed: int | None,
    max_turns: int | None = None,
    system_prompt: str | None = None,
) -> MultiAgentEpisode:
    """Play one episode of `env` (see the module docstring).

    Args:
        env: The env; it is reset here.
        policies: A policy for every agent in ``env.possible_agents``.
        seed: The reset seed.
        max_turns: Most env steps (`None`: until every agent is done).
        system_prompt: The first message of every agent's conversation.

    Raises:
        ValueError: an agent has no policy, or `max_turns` is neither `None` nor a positive
            int. Whatever a policy or the env raises, except `ContextLengthError` (which
            ends the episode).
    """
    missing = [agent for agent in env.possible_agents if agent not in policies]
    if missing:
        raise ValueError(f"no policy for agents {missing} of {env}")
    limit = TurnLimit(max_turns)
    observations, infos = env.reset(seed=seed)
    outcomes = {agent: AgentOutcome(final_info=dict(infos[agent])) for agent in env.agents}
    conversations = {agent: with_system_prompt([], system_prompt) for agent in env.agents}
    episode = MultiAgentEpisode(transcript=[], agents=outcomes)
    while env.agents:
        if limit.reached(len(episode.transcript)):
            episode.truncated_reason = limit.reason
            break
        acting = env.agent_selector.active_agents()
        for agent in acting:
            conversations[agent].append(_message("user", observations[agent]))
        if any(_too_long(policies[agent], conversations[agent]) for agent in acting):
            episode.truncated_reason = "context"
            break
        futures = {
            agent: policies[agent].submit([dict(m) for m in conversations[agent]])
            for agent in acting
        }
        try:
            generations = {agent: future.result() for agent, future in futures.items()}
        except ContextLengthError:
            episode.truncated_reason = "context"
            break
        actions = {agent: generation.text for agent, generation in generations.items()}
        shown = {agent: observations[agent] for agent in acting}
        observations, rewards, terminations, truncations, infos = env.step(actions)
        episode.transcript.append(
            {
                "observations": shown,
                "actions": actions,
                "rewards": rewards,
                "terminations": terminations,
                "truncations": truncations,
                "infos": infos,
            }
        )
        for agent, reward in rewards.items():
            outcome = outcomes[agent]
            outcome.episode_return += reward
            outcome.final_info = infos[agent]
        for agent, generation in generations.items():
            conversations[agent].append(_message("assistant", generation.text))
            outcome = outcomes[agent]
            outcome.turns += 1
            outcome.invalid_actions += bool(infos[agent].get("invalid_action"))
            ids = generation.token_ids
            outcome.tokens = (
                None if ids is None or outcome.tokens is None else outcome.tokens + len(ids)
            )
    return episode


def _message(role: str, content: str) -> Message:
    return {"role": role, "content": content}


def _too_long(policy: ConcurrentPolicy, messages: list[Message]) -> bool:
    """Whether `messages` exceed the policy's ``max_prompt_tokens`` (known only for
    policies with a tokenizer)."""
    limit = getattr(policy, "max_prompt_tokens", None)
    if policy.tokenizer is None or limit is None:
        return False
    return len(encode_prompt(policy.tokenizer, messages)) > limit
