"""QA scored by reward functions (`xpgym.core.rewards`): AgentFly's search-QA reward.

``qa:Sample-v0-search-f1`` is ``qa:Sample-v0-search`` (the shipped questions with the
search tool) in a `xpgym.core.wrappers.RewardWrapper` that replaces the env's reward with:

* `answer_f1`, on the final step only: the token F1 of the ``<answer>`` against the gold
  answers of the unwrapped `xpgym.envs.qa.env.QAEnv` (a reward function with env access),
  with the metric ``answer_words`` (words in the normalised answer);
* ``0.1`` the first time in the episode the model makes a well-formed tool call
  (`xpgym.core.rewards.first_well_formed_tool_call`), the format reward AgentFly gives
  for calling a tool (its HotpotQA runs train on F1).

The return is therefore ``F1 + 0.1`` when the model searched at least once, ``F1``
otherwise. ``info["metrics"]`` of the final step has ``answer_f1``,
``answer_f1/answer_words`` and ``format_reward`` (next to the env's ``em`` and ``f1``).
"""

from __future__ import annotations

from typing import Any

from xpgym.core.env import Env
from xpgym.core.registry import make_from_spec, spec
from xpgym.core.rewards import Reward, first_well_formed_tool_call
from xpgym.core.wrappers.rewards import FORMAT_REWARD_NAME, RewardWrapper
from xpgym.envs.common.answers import last_tagged
from xpgym.envs.qa.env import QAEnv
from xpgym.envs.qa.grading import normalize_answer, token_f1

__all__ = ["FORMAT_REWARD", "answer_f1", "make_f1_env"]

FORMAT_REWARD = 0.1
"""Paid once per episode, on the first well-formed tool call."""


def answer_f1(action: str, env: QAEnv) -> dict[str, float]:
    """``{"reward": token F1 of the action's last <answer> against env.answers,
    "answer_words": words of the normalised answer}``; no answer block: both 0.0."""
    answer = last_tagged(action, "answer")
    if not answer:
        return {"reward": 0.0, "answer_words": 0.0}
    return {
        "reward": token_f1(answer, env.answers),
        "answer_words": float(len(normalize_answer(answer).split())),
    }


def make_f1_env(*, base_id: str, **env_kwargs: Any) -> Env:
    """Entry point of the ``-f1`` ids: `base_id` (a QA id or its tool variant, made with
    `env_kwargs`) scored as the module docstring says."""
    env = make_from_spec(spec(base_id), **env_kwargs)
    if not isinstance(env, Env):
        raise TypeError(f"make_f1_env: {base_id!r} is not a single-agent Env; pass a QA id")
    return RewardWrapper(
        env,
        [answer_f1],
        env_reward="replace",
        final_only=True,
        format_reward=Reward(
            first_well_formed_tool_call, weight=FORMAT_REWARD, name=FORMAT_REWARD_NAME
        ),
    )
