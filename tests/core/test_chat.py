"""Specification of the chat vocabulary (`xpgym.core.chat`): conversations and
`ChatPromptBuilder`."""

from __future__ import annotations

import copy
import functools
import logging
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.chat import ChatPromptBuilder, observation_messages, with_system_prompt
from xpgym.core.trajectory import Episode, Turn
from xpgym.reference import tiny_model
from xpgym.training.layouts import episode_rows

# --------------------------------------------------------------------------------------
# Conversations
# --------------------------------------------------------------------------------------


def test_observation_messages_maps_text_and_chat_observations() -> None:
    assert observation_messages("hi", {}, first=True) == [{"role": "user", "content": "hi"}]
    tool = observation_messages("42", {"tool_calls": [{"name": "python"}]}, first=False)
    assert tool == [{"role": "tool", "content": "42"}]
    assert observation_messages("42", {"tool_calls": [1]}, first=True)[0]["role"] == "user"
    conversation = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    assert observation_messages(conversation, {}, first=True) == conversation
    assert observation_messages(conversation, {}, first=False) == conversation[2:]
    with pytest.raises(ValueError, match="nothing new"):
        observation_messages(conversation[:2], {}, first=False)
    with pytest.raises(TypeError, match="str or chat-message"):
        observation_messages(3, {}, first=True)


def test_a_system_prompt_goes_in_front_unless_one_is_there() -> None:
    user = {"role": "user", "content": "hi"}
    system = {"role": "system", "content": "Be brief."}
    assert with_system_prompt([user], "Be brief.") == [system, user]
    assert with_system_prompt([], "Be brief.") == [system]
    own = {"role": "system", "content": "the env's own"}
    assert with_system_prompt([own, user], "Be brief.") == [own, user]
    assert with_system_prompt([user], None) == [user]
    messages = [user]
    assert with_system_prompt(messages, "Be brief.") is not messages
    assert messages == [user]


# --------------------------------------------------------------------------------------
# ChatPromptBuilder with real tokenizers built offline
# --------------------------------------------------------------------------------------

CHATML_TOOLS_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}"
    "{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""ChatML with Qwen2.5's grouping of consecutive tool results into one user message."""

LLAMA3_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"
    "{{- message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
"""Llama 3 style headers; the content is trimmed."""

DEFAULT_SYSTEM_TEMPLATE = (
    "{%- if messages[0]['role'] != 'system' %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    + CHATML_TOOLS_TEMPLATE
)
"""Qwen2.5's trap: a default system prompt, written only at position 0 when none is given."""

BLANK_LINE_TEMPLATE = CHATML_TOOLS_TEMPLATE.replace("<|im_end|>\\n", "<|im_end|>\\n\\n")
"""Two newlines after the end token: more end-of-turn text after the stop token."""

ESCAPING_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}{{- message['content'] | e }}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""ChatML that HTML-escapes every content."""

THINKING_PROMPT_TEMPLATE = CHATML_TOOLS_TEMPLATE.replace(
    "'<|im_start|>assistant\\n' }}{%- endif %}",
    "'<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' }}{%- endif %}",
)
"""Qwen3 with thinking off: the generation prompt holds an empty reasoning block that the
history's assistant messages lack."""

REASONING_STRIPPING_TEMPLATE = CHATML_TOOLS_TEMPLATE.replace(
    "message['role'] + '\\n' + message['content']",
    "message['role'] + '\\n' + (message['content'].split('</think>')[-1].lstrip('\\n') "
    "if message['role'] == 'assistant' else message['content'])",
)
"""Qwen3's trap: earlier replies are written without their reasoning."""

TEMPLATES = {
    "chatml-tools": ("chatml", CHATML_TOOLS_TEMPLATE),
    "llama3": ("llama3", LLAMA3_TEMPLATE),
    "tiny-model": ("chatml", tiny_model.CHATML_TEMPLATE),
    "default-system": ("chatml", DEFAULT_SYSTEM_TEMPLATE),
    "blank-line": ("chatml", BLANK_LINE_TEMPLATE),
    "escaping": ("chatml", ESCAPING_TEMPLATE),
    "thinking-prompt": ("chatml", THINKING_PROMPT_TEMPLATE),
    "reasoning-stripping": ("chatml", REASONING_STRIPPING_TEMPLATE),
}
"""Every template the project ships (`xpgym.reference.tiny_model`, the tests' tokenizers) and
templates with the usual traps, by name: (tokenizer style, template)."""

PREFIX_CONSISTENT = ["chatml-tools", "tiny-model", "default-system", "blank-line"]
"""The templates under which a conversation built by appending is its whole render, whatever
the replies."""

CORPUS = [
    "The quick brown fox jumps over the lazy dog. Guess a number between one and ten.",
    "user assistant system tool response tool_response <tool_response> </tool_response>",
    "Héllo wörld, naïve café; 你好，世界。 Привет мир! 12345 + 678 = 7023",
]


@functools.cache
def bpe_tokenizer(style: str) -> Any:
    """A byte-level BPE tokenizer trained on `CORPUS`, with `style`'s template and specials."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if style == "chatml":
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        eos, bos, template = "<|im_end|>", None, CHATML_TOOLS_TEMPLATE
    else:
        specials = [
            "<|begin_of_text|>",
            "<|end_of_text|>",
            "<|start_header_id|>",
            "<|end_header_id|>",
            "<|eot_id|>",
        ]
        eos, bos, template = "<|eot_id|>", "<|begin_of_text|>", LLAMA3_TEMPLATE
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(CORPUS, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token=eos, bos_token=bos, pad_token=specials[0]
    )
    tokenizer.chat_template = template
    return tokenizer


styles = pytest.mark.parametrize("style", ["chatml", "llama3"])
contents = (
    st.text(
        st.sampled_from(list("abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,!?éü你好мир")),
        min_size=1,
        max_size=30,
    )
    .map(str.strip)
    .filter(bool)
)


@styles
def test_builder_end_of_turn_ids_are_what_follows_assistant_content(style: str) -> None:
    tok = bpe_tokenizer(style)
    builder = ChatPromptBuilder(tok)
    expected = {"chatml": "<|im_end|>\n", "llama3": "<|eot_id|>"}[style]
    assert builder.end_of_turn_ids == tok.encode(expected, add_special_tokens=False)


observations = st.text(
    st.sampled_from(list("abcdefghij XYZ0123456789.,!?é你好мир<>&'\"\n\t")), min_size=1, max_size=30
)
"""Env texts: with characters that escaping changes and whitespace around them."""


def builder_for(name: str, system_prompt: str | None = None) -> tuple[Any, ChatPromptBuilder]:
    """The tokenizer of `TEMPLATES[name]`'s style and a builder over it with that template."""
    style, template = TEMPLATES[name]
    tok = bpe_tokenizer(style)
    kwargs = {"chat_template": template}
    return tok, ChatPromptBuilder(tok, system_prompt, chat_template_kwargs=kwargs)


@pytest.mark.parametrize("name", [n for n in TEMPLATES if n != "thinking-prompt"])
@settings(max_examples=30, deadline=None)
@given(
    system=st.none() | contents,
    first=contents,
    steps=st.lists(
        st.tuples(
            contents,
            st.lists(observations, min_size=1, max_size=2),
            st.sampled_from(["user", "tool"]),
            st.integers(0, 2),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_builder_equals_rendering_the_whole_conversation(
    name: str,
    system: str | None,
    first: str,
    steps: list[tuple[str, list[str], str, int]],
) -> None:
    """Under every template but the one whose generation prompt history lacks, replies
    without whitespace around them or reasoning give the whole conversation's render."""
    tok, builder = builder_for(name, system)
    conversation = ([] if system is None else [{"role": "system", "content": system}]) + [
        {"role": "user", "content": first}
    ]
    prompt = builder.start(first)
    for reply, texts, role, stop in steps:
        # the sampler's output: content, then the stop token kept, stripped, or followed by
        # the rest of the end-of-turn text
        response = tok.encode(reply, add_special_tokens=False)
        response += builder.end_of_turn_ids[: [1, 0, len(builder.end_of_turn_ids)][stop]]
        messages = [{"role": role, "content": text} for text in texts]
        following = builder.extend(prompt, response, messages)
        assert following[: len(prompt) + len(response)] == prompt + response
        prompt = following
        conversation += [{"role": "assistant", "content": reply}, *messages]
    rendered = tok.apply_chat_template(
        conversation, tokenize=False, add_generation_prompt=True, **builder.chat_template_kwargs
    )
    assert prompt == tok.encode(rendered, add_special_tokens=False)


class CountingRenders:
    """A tokenizer that counts its ``apply_chat_template`` calls."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.renders = 0

    def apply_chat_template(self, *args: Any, **kwargs: Any) -> Any:
        self.renders += 1
        return self.tokenizer.apply_chat_template(*args, **kwargs)

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens))


def play(builder: ChatPromptBuilder, tok: Any, observations: list[Any]) -> list[int]:
    """A conversation: each observation follows a reply with its stop token."""
    prompt = builder.start("Guess a number.")
    for observation in observations:
        response = [*tok.encode("guess 5", add_special_tokens=False), tok.eos_token_id]
        prompt = builder.extend(prompt, response, observation)
    return prompt


def test_builder_renders_each_kind_of_message_run_once() -> None:
    tok = CountingRenders(bpe_tokenizer("chatml"))
    builder = ChatPromptBuilder(tok)
    play(builder, tok.tokenizer, ["higher"])
    learned = tok.renders
    tools = [{"role": "tool", "content": "3"}, {"role": "tool", "content": "ok"}]
    play(builder, tok.tokenizer, ["lower", "higher", "x = 1\n", "correct"])
    assert tok.renders == learned  # start and every user turn fill their forms in
    play(builder, tok.tokenizer, [tools])
    with_tools = tok.renders
    play(builder, tok.tokenizer, [tools, tools])
    assert tok.renders == with_tools


def test_a_trimming_template_renders_contents_with_whitespace_around_them() -> None:
    tok = CountingRenders(bpe_tokenizer("llama3"))
    builder = ChatPromptBuilder(tok)
    play(builder, tok.tokenizer, ["higher"])
    learned = tok.renders
    play(builder, tok.tokenizer, ["lower", "higher"])
    assert tok.renders == learned
    prompt = play(builder, tok.tokenizer, [" lower\n", "higher"])
    assert tok.renders == learned + 1
    assert "<|end_header_id|>\n\nlower<|eot_id|>" in tok.tokenizer.decode(prompt)


def test_an_escaping_template_renders_every_message() -> None:
    tok = CountingRenders(bpe_tokenizer("chatml"))
    builder = ChatPromptBuilder(tok, chat_template_kwargs={"chat_template": ESCAPING_TEMPLATE})
    play(builder, tok.tokenizer, ["higher"])
    learned = tok.renders
    prompt = play(builder, tok.tokenizer, ["a < b", "lower"])
    assert tok.renders == learned + 3  # start and both turns (new texts: not remembered)
    assert "user\na &lt; b<|im_end|>" in tok.tokenizer.decode(prompt)


NAMED_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] }}"
    "{%- if message['name'] %}{{- ' name=' + message['name'] }}{%- endif %}"
    "{{- '\\n' + (message['content'] or '(nothing)') + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""ChatML with a message's name before its content, and a text for empty content."""


def test_a_form_fills_in_every_field_and_tells_empty_ones_apart() -> None:
    tok = CountingRenders(bpe_tokenizer("chatml"))
    builder = ChatPromptBuilder(tok, chat_template_kwargs={"chat_template": NAMED_TEMPLATE})
    runs = [
        [{"role": "tool", "name": "python", "content": "3"}],
        [{"role": "tool", "name": "search", "content": "no results"}],
        [{"role": "tool", "name": "", "content": ""}, {"role": "tool", "name": "a", "content": ""}],
        [{"role": "tool", "name": "", "content": ""}, {"role": "tool", "name": "b", "content": ""}],
    ]
    prompt = play(builder, tok.tokenizer, runs)
    conversation = [{"role": "user", "content": "Guess a number."}]
    for run in runs:
        conversation += [{"role": "assistant", "content": "guess 5"}, *run]
    rendered = tok.tokenizer.apply_chat_template(
        conversation, tokenize=False, add_generation_prompt=True, chat_template=NAMED_TEMPLATE
    )
    assert prompt == tok.tokenizer.encode(rendered, add_special_tokens=False)
    learned = tok.renders
    play(builder, tok.tokenizer, runs)
    assert tok.renders == learned


def test_a_form_that_fails_on_its_first_messages_is_not_used() -> None:
    """The probes cannot show every change a template makes to content; the first
    messages of a kind can, and the builder then renders that kind every time."""
    tok = CountingRenders(bpe_tokenizer("chatml"))
    censoring = CHATML_TOOLS_TEMPLATE.replace(
        "message['content']", "message['content'].replace('secret', '***')"
    )
    builder = ChatPromptBuilder(tok, chat_template_kwargs={"chat_template": censoring})
    play(builder, tok.tokenizer, ["the secret is 5"])
    learned = tok.renders
    prompt = play(builder, tok.tokenizer, ["higher", "the secret is 6"])
    assert tok.renders == learned + 2  # the two user turns; start fills its form in
    assert tok.tokenizer.decode(prompt).endswith(
        "user\nthe *** is 6<|im_end|>\n<|im_start|>assistant\n"
    )


@pytest.mark.parametrize("name", PREFIX_CONSISTENT)
def test_a_prefix_consistent_template_gets_no_warning(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    tok, builder = builder_for(name)
    with caplog.at_level(logging.WARNING, logger="xpgym.core.chat"):
        play(builder, tok, ["higher", [{"role": "tool", "content": "3"}], "lower"])
    assert caplog.records == []


def test_the_shipped_tokenizers_build_their_whole_render_without_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pytest.importorskip("torch", reason="the tests' tiny tokenizer module imports torch")
    from random_byte_lm import tiny_tokenizer

    observations = ["Too high. Guess again.", "Too low.", "Correct!"]
    for tok in (tiny_tokenizer(), tiny_model.build_tiny_tokenizer(CORPUS)):
        builder = ChatPromptBuilder(tok, "You play a game.")
        with caplog.at_level(logging.WARNING, logger="xpgym.core.chat"):
            prompt = play(builder, tok, observations)
        conversation = [
            {"role": "system", "content": "You play a game."},
            {"role": "user", "content": "Guess a number."},
        ]
        for observation in observations:
            conversation += [
                {"role": "assistant", "content": "guess 5"},
                {"role": "user", "content": observation},
            ]
        rendered = tok.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
        assert prompt == tok.encode(rendered, add_special_tokens=False)
    assert caplog.records == []


def test_the_builder_tokenizes_new_texts_in_rust_only_where_transformers_gives_the_same() -> None:
    tok = copy.copy(bpe_tokenizer("chatml"))  # this test changes its settings
    builder = ChatPromptBuilder(tok)
    calls = []
    transformers_encode = tok._encode_plus

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return transformers_encode(*args, **kwargs)

    tok._encode_plus = counted  # the instance's: transformers' calls go through it
    prompt = builder.start("Guess a number.")
    response = [*tok.encode("guess 5", add_special_tokens=False), tok.eos_token_id]
    calls.clear()

    def expected(previous: list[int], text: str) -> list[int]:
        rendered = tok.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
        new = tok.encode(rendered[rendered.index("<|im_start|>user") :], add_special_tokens=False)
        return [*previous, *response, *builder.missing_end_of_turn(response), *new]

    texts = ["Too high, by 4.", "Too low: 你好 <|im_end|> x"]
    wanted = [expected(prompt, text) for text in texts]
    calls.clear()
    assert builder.extend_many([(prompt, response, text) for text in texts]) == wanted
    assert calls == []  # the Rust tokenizer, directly
    # a call that leaves truncation on the Rust tokenizer: the builder hands back to
    # transformers (which turns it off again) and its ids stay the full ones
    text = "Correct, at last: the number was 7!"
    wanted = [expected(prompt, text)]
    tok(["a b c d e f"], truncation=True, max_length=2)
    calls.clear()
    assert builder.extend_many([(prompt, response, text)]) == wanted
    assert len(calls) == 1


@pytest.mark.parametrize("name", ["thinking-prompt", "reasoning-stripping", "llama3", "escaping"])
def test_a_template_that_is_not_prefix_consistent_gets_one_warning(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    tok, builder = builder_for(name)
    with caplog.at_level(logging.WARNING, logger="xpgym.core.chat"):
        for _ in range(3):
            play(builder, tok, ["higher", "lower"])
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert "not prefix-consistent" in record.getMessage()


def test_the_warning_names_the_first_differing_token_and_keeps_the_tokens_seen(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tok, builder = builder_for("thinking-prompt")
    prompt = builder.start("Guess a number.")
    response = [*tok.encode("guess 5", add_special_tokens=False), tok.eos_token_id]
    with caplog.at_level(logging.WARNING, logger="xpgym.core.chat"):
        following = builder.extend(prompt, response, "higher")
    assert following[: len(prompt) + len(response)] == prompt + response
    # the probe conversation starts "Hi.", then a reply: the render writes the reply where
    # the built prompt has the generation prompt's reasoning block
    history = "<|im_start|>user\nHi.<|im_end|>\n<|im_start|>assistant\n"
    at = len(tok.encode(history, add_special_tokens=False))
    built = tok.encode("<think>", add_special_tokens=False)[0]
    rendered = tok.encode("The", add_special_tokens=False)[0]
    (record,) = caplog.records
    assert (
        f"at token {at}: built {built} ({tok.decode([built])!r}), "
        f"rendered {rendered} ({tok.decode([rendered])!r})"
    ) in record.getMessage()


def test_builder_appends_several_tool_results_at_once() -> None:
    tok = bpe_tokenizer("chatml")
    builder = ChatPromptBuilder(tok)
    prompt = builder.start("Add 1 and 2.")
    response = [*tok.encode("<tool_call>", add_special_tokens=False), tok.eos_token_id]
    results = [{"role": "tool", "content": "3"}, {"role": "tool", "content": "ok"}]
    prompt = builder.extend(prompt, response, results)
    text = tok.decode(prompt)
    assert text.endswith(
        "<|im_end|>\n<|im_start|>user\n<tool_response>\n3\n</tool_response>\n"
        "<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )


class CountingTokens(CountingRenders):
    """A tokenizer that also records the texts it tokenizes: one by one (`encode`) and in
    batched calls (``tokenizer(texts)``)."""

    def __init__(self, tokenizer: Any) -> None:
        super().__init__(tokenizer)
        self.one_by_one: list[str] = []
        self.batches: list[list[str]] = []

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        self.one_by_one.append(text)
        return super().encode(text, add_special_tokens=add_special_tokens)

    def __call__(self, texts: list[str], *, add_special_tokens: bool = True) -> Any:
        self.batches.append(list(texts))
        return self.tokenizer(texts, add_special_tokens=add_special_tokens)

    def forget(self) -> None:
        self.one_by_one.clear()
        self.batches.clear()


@pytest.mark.parametrize("style", ["chatml", "llama3"])
def test_extend_many_equals_extend_one_by_one_and_tokenizes_new_texts_in_one_call(
    style: str,
) -> None:
    tok = CountingTokens(bpe_tokenizer(style))
    builder, alone = ChatPromptBuilder(tok), ChatPromptBuilder(bpe_tokenizer(style))
    response = [*tok.tokenizer.encode("guess 5", add_special_tokens=False), 7]
    builder.extend(builder.start("Warm up."), response, "first")  # the first call's check
    tok.forget()
    two_messages = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    observations: list[Any] = ["too low", "too high", two_messages, "too low", "first"]
    turns = [(builder.start(f"Game {n}."), response, o) for n, o in enumerate(observations)]
    tok.forget()

    prompts = builder.extend_many(turns)

    assert prompts == [alone.extend(*turn) for turn in turns]
    assert tok.one_by_one == []
    # "too low" twice and "first" (seen before) once: three new texts, one call
    assert len(tok.batches) == 1
    assert len(tok.batches[0]) == 3


def test_a_repeated_observation_is_not_tokenized_again() -> None:
    tok = CountingTokens(bpe_tokenizer("chatml"))
    builder = ChatPromptBuilder(tok)
    first = play(builder, tok.tokenizer, ["lower", "higher"])
    tok.forget()
    again = play(builder, tok.tokenizer, ["lower", "higher"])
    assert again == first
    assert tok.one_by_one == []
    assert tok.batches == []


def test_the_builder_forgets_the_oldest_texts_beyond_its_limit() -> None:
    tok = CountingTokens(bpe_tokenizer("chatml"))
    builder = ChatPromptBuilder(tok)
    builder.ENCODED_TEXTS = 3
    prompt = builder.start("Guess.")
    for observation in ("one", "two", "three", "four", "five"):
        builder.extend(prompt, [7], observation)
    tok.forget()
    builder.extend(prompt, [7], "five")  # among the last three
    assert tok.one_by_one == []
    builder.extend(prompt, [7], "one")  # forgotten: tokenized again
    assert len(tok.one_by_one) == 1


def test_a_tokenizer_without_batched_calls_is_asked_text_by_text() -> None:
    tok = CountingRenders(bpe_tokenizer("chatml"))  # encode and apply_chat_template only
    builder, alone = ChatPromptBuilder(tok), ChatPromptBuilder(bpe_tokenizer("chatml"))
    prompt = builder.start("Guess.")
    turns = [(prompt, [7], observation) for observation in ("lower", "higher", "right")]
    assert builder.extend_many(turns) == [alone.extend(*turn) for turn in turns]


def test_builder_prompts_are_plain_int_lists_whatever_ints_come_in() -> None:
    tok = bpe_tokenizer("chatml")
    builder = ChatPromptBuilder(tok)
    prompt = builder.start("Guess.")
    response = np.array([*tok.encode("5", add_special_tokens=False), tok.eos_token_id])
    extended = builder.extend(prompt, response, "lower")
    assert type(extended) is list
    assert {type(t) for t in extended} == {int}
    assert extended[: len(prompt) + len(response)] == [*prompt, *response.tolist()]


@pytest.mark.parametrize(
    ("response", "error", "match"),
    [
        ([3, -1], ValueError, "response_ids must be non-negative token ids"),
        ([3, "7"], TypeError, "response_ids must be integer token ids"),
    ],
)
def test_builder_refuses_a_response_that_is_not_token_ids(
    response: list[Any], error: type[Exception], match: str
) -> None:
    builder = ChatPromptBuilder(bpe_tokenizer("chatml"))
    with pytest.raises(error, match=match):
        builder.extend(builder.start("Guess."), response, "lower")


def test_builder_refuses_a_tokenizer_that_returns_negative_ids() -> None:
    class Negative(CountingRenders):
        def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
            return [-1 if "lower" in text else t for t in super().encode(text)]

    builder = ChatPromptBuilder(Negative(bpe_tokenizer("chatml")))
    with pytest.raises(ValueError, match="the tokenizer's ids must be non-negative token ids"):
        builder.extend(builder.start("Guess."), [7], "lower")


def test_builder_start_accepts_chat_messages() -> None:
    tok = bpe_tokenizer("llama3")
    builder = ChatPromptBuilder(tok, system_prompt="Be brief.")
    ids = builder.start([{"role": "user", "content": "Hi"}])
    assert tok.decode(ids) == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_builder_start_keeps_a_system_message_the_messages_bring() -> None:
    tok = bpe_tokenizer("llama3")
    builder = ChatPromptBuilder(tok, system_prompt="Be brief.")
    ids = builder.start(
        [{"role": "system", "content": "Rules."}, {"role": "user", "content": "Hi"}]
    )
    assert tok.decode(ids) == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nRules.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_builder_refuses_a_template_that_rerenders_history() -> None:
    tok = bpe_tokenizer("chatml")
    counting = "{{ 'messages: ' ~ messages | length ~ '\\n' }}" + CHATML_TOOLS_TEMPLATE
    builder = ChatPromptBuilder(tok, chat_template_kwargs={"chat_template": counting})
    with pytest.raises(ValueError, match="re-renders earlier messages"):
        builder.extend([1], [2], "next")


def test_builder_needs_encode_and_apply_chat_template() -> None:
    class NoEncode:
        def apply_chat_template(self, *args: Any, **kwargs: Any) -> str:
            return ""

    with pytest.raises(TypeError, match=r"encode\(\)"):
        ChatPromptBuilder(NoEncode())  # type: ignore[arg-type]


@styles
def test_builder_episodes_lay_out_with_env_tokens_masked(style: str) -> None:
    tok = bpe_tokenizer(style)
    builder = ChatPromptBuilder(tok, system_prompt="You play a game.")
    replies, observations = ["guess 5", "guess 7", "guess 6"], ["higher", "lower", "correct"]
    prompt, turns = builder.start("Guess a number."), []
    for t, (reply, observation) in enumerate(zip(replies, observations, strict=True)):
        response = [*tok.encode(reply, add_special_tokens=False), tok.eos_token_id]
        turns.append(
            Turn(
                observation,
                reply,
                float(t == 2),
                terminated=t == 2,
                prompt_ids=prompt,
                response_ids=response,
            )
        )
        prompt = builder.extend(prompt, response, observation)
    rows = episode_rows([Episode("guess", turns=turns)]).split(pad_token_id=tok.pad_token_id)
    policy = rows.responses[0][rows.response_mask[0] == 1].tolist()
    assert tok.decode(policy) == "".join(r + tok.eos_token for r in replies)
    env = rows.responses[0][
        (rows.response_mask[0] == 0) & (rows.attention_mask[0, rows.prompts.shape[1] :] == 1)
    ]
    assert "higher" in tok.decode(env.tolist())
    assert "guess" not in tok.decode(env.tolist())
    assert rows.token_rewards.sum() == 1.0
