"""Specification of the chat vocabulary (`xpgym.core.chat`): conversations and
`ChatPromptBuilder`."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpgym.core.chat import ChatPromptBuilder, observation_messages, with_system_prompt
from xpgym.core.trajectory import Episode, Turn
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
"""Llama 3 style headers."""

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


@styles
@settings(max_examples=40, deadline=None)
@given(
    system=st.none() | contents,
    first=contents,
    steps=st.lists(
        st.tuples(contents, contents, st.sampled_from(["user", "tool"]), st.integers(0, 2)),
        min_size=1,
        max_size=4,
    ),
)
def test_builder_equals_rendering_the_whole_conversation(
    style: str, system: str | None, first: str, steps: list[tuple[str, str, str, int]]
) -> None:
    tok = bpe_tokenizer(style)
    builder = ChatPromptBuilder(tok, system_prompt=system)
    conversation = ([] if system is None else [{"role": "system", "content": system}]) + [
        {"role": "user", "content": first}
    ]
    prompt = builder.start(first)
    for reply, observation, role, stop in steps:
        # the sampler's output: content, then the stop token kept, stripped, or followed by
        # the rest of the end-of-turn text
        response = tok.encode(reply, add_special_tokens=False)
        response += builder.end_of_turn_ids[: [1, 0, len(builder.end_of_turn_ids)][stop]]
        following = builder.extend(prompt, response, observation, role=role)
        assert following[: len(prompt) + len(response)] == prompt + response
        prompt = following
        conversation += [
            {"role": "assistant", "content": reply},
            {"role": role, "content": observation},
        ]
    rendered = tok.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    assert prompt == tok.encode(rendered, add_special_tokens=False)


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
