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

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from xpgym.core.rust_tokenizer import rust_encoder
from xpgym.core.trajectory import checked_token_ids

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

logger = logging.getLogger(__name__)

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

    Token ids are returned as a new list of plain ints, checked by the rule of every token id
    in xpgym (`xpgym.core.trajectory.checked_token_ids`: integers, numpy's included, that
    are not negative); text is encoded without special tokens (a rendered chat template
    already holds them); messages are rendered with
    ``apply_chat_template(..., add_generation_prompt=True)``.

    Raises:
        ValueError: the prompt is empty, or holds a negative token id.
        TypeError: the prompt is none of the three kinds.
    """
    if isinstance(prompt, str):
        return list(tokenizer.encode(prompt, add_special_tokens=False))
    if not isinstance(prompt, (list, tuple)) or not prompt:
        raise (ValueError if isinstance(prompt, (list, tuple)) else TypeError)(
            f"a prompt is token ids, text or chat messages, got {prompt!r:.80}"
        )
    if not isinstance(prompt[0], dict):
        return checked_token_ids(prompt, "a prompt of token ids")
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

_PLACEHOLDER = "XPGYM-CONTENT"


def _placeholder(i: int) -> str:
    """The placeholder value of the `i`-th field of new messages (none is part of another)."""
    return f"{_PLACEHOLDER}-{i}-"


_PROBE_CONTENT = "<think>\n1 < 2 & 'a' \"b\"\n</think>\n{placeholder}"
"""A content that shows whether the template writes content as it is: reasoning, characters
that HTML escaping changes, quotes (`_MessageForm` is trusted only where it does)."""

_PROBE_MARGINS = " \n\t{placeholder} \n"
"""A content with whitespace around it: a template that trims content renders it otherwise."""

_PROBE_REPLIES = (
    "The answer is 5.",
    "<think>\nHalf of 10 is 5.\n</think>\n\nThe answer is 5.",
    " The answer is 5.\n",
)
"""The assistant replies of the conversation `ChatPromptBuilder` checks prefix consistency on:
plain text, reasoning (which some templates strip from history), whitespace around the text
(which some templates trim)."""


_Kind = tuple[tuple[str, tuple[tuple[str, bool], ...]], ...]
"""A kind of message run: each message's role and, per other key, whether its value is empty."""


def _fields(message: Mapping[str, Any]) -> list[str]:
    """The keys of `message` whose values a form fills in: all but ``role`` whose value is
    not empty (a template may test a field for emptiness), in sorted order."""
    return sorted(k for k, v in message.items() if k != "role" and v != "")


def _kind_and_values(messages: list[dict[str, Any]]) -> tuple[_Kind, list[str]] | None:
    """The kind of `messages` and the values of their `_fields`, message by message; None
    if a message has no role or a value that is not a string (e.g. a list of content parts
    or of tool calls)."""
    if not all("role" in m and all(isinstance(v, str) for v in m.values()) for m in messages):
        return None
    kind = tuple((m["role"], tuple((k, v == "") for k, v in sorted(m.items()))) for m in messages)
    return kind, [m[k] for m in messages for k in _fields(m)]


@dataclass(frozen=True)
class _MessageForm:
    """How the chat template writes a kind of message run after an assistant message: the
    texts around each field value (content, name, ...), generation prompt included.

    ``pieces[0] + values[order[0]] + pieces[1] + ... + values[order[-1]] + pieces[-1]`` is
    the rendering of messages of the kind with those values (`_kind_and_values`): `order`
    is the order in which the template writes the fields. `keeps_margins` is false for a
    template that changes whitespace around values (e.g. ``| trim``): the form then holds
    only for values without such whitespace.
    """

    pieces: tuple[str, ...]
    order: tuple[int, ...]
    keeps_margins: bool

    def writes(self, values: Sequence[str]) -> bool:
        """Whether the form renders `values` as the template would."""
        return self.keeps_margins or all(v == v.strip() for v in values)

    def text(self, values: Sequence[str]) -> str:
        """The rendering of messages with `values`."""
        parts = [self.pieces[0]]
        for field, piece in zip(self.order, self.pieces[1:], strict=True):
            parts += (values[field], piece)
        return "".join(parts)


_Observation = str | Mapping[str, Any] | Sequence[Mapping[str, Any]]  # text or chat messages
_TextKey = str | tuple[str, str]  # what the builder remembers ids by: a text, (role, text)


class ChatPromptBuilder:
    """Prompt ids for a chat conversation, built so each prompt extends the last one.

    `start` gives the first prompt as the tokenizer's chat template renders it. `extend`
    appends to the previous prompt and the policy's response: the end-of-turn tokens the
    template puts after an assistant message that the response lacks (e.g. the ``"\\n"``
    after ``<|im_end|>`` in ChatML, or the whole ``<|im_end|>\\n`` when the sampler stripped
    the stop token), then the tokens of the new message(s) and the generation prompt. The
    result starts with ``previous_prompt_ids + response_ids`` by construction: turns built
    with it satisfy the token-exactness contract, whatever the template. Earlier turns are
    never rendered or tokenized again. Every prompt it returns is a new list of plain
    non-negative ints (the tokenizer's ids and the responses are checked as they come in,
    `checked_token_ids`), given a `previous_prompt_ids` that is one too (e.g. one the
    builder returned).

    How the new messages' text is found: the template renders a fixed context (system prompt
    if any, a user message, an assistant message) without and with the new messages; the
    new text must start with the old (else `ValueError`: the template re-renders earlier
    messages when one is added) and the rest is the messages' text (for `start`: the render
    of the first messages, generation prompt included). That render is done
    once per kind of message run (the messages' roles, their other keys and which values
    are empty; e.g. one ``"user"`` message, or two ``"tool"`` messages with names): with
    placeholder values, it gives the text around each value (content, name, ...), the
    template's per-message form. Later runs of that kind are written by filling the form in,
    without the template. The form is used only once checked against the template: on
    values that show reasoning stripping, escaping and trimming (a template that trims gets
    the form only for values without whitespace around them), and on the first messages of
    its kind. Where a check fails, or a value is not a string, the builder renders each
    time. A template that treats particular contents specially in other ways (e.g. replaces
    a word) is caught only if the first messages of a kind show it; one that writes the
    time (``strftime_now``) keeps the time of its first render. The end-of-turn text is
    what the template writes after the assistant content. So the builder assumes a message's
    rendering does not depend on the content of earlier messages (true of ChatML/Qwen,
    Llama 3 and most templates).

    Prefix consistency: on its first `extend`, the builder builds a short conversation
    with the new messages and replies that show the usual traps (`_PROBE_REPLIES`) and
    compares it with a render of the whole conversation. A template that writes history
    otherwise than the model saw it (a generation prompt that history lacks, reasoning
    stripped from earlier replies, trimmed replies) differs; the builder then logs one
    warning naming the first differing token and keeps building by appending: the policy
    is trained on exactly the tokens it saw, which differ from a fresh render.

    The builder holds no per-conversation state: one instance serves any number of
    conversations, from any number of threads. It remembers the ids of the last
    `ENCODED_TEXTS` texts it encoded and text observations it appended (observations
    repeat: feedback, tool results, the first message), so it assumes the tokenizer does
    not change once the builder is built. Nothing is downloaded and transformers is not
    imported here.

    Attributes:
        end_of_turn_ids: Token ids the template writes after an assistant message's
            content (``<|im_end|>`` ``\\n`` in ChatML, ``<|eot_id|>`` in Llama 3).
    """

    ENCODED_TEXTS = 4096  # texts whose ids the builder remembers

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
        self._encode_in_rust = rust_encoder(tokenizer)
        self._encoded: dict[_TextKey, tuple[int, ...]] = {}  # oldest first
        self._encoded_lock = threading.Lock()
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
        # (first, kind of message run) -> its form, or None where the template must render it
        self._forms: dict[tuple[bool, _Kind], _MessageForm | None] = {}
        self._consistency_lock = threading.Lock()
        self._consistency_checked = False

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
        return self._encode(self._messages_text(messages, first=True))

    def extend(
        self,
        previous_prompt_ids: Sequence[int],
        response_ids: Sequence[int],
        next_observation: str | Mapping[str, Any] | Sequence[Mapping[str, Any]],
        role: str = "user",
    ) -> list[int]:
        """Prompt ids of the next turn: previous prompt + response + env tokens.

        The first call also checks the template's prefix consistency (class docstring) and
        logs a warning where it fails.

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
        return self.extend_many([(previous_prompt_ids, response_ids, next_observation)], role)[0]

    def extend_many(
        self,
        turns: Sequence[tuple[Sequence[int], Sequence[int], _Observation]],
        role: str = "user",
    ) -> list[list[int]]:
        """`extend` for several conversations at once: ``turns`` holds each one's
        ``(previous_prompt_ids, response_ids, next_observation)``; returns each one's next
        prompt ids, the same as `extend` would. The new texts that the builder does not
        remember are tokenized together: by a Hugging Face fast tokenizer's Rust tokenizer
        directly where that gives the ids ``encode`` gives (`xpgym.core.rust_tokenizer`,
        about 3x faster for short texts), else in one batched call of the tokenizer.

        Raises:
            ValueError: The template changes earlier text when a message is added.
        """
        runs = [_as_messages(observation, role) for _, _, observation in turns]
        if runs and not self._consistency_checked:
            with self._consistency_lock:
                if not self._consistency_checked:
                    self._consistency_checked = True
                    self._check_prefix_consistency(runs[0])
        return [
            self._joined(previous, response, new_ids)
            for (previous, response, _), new_ids in zip(turns, self._new_ids(runs), strict=True)
        ]

    def missing_end_of_turn(self, response_ids: Sequence[int]) -> list[int]:
        """The end-of-turn ids the response lacks: `end_of_turn_ids` without the longest
        start of it that `response_ids` already ends with."""
        eot = self.end_of_turn_ids
        for k in range(min(len(eot), len(response_ids)), 0, -1):
            if list(response_ids[-k:]) == eot[:k]:
                return eot[k:]
        return list(eot)

    def _new_ids(self, runs: list[list[dict[str, Any]]]) -> list[list[int]]:
        """The ids of each run of messages after a reply, generation prompt included: a
        single plain message is remembered by its role and text, other runs by their text."""
        keys: list[_TextKey] = [
            _role_and_text(run) or self._messages_text(run, first=False) for run in runs
        ]
        run_of = dict(zip(keys, runs, strict=True))
        return self._ids(
            keys,
            lambda key: (
                key if isinstance(key, str) else self._messages_text(run_of[key], first=False)
            ),
        )

    def _joined(
        self,
        previous_prompt_ids: Sequence[int],
        response_ids: Sequence[int],
        new_ids: Sequence[int],
    ) -> list[int]:
        response = checked_token_ids(response_ids, "response_ids")
        return [*previous_prompt_ids, *response, *self.missing_end_of_turn(response), *new_ids]

    def _messages_text(self, messages: list[dict[str, Any]], *, first: bool) -> str:
        """What the template writes for `messages`, generation prompt included, at the start
        of a conversation (`first`) or after an assistant message: the kind's form filled
        in where it is trusted, else a render."""
        found = _kind_and_values(messages)
        if found is None:
            return self._rendered_text(messages, first=first)
        kind, values = found
        form = self._forms.get((first, kind))
        if form is not None and form.writes(values):
            return form.text(values)
        text = self._rendered_text(messages, first=first)
        if (first, kind) not in self._forms:
            self._forms[first, kind] = self._learn_form(messages, values, text, first=first)
        return text

    def _rendered_text(self, messages: list[dict[str, Any]], *, first: bool) -> str:
        if first:
            return self._render(messages, add_generation_prompt=True)
        text = self._render([*self._context, *messages], add_generation_prompt=True)
        if not text.startswith(self._context_text):
            raise ValueError(
                f"the chat template re-renders earlier messages when a "
                f"{messages[0].get('role')!r} message is added (without it: "
                f"{self._context_text!r:.200}; with it: {text!r:.200}), so prompt ids cannot "
                f"be built by appending; fix the template or pass a chat_template that "
                f"renders each message on its own"
            )
        return text[len(self._context_text) :]

    def _learn_form(
        self, messages: list[dict[str, Any]], values: list[str], rendered: str, *, first: bool
    ) -> _MessageForm | None:
        """The form of `messages`' kind, checked against the template (class docstring), or
        None where it fails; `values` are their fields' values and `rendered` their text."""

        def filled(pattern: str) -> tuple[list[dict[str, Any]], list[str]]:
            probe: list[dict[str, Any]] = []
            probe_values: list[str] = []
            for message in messages:
                fields = {
                    k: pattern.format(placeholder=_placeholder(len(probe_values) + n))
                    for n, k in enumerate(_fields(message))
                }
                probe.append({**message, **fields})
                probe_values += fields.values()
            return probe, probe_values

        probe, placeholders = filled("{placeholder}")
        text = self._rendered_text(probe, first=first)
        if any(text.count(p) != 1 for p in placeholders):
            _log_no_form(messages, "does not write each field once")
            return None
        at = sorted((text.index(p), n) for n, p in enumerate(placeholders))
        ends = [0, *(i + len(placeholders[n]) for i, n in at)]
        starts = [i for i, _ in at] + [len(text)]
        pieces = tuple(text[end:start] for end, start in zip(ends, starts, strict=True))
        form = _MessageForm(pieces, tuple(n for _, n in at), keeps_margins=True)

        def renders_as_form(pattern: str) -> bool:
            probe, probe_values = filled(pattern)
            return self._rendered_text(probe, first=first) == form.text(probe_values)

        if not renders_as_form(_PROBE_CONTENT):
            _log_no_form(messages, "changes values (reasoning, escaping or quotes)")
            return None
        if not renders_as_form(_PROBE_MARGINS):
            form = _MessageForm(form.pieces, form.order, keeps_margins=False)
        if form.writes(values) and form.text(values) != rendered:
            _log_no_form(messages, "writes these values otherwise than the form")
            return None
        return form

    def _check_prefix_consistency(self, messages: list[dict[str, Any]]) -> None:
        """Log a warning if a conversation built by appending (`_PROBE_REPLIES`, each
        followed by `messages`) differs from a render of the whole conversation."""
        conversation = self._context[:-1]
        prompt = self.start(conversation)
        for reply in _PROBE_REPLIES:
            response = [*self._encode(reply), *self.end_of_turn_ids[:1]]
            prompt = self._joined(prompt, response, self._new_ids([messages])[0])
            conversation = [*conversation, {"role": "assistant", "content": reply}, *messages]
        rendered = self._encode(self._render(conversation, add_generation_prompt=True))
        if prompt == rendered:
            return
        at = next(
            (k for k, (a, b) in enumerate(zip(prompt, rendered, strict=False)) if a != b),
            min(len(prompt), len(rendered)),
        )
        logger.warning(
            "the chat template is not prefix-consistent: a conversation built by appending "
            "differs from a render of the whole conversation at token %d: built %s, rendered "
            "%s (conversation: %s). ChatPromptBuilder keeps appending, so the policy is "
            "trained on exactly the tokens it saw; a fresh render of the conversation would "
            "show it other tokens.",
            at,
            self._describe(prompt, at),
            self._describe(rendered, at),
            [m["role"] for m in conversation],
        )

    def _describe(self, ids: list[int], at: int) -> str:
        """Token `at` of `ids` as ``id (text)``, or ``end of prompt``."""
        if at >= len(ids):
            return "end of prompt"
        decode = getattr(self.tokenizer, "decode", None)
        return f"{ids[at]} ({decode([ids[at]])!r})" if callable(decode) else str(ids[at])

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
        return self._ids([text], lambda key: text)[0]

    def _ids(self, keys: Sequence[_TextKey], text_of: Callable[[_TextKey], str]) -> list[list[int]]:
        """A new list of ids for each of `keys` (a text, or a plain message's role and
        text): the remembered ids, or those of ``text_of(key)``, tokenized in one call for
        all keys not remembered and remembered from then on (the oldest forgotten first)."""
        known = {key: self._encoded.get(key) for key in keys}
        missing = [key for key, ids in known.items() if ids is None]
        if missing:
            tokenized = self._tokenize([text_of(key) for key in missing])
            with self._encoded_lock:
                for key, ids in zip(missing, tokenized, strict=True):
                    checked = tuple(checked_token_ids(ids, "the tokenizer's ids"))
                    known[key] = self._encoded[key] = checked
                while len(self._encoded) > self.ENCODED_TEXTS:
                    del self._encoded[next(iter(self._encoded))]
        return [list(known[key] or ()) for key in keys]

    def _tokenize(self, texts: list[str]) -> Sequence[Sequence[int]]:
        """Each text's ids without special tokens, what ``tokenizer.encode`` gives: from the
        Rust tokenizer where that is the same (`xpgym.core.rust_tokenizer.rust_encoder`),
        else in one batched call where the tokenizer is a Hugging Face one
        (``tokenizer(texts)["input_ids"]``), else ``encode`` per text."""
        if self._encode_in_rust is not None:
            ids = self._encode_in_rust(texts)
            if ids is not None:
                return ids
        if len(texts) > 1 and callable(self.tokenizer):
            batch = self.tokenizer(texts, add_special_tokens=False)
            rows = batch.get("input_ids") if isinstance(batch, Mapping) else None
            if isinstance(rows, list) and len(rows) == len(texts):
                return rows
        return [self.tokenizer.encode(text, add_special_tokens=False) for text in texts]


def _log_no_form(messages: list[dict[str, Any]], reason: str) -> None:
    logger.debug(
        "ChatPromptBuilder renders %s messages with the template each time: it %s",
        [m.get("role") for m in messages],
        reason,
    )


def _role_and_text(messages: list[dict[str, Any]]) -> tuple[str, str] | None:
    """``(role, content)`` of a single message with only those keys and text content."""
    if len(messages) != 1 or len(messages[0]) != 2:
        return None
    role, content = messages[0].get("role"), messages[0].get("content")
    return (role, content) if isinstance(role, str) and isinstance(content, str) else None


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
