"""The chat vocabulary: messages, chat tokenizers, prompts, and token-exact prompt building.

Every part of xpgym that talks to a chat model speaks these types: the observation wrappers
(`xpgym.core.wrappers.observation`), the policies (`xpgym.rollout.policies`), the episode
loops (`xpgym.rollout.recorder` and the loops over it) and the adapters.

* `Message`: one chat message, ``{"role": ..., "content": ...}``.
* `ChatTokenizer` / `PromptTokenizer`: what xpgym needs of a Hugging Face-style tokenizer
  (``apply_chat_template``; and ``encode``); transformers is never imported here.
* `Prompt`: what a policy is given: token ids, text, or chat messages; `encode_prompt`
  turns any of them into token ids.
* `observation_messages`: the messages an env observation adds to a conversation, and
  `with_system_prompt`: the one rule for putting a system prompt in front of them.
* `ChatPromptBuilder`: prompt ids built by appending, so each turn's prompt extends the
  previous prompt and response (the token-exactness contract of `xpgym.core.trajectory`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = [
    "ChatPromptBuilder",
    "ChatTokenizer",
    "Message",
    "Prompt",
    "PromptTokenizer",
    "encode_prompt",
    "observation_messages",
    "with_system_prompt",
]

Message = dict[str, str]
"""A chat message: ``{"role": "system" | "user" | "tool" | "assistant", "content": str}``."""

Prompt = list[int] | str | list[Message]
"""What a policy is given (see `xpgym.rollout.policies`):

* ``list[int]``: token ids, used verbatim (the collector's token-exact mode);
* ``str``: text, tokenized without adding special tokens;
* ``list[Message]``: chat messages, rendered with the chat template and the generation
  prompt."""


class ChatTokenizer(Protocol):
    """Anything with a Hugging Face-style ``apply_chat_template``, e.g. a transformers tokenizer."""

    def apply_chat_template(
        self,
        conversation: list[Message],
        *,
        tokenize: bool,
        add_generation_prompt: bool,
        **kwargs: Any,
    ) -> Any: ...


class PromptTokenizer(ChatTokenizer, Protocol):
    """A Hugging Face-style tokenizer: ``apply_chat_template`` and ``encode``."""

    def encode(self, text: str, *, add_special_tokens: bool = ...) -> list[int]: ...


# --------------------------------------------------------------------------------------
# Conversations
# --------------------------------------------------------------------------------------


def with_system_prompt(messages: Sequence[Message], system_prompt: str | None) -> list[Message]:
    """`messages` with ``{"role": "system", "content": system_prompt}`` in front.

    The one rule for a system prompt, wherever a conversation starts: it is added unless
    `system_prompt` is `None` or the messages already start with a system message (the
    env's own, e.g. from `ChatMessages`, wins). Returns a new list; the dicts are shared.
    """
    out = list(messages)
    if system_prompt is not None and not (out and out[0].get("role") == "system"):
        out.insert(0, {"role": "system", "content": system_prompt})
    return out


def observation_messages(
    observation: Any, info: Mapping[str, Any], *, first: bool
) -> list[Message]:
    """The chat messages an observation adds to the conversation.

    A text observation is one message: role ``"tool"`` when it answers tool calls
    (``info["tool_calls"]``) after the first turn, else ``"user"``. A chat-message
    observation (a list of ``{"role", "content"}`` dicts) adds every message after its last
    assistant message (all of them on the first turn).

    Raises:
        ValueError: a chat-message observation has nothing after its last assistant message.
        TypeError: the observation is neither text nor chat messages.
    """
    if isinstance(observation, str):
        role = "tool" if info.get("tool_calls") and not first else "user"
        return [{"role": role, "content": observation}]
    if isinstance(observation, list) and all(isinstance(m, dict) for m in observation):
        if first:
            return [dict(m) for m in observation]
        last = max(
            (k for k, m in enumerate(observation) if m.get("role") == "assistant"), default=-1
        )
        new = [dict(m) for m in observation[last + 1 :]]
        if not new:
            raise ValueError(
                "the env's chat-message observation has no message after the last assistant "
                "message, so there is nothing new to show the policy"
            )
        return new
    raise TypeError(
        "prompt_mode 'tokens' and 'messages' need str or chat-message observations, got "
        f"{type(observation).__name__}: {observation!r:.80}"
    )


def encode_prompt(
    tokenizer: Any, prompt: Prompt, chat_template_kwargs: Mapping[str, Any] | None = None
) -> list[int]:
    """The token ids of `prompt` under `tokenizer` (for backends that take ids).

    Token ids are returned as a new list; text is encoded without special tokens (a rendered
    chat template already holds them); messages are rendered with
    ``apply_chat_template(..., add_generation_prompt=True)``.

    Raises:
        ValueError: the prompt is empty.
        TypeError: the prompt is none of the three kinds.
    """
    if isinstance(prompt, str):
        return list(tokenizer.encode(prompt, add_special_tokens=False))
    if not isinstance(prompt, (list, tuple)) or not prompt:
        raise (ValueError if isinstance(prompt, (list, tuple)) else TypeError)(
            f"a prompt is token ids, text or chat messages, got {prompt!r:.80}"
        )
    ids = [t for t in prompt if isinstance(t, int) and not isinstance(t, bool)]
    if len(ids) == len(prompt):
        return [int(t) for t in ids]
    if all(isinstance(m, dict) for m in prompt):
        rendered = tokenizer.apply_chat_template(
            list(prompt),
            tokenize=True,
            add_generation_prompt=True,
            return_dict=False,
            **(chat_template_kwargs or {}),
        )
        if isinstance(rendered, dict) or hasattr(rendered, "input_ids"):
            rendered = rendered["input_ids"]
        return [int(t) for t in rendered]
    raise TypeError(f"a prompt is token ids, text or chat messages, got {prompt!r:.80}")


# --------------------------------------------------------------------------------------
# Prompt ids from a chat template, by appending
# --------------------------------------------------------------------------------------

_PLACEHOLDER = "XPGYM-ASSISTANT-CONTENT"


class ChatPromptBuilder:
    """Prompt ids for a chat conversation, built so each prompt extends the last one.

    `start` renders the first prompt with the tokenizer's chat template. `extend` appends to
    the previous prompt and the policy's response: the end-of-turn tokens the template puts
    after an assistant message that the response lacks (e.g. the ``"\\n"`` after
    ``<|im_end|>`` in ChatML, or the whole ``<|im_end|>\\n`` when the sampler stripped the
    stop token), then the template's tokens for the new message(s) and the generation
    prompt. The result starts with ``previous_prompt_ids + response_ids`` by construction:
    turns built with it satisfy the token-exactness contract, whatever the template.

    How the pieces are found: the template renders (``tokenize=False``) a fixed context
    (system prompt if any, a user message, an assistant message) without and with the new
    message; the new text must start with the old (else `ValueError`: the template
    re-renders earlier messages when one is added) and only the suffix is tokenized. The
    end-of-turn text is what the template writes after the assistant content. So the
    builder assumes a message's rendering does not depend on the content of earlier
    messages (true of ChatML/Qwen, Llama 3 and most templates). Templates that rewrite
    history (e.g. dropping old reasoning) still get prefix-consistent ids; those then
    differ from a fresh render of the whole conversation, by design: the policy is trained
    on exactly the tokens it saw.

    The builder holds no per-conversation state: one instance serves any number of
    conversations. Nothing is downloaded and transformers is not imported here.

    Attributes:
        end_of_turn_ids: Token ids the template writes after an assistant message's
            content (``<|im_end|>`` ``\\n`` in ChatML, ``<|eot_id|>`` in Llama 3).
    """

    def __init__(
        self,
        tokenizer: PromptTokenizer,
        system_prompt: str | None = None,
        *,
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        """
        Args:
            tokenizer: E.g. a ``transformers`` tokenizer with a ``chat_template``.
            system_prompt: Put in front of the first messages by `start`
                (`with_system_prompt`).
            chat_template_kwargs: Passed to every ``apply_chat_template`` call (e.g.
                ``tools``, ``enable_thinking``).
        """
        for method in ("apply_chat_template", "encode"):
            if not callable(getattr(tokenizer, method, None)):
                raise TypeError(
                    f"ChatPromptBuilder needs a tokenizer with {method}(), got "
                    f"{type(tokenizer).__name__}"
                )
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        exchange = [
            {"role": "user", "content": "Hi."},
            {"role": "assistant", "content": _PLACEHOLDER},
        ]
        self._context = with_system_prompt(exchange, system_prompt)
        self._context_text = self._render(self._context, add_generation_prompt=False)
        at = self._context_text.rfind(_PLACEHOLDER)
        if at < 0:
            raise ValueError(
                f"the chat template does not write an assistant message's content as it is "
                f"(rendered {self._context_text!r:.200}); ChatPromptBuilder cannot find the "
                f"end-of-turn text"
            )
        self.end_of_turn_ids: list[int] = self._encode(self._context_text[at + len(_PLACEHOLDER) :])

    def start(
        self, first_message: str | Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> list[int]:
        """Prompt ids of the first turn: system prompt, `first_message`, generation prompt.

        Args:
            first_message: The user's text, a chat message, or a list of chat messages
                (e.g. an observation from `ChatMessages`; the builder's system prompt goes
                in front unless they start with a system message, `with_system_prompt`).
        """
        messages = with_system_prompt(_as_messages(first_message, "user"), self.system_prompt)
        return self._encode(self._render(messages, add_generation_prompt=True))

    def extend(
        self,
        previous_prompt_ids: Sequence[int],
        response_ids: Sequence[int],
        next_observation: str | Mapping[str, Any] | Sequence[Mapping[str, Any]],
        role: str = "user",
    ) -> list[int]:
        """Prompt ids of the next turn: previous prompt + response + env tokens.

        Args:
            previous_prompt_ids: The prompt the response answered.
            response_ids: The policy's tokens, with or without the stop token.
            next_observation: The env's reply: text (sent as a `role` message), a chat
                message, or a list of chat messages (e.g. several tool results).
            role: Role of a text `next_observation`: ``"user"`` or ``"tool"`` (or any role
                the template knows).

        Returns:
            ``[*previous_prompt_ids, *response_ids, *missing end-of-turn ids,
            *new message ids, *generation prompt ids]``.

        Raises:
            ValueError: The template changes earlier text when the message is added.
        """
        messages = _as_messages(next_observation, role)
        text = self._render([*self._context, *messages], add_generation_prompt=True)
        if not text.startswith(self._context_text):
            raise ValueError(
                f"the chat template re-renders earlier messages when a {role!r} message is "
                f"added (without it: {self._context_text!r:.200}; with it: {text!r:.200}), "
                f"so prompt ids cannot be built by appending; fix the template or pass a "
                f"chat_template that renders each message on its own"
            )
        response = list(response_ids)
        return [
            *previous_prompt_ids,
            *response,
            *self.missing_end_of_turn(response),
            *self._encode(text[len(self._context_text) :]),
        ]

    def missing_end_of_turn(self, response_ids: Sequence[int]) -> list[int]:
        """The end-of-turn ids the response lacks: `end_of_turn_ids` without the longest
        start of it that `response_ids` already ends with."""
        eot = self.end_of_turn_ids
        for k in range(min(len(eot), len(response_ids)), 0, -1):
            if list(response_ids[-k:]) == eot[:k]:
                return eot[k:]
        return list(eot)

    def _render(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool) -> str:
        text = self.tokenizer.apply_chat_template(
            messages,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            **self.chat_template_kwargs,
        )
        if not isinstance(text, str):
            raise TypeError(
                f"tokenizer.apply_chat_template(..., tokenize=False) returned "
                f"{type(text).__name__}, expected str"
            )
        return text

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))


def _as_messages(
    value: str | Mapping[str, Any] | Sequence[Mapping[str, Any]], role: str
) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    if isinstance(value, Mapping):
        return [dict(value)]
    messages = [dict(message) for message in value]
    if not messages:
        raise ValueError("no messages given")
    return messages
