"""Wrappers that change what the model sees: the last observation, a text history, chat messages.

All of them read a `str` observation from the wrapped env and keep their episode history in
wrapper state, so ``get_state()`` / ``set_state()`` of the stack restores it.

Conventions shared by every wrapper here:

* **Recorded action.** The action stored in a history is ``info["parsed_action"]`` of that
  step when it is a `str` (a tool wrapper puts the call there, with any text the model wrote
  after the call cut off), else the raw action text.
* **Tool turns.** An observation is the output of a tool when the step that produced it had a
  truthy ``info.get("tool_calls")`` (a positive count or a non-empty list). Chat wrappers give
  such observations the ``"tool"`` role; every other observation, and always the one from
  `reset`, is a ``"user"`` message.
* **Prefix and suffix.** If the `info` returned with the current observation (by `reset` or
  `step`) has ``"prefix"`` or ``"suffix"`` (`str`), they are added around what the model
  reads *this turn only* and are never stored in the history: envs use them for a standing
  instruction ("Enter your next guess.") or the current board. Text wrappers put the prefix
  before and the suffix after the whole rendered text; chat wrappers prepend the prefix to
  the first non-system message and append the suffix to the last message.
* **History length.** ``max_history`` (``None`` for unbounded) is the number of env
  observations kept, the current one included; an observation dropped from the front takes
  the action that answered it along with it. A system prompt is never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from xpgym.core import chat
from xpgym.core.env import Env, Wrapper

__all__ = [
    "ChatMessages",
    "ChatTemplate",
    "LastObservation",
    "ObservationActionHistory",
    "ObservationHistory",
]


_ObsT = TypeVar("_ObsT")


def _check_max_history(max_history: int | None) -> int | None:
    if max_history is None:
        return None
    if isinstance(max_history, bool) or not isinstance(max_history, int) or max_history < 1:
        raise ValueError(f"max_history must be a positive int or None, got {max_history!r}")
    return max_history


def _check_text(wrapper: Wrapper, observation: Any) -> str:
    if not isinstance(observation, str):
        raise TypeError(
            f"{type(wrapper).__name__} needs str observations from the env it wraps, got "
            f"{type(observation).__name__}; put chat wrappers outermost, above text wrappers"
        )
    return observation


def _recorded_action(action: str, info: Mapping[str, Any]) -> str:
    parsed = info.get("parsed_action")
    return parsed if isinstance(parsed, str) else action


def _is_tool_turn(info: Mapping[str, Any]) -> bool:
    return bool(info.get("tool_calls"))


def _decorate(text: str, info: Mapping[str, Any]) -> str:
    return info.get("prefix", "") + text + info.get("suffix", "")


class LastObservation(Wrapper[str]):
    """The model sees the env's last observation, with ``info`` prefix/suffix added.

    Otherwise the identity: it exists so a config can name the "no history" choice
    explicitly. Stateless (`get_wrapper_state` is `None`).
    """

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        return _decorate(_check_text(self, obs), info), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return _decorate(_check_text(self, obs), info), reward, terminated, truncated, info


class _History(Wrapper[_ObsT]):
    """Keeps the episode's observations, tool-turn flags and recorded actions.

    Invariant: ``len(_actions) == len(_observations) - 1`` after `reset`; ``_actions[i]`` is
    the action that answered ``_observations[i]`` and ``_tool_turns[i]`` says whether
    ``_observations[i]`` came from a tool turn. Subclasses implement `_render`.
    """

    def __init__(self, env: Env, max_history: int | None = None) -> None:
        super().__init__(env)
        self.max_history = _check_max_history(max_history)
        self._observations: list[str] = []
        self._tool_turns: list[bool] = []
        self._actions: list[str] = []

    def _render(self, info: Mapping[str, Any]) -> _ObsT:
        raise NotImplementedError

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[_ObsT, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._observations = [_check_text(self, obs)]
        self._tool_turns = [False]
        self._actions = []
        return self._render(info), info

    def step(self, action: str) -> tuple[_ObsT, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        obs = _check_text(self, obs)
        self._actions.append(_recorded_action(action, info))
        self._observations.append(obs)
        self._tool_turns.append(_is_tool_turn(info))
        if self.max_history is not None and len(self._observations) > self.max_history:
            drop = len(self._observations) - self.max_history
            del self._observations[:drop], self._tool_turns[:drop], self._actions[:drop]
        return self._render(info), reward, terminated, truncated, info

    def get_wrapper_state(self) -> dict[str, list]:
        """The history so far: ``{"observations", "tool_turns", "actions"}`` (fresh lists)."""
        return {
            "observations": list(self._observations),
            "tool_turns": list(self._tool_turns),
            "actions": list(self._actions),
        }

    def set_wrapper_state(self, state: dict[str, list]) -> None:
        """Restore a copy of what `get_wrapper_state` returned."""
        self._observations = list(state["observations"])
        self._tool_turns = list(state["tool_turns"])
        self._actions = list(state["actions"])


class ObservationHistory(_History[str]):
    """The model sees every observation of the episode so far, oldest first, as one string.

    The observation is ``prefix + separator.join(observations) + suffix`` (default separator
    ``"\\n"``, added only between observations); actions are not shown. At most
    `max_history` observations are kept, the oldest dropped first.
    """

    def __init__(self, env: Env, max_history: int | None = None, separator: str = "\n") -> None:
        super().__init__(env, max_history)
        self.separator = separator

    def _render(self, info: Mapping[str, Any]) -> str:
        return _decorate(self.separator.join(self._observations), info)


class ObservationActionHistory(_History[str]):
    """The model sees observations and its own (recorded) actions, interleaved, as one string.

    The observation is ``prefix + separator.join([o_0, a_0, o_1, a_1, ..., o_t]) + suffix``
    (default separator ``"\\n"``): plain text, no role labels, always ending with the current
    observation. ``a_i`` is ``info["parsed_action"]`` of that step when it is a `str`, else the
    raw action. At most `max_history` observations are kept, each dropped with its action.
    """

    def __init__(self, env: Env, max_history: int | None = None, separator: str = "\n") -> None:
        super().__init__(env, max_history)
        self.separator = separator

    def _render(self, info: Mapping[str, Any]) -> str:
        parts: list[str] = []
        for i, obs in enumerate(self._observations):
            parts.append(obs)
            if i < len(self._actions):
                parts.append(self._actions[i])
        return _decorate(self.separator.join(parts), info)


class _ChatHistory(_History[_ObsT]):
    """A history rendered as chat messages (shared by `ChatMessages` and `ChatTemplate`)."""

    def __init__(
        self, env: Env, system_prompt: str | None = None, max_history: int | None = None
    ) -> None:
        super().__init__(env, max_history)
        self.system_prompt = system_prompt

    def messages(self, info: Mapping[str, Any] | None = None) -> list[chat.Message]:
        """The conversation so far (new dicts); `info` supplies this turn's prefix/suffix."""
        messages: list[chat.Message] = []
        for i, obs in enumerate(self._observations):
            messages.append({"role": "tool" if self._tool_turns[i] else "user", "content": obs})
            if i < len(self._actions):
                messages.append({"role": "assistant", "content": self._actions[i]})
        if info and messages:
            messages[0]["content"] = info.get("prefix", "") + messages[0]["content"]
            messages[-1]["content"] += info.get("suffix", "")
        return chat.with_system_prompt(messages, self.system_prompt)


class ChatMessages(_ChatHistory[list[chat.Message]]):
    """The model sees the episode as a list of chat messages.

    Order: an optional ``{"role": "system", "content": system_prompt}``, then for each turn
    the env's observation (role ``"tool"`` if that step had a truthy ``info["tool_calls"]``,
    else ``"user"``; the reset observation is always ``"user"``) followed by the model's
    recorded action (role ``"assistant"``). The list always ends with the current
    observation. Each call returns new dicts, so callers may edit them freely.
    """

    def _render(self, info: Mapping[str, Any]) -> list[chat.Message]:
        return self.messages(info)


class ChatTemplate(_ChatHistory[str]):
    """The model sees the `ChatMessages` conversation rendered by a tokenizer's chat template.

    The observation is ``tokenizer.apply_chat_template(messages, tokenize=False,
    add_generation_prompt=add_generation_prompt, **chat_template_kwargs)``, with `messages`
    built exactly as `ChatMessages` builds them. The tokenizer is the caller's (e.g. a
    ``transformers`` tokenizer); nothing is downloaded and this module never imports
    transformers. Use `chat_template_kwargs` for template options such as ``tools`` or
    ``enable_thinking``.
    """

    def __init__(
        self,
        env: Env,
        tokenizer: chat.ChatTokenizer,
        system_prompt: str | None = None,
        add_generation_prompt: bool = True,
        max_history: int | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(env, system_prompt, max_history)
        if not callable(getattr(tokenizer, "apply_chat_template", None)):
            raise TypeError(
                f"ChatTemplate needs a tokenizer with apply_chat_template(), "
                f"got {type(tokenizer).__name__}"
            )
        self.tokenizer = tokenizer
        self.add_generation_prompt = add_generation_prompt
        self.chat_template_kwargs = dict(chat_template_kwargs or {})

    def _render(self, info: Mapping[str, Any]) -> str:
        text = self.tokenizer.apply_chat_template(
            self.messages(info),
            tokenize=False,
            add_generation_prompt=self.add_generation_prompt,
            **self.chat_template_kwargs,
        )
        if not isinstance(text, str):
            raise TypeError(
                f"tokenizer.apply_chat_template(..., tokenize=False) returned "
                f"{type(text).__name__}, expected str"
            )
        return text
