r"""A tiny chat language model built locally for CPU demos and tests: no download, random init.

Two builders:

* `build_tiny_tokenizer` makes a word-level ``PreTrainedTokenizerFast`` whose vocabulary is
  the pieces of a text corpus (e.g. `env_corpus`, the texts of a few random episodes of an
  env), every integer ``0..max_number`` as one token, ``\boxed{`` and ``}`` as pieces, and
  the ChatML specials. Its chat template is ChatML (``<|im_start|>role\ncontent<|im_end|>\n``);
  ``<|im_end|>`` is the EOS token, padding is on the left. Decoding is exact: the pieces are
  concatenated (spaces are part of the pieces), so ``decode(encode(text)) == text`` for any
  text whose pieces are all in the vocabulary; unknown pieces become ``<|unk|>``.
* `build_tiny_model` makes a randomly initialised, seeded Llama-style decoder
  (``transformers.LlamaForCausalLM``) sized to that vocabulary.

Both are deterministic: the same arguments give the same vocabulary and the same weights.
torch and transformers are imported inside the functions, so importing this module is cheap.

The model knows nothing at first. In the CPU demo (``docs/demo.md``) it is first
trained as a plain language model on transcripts of episodes played by a random policy
(`xpgym.reference.warm_start`), which teaches it the action format and how the feedback
text relates to the guesses without showing it any strategy; RL then has to find the
strategy.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

    from xpgym.core.env import Env

__all__ = [
    "BOXED_OPEN",
    "CHATML_TEMPLATE",
    "PIECE_PATTERN",
    "SPECIAL_TOKENS",
    "TOOL_CALL_TOKENS",
    "TOOL_CHAT_TEMPLATE",
    "TOOL_RESPONSE_TEMPLATE",
    "build_tiny_model",
    "build_tiny_tokenizer",
    "env_corpus",
    "numeric_embedding",
]

PAD, UNK, IM_START, IM_END = "<|pad|>", "<|unk|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, UNK, IM_START, IM_END)
"""Token ids 0..3, in this order: padding, unknown piece, message start, message end (EOS)."""

BOXED_OPEN = "\\boxed{"
r"""``\boxed{`` is one token, so a guess is the three tokens ``\boxed{``, ``7``, ``}``."""

PIECE_PATTERN = r" ?[A-Za-z]+| ?[^\sA-Za-z0-9]|[0-9]+|\s"
"""How text is cut into pieces: a word or a punctuation mark with its leading space, a run
of digits (no leading space, so a number is the same token everywhere), or one whitespace
character."""

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""ChatML, as in Qwen2 and SmolLM2, without a default system prompt."""

TOOL_CALL_TOKENS: tuple[str, ...] = ("<tool_call>", "</tool_call>")
"""With ``tool_calls``, each of these is one token (as in Qwen's tokenizers)."""

TOOL_CHAT_TEMPLATE = (
    "{% if tools %}"
    "{{ '<|im_start|>system\n' }}"
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + '\n\n' }}{% endif %}"
    "{{ 'Tools:' }}{% for tool in tools %}{{ '\n' + (tool | tojson) }}{% endfor %}"
    '{{ \'\nCall a tool with <tool_call>{"name": ..., "arguments": {...}}</tool_call>.\' }}'
    "{{ '<|im_end|>\n' }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if not (tools and loop.first and message['role'] == 'system') %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + (message['content'] or '') }}"
    "{% for call in message.get('tool_calls') or [] %}"
    "{% set function = call['function'] if call['function'] is defined else call %}"
    "{{ '<tool_call>{\"name\": \"' + function['name'] + '\", \"arguments\": ' }}"
    "{{ (function['arguments'] | tojson) + '}</tool_call>' }}"
    "{% endfor %}"
    "{{ '<|im_end|>\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""`CHATML_TEMPLATE` with tools: a system message lists the ``tools`` (one JSON schema a
line), an assistant message writes each of its ``tool_calls`` as
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` after its content, and a
``tool`` message is a ChatML message of role ``tool``. Each message renders the same
whatever follows it (prefix-preserving, as TRL's tool loop needs)."""

TOOL_RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}
"""The transformers response template (``tokenizer.response_template``, transformers >=
5.13) that reads an assistant message of `TOOL_CHAT_TEMPLATE` back: its content and its
tool calls (``parse_response``)."""

_ROLES = ("system", "user", "assistant", "tool")


def env_corpus(env: Env, episodes: int = 20, seed: int = 0) -> list[str]:
    """Texts of `episodes` episodes of `env` played with `env.sample_random_action()`.

    The observations and actions seen, in order, for building a tokenizer's vocabulary. The
    env is reset with seeds ``seed, seed + 1, ...``; nothing else about it is used.
    """
    texts: list[str] = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        texts.append(str(obs))
        done = False
        while not done:
            action = env.sample_random_action()
            obs, _, terminated, truncated, _ = env.step(action)
            texts += [action, str(obs)]
            done = terminated or truncated
    return texts


def build_tiny_tokenizer(
    corpus: Iterable[str] = (),
    *,
    max_number: int = 100,
    extra_pieces: Iterable[str] = (),
    tool_calls: bool = False,
) -> PreTrainedTokenizerFast:
    r"""A word-level tokenizer over `corpus` with a ChatML chat template.

    Vocabulary, in id order: `SPECIAL_TOKENS` (ids 0..3), ``\boxed{``, the integers
    ``0..max_number``, ``"\n"``, ``" "``, the role names, then every other piece of
    `corpus` and `extra_pieces` (cut by `PIECE_PATTERN`) in sorted order.

    Args:
        corpus: Texts whose pieces become tokens, e.g. ``env_corpus(env)``.
        max_number: Largest integer that is a single token; larger ones are ``<|unk|>``.
        extra_pieces: Further texts to add, cut the same way.
        tool_calls: Chat with tools: `TOOL_CHAT_TEMPLATE` as the chat template (its own
            text's pieces join the vocabulary; the tools' schemas and calls are the
            caller's `corpus`), `TOOL_CALL_TOKENS` as tokens and `TOOL_RESPONSE_TEMPLATE` as
            the response template.

    Returns:
        A ``transformers.PreTrainedTokenizerFast`` with ``eos_token="<|im_end|>"``,
        ``pad_token="<|pad|>"`` (distinct ids), no BOS, left padding, and `CHATML_TEMPLATE`
        (or `TOOL_CHAT_TEMPLATE`) as its chat template.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if isinstance(max_number, bool) or not isinstance(max_number, int) or max_number < 0:
        raise ValueError(f"max_number must be a non-negative int, got {max_number!r}")
    pre_tokenizer = pre_tokenizers.Split(Regex(PIECE_PATTERN), behavior="isolated")
    fixed = [*SPECIAL_TOKENS, BOXED_OPEN, *map(str, range(max_number + 1)), "\n", " ", *_ROLES]
    seen = set(fixed)
    pieces: set[str] = set()
    template_text = [TOOL_CHAT_TEMPLATE] if tool_calls else []
    markers = TOOL_CALL_TOKENS if tool_calls else ()
    for text in [*corpus, *extra_pieces, *template_text]:
        for marker in markers:  # an added token, like \boxed{: never cut into pieces
            text = text.replace(marker, BOXED_OPEN)
        for chunk in text.split(BOXED_OPEN):  # \boxed{ is an added token, never split
            for piece, _ in pre_tokenizer.pre_tokenize_str(chunk):
                if piece not in seen and not piece.isdigit():
                    pieces.add(piece)
    vocab = {piece: i for i, piece in enumerate([*fixed, *sorted(pieces)])}

    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoders.Fuse()
    tokenizer.add_special_tokens([AddedToken(t, normalized=False) for t in SPECIAL_TOKENS])
    tokenizer.add_tokens([AddedToken(BOXED_OPEN, normalized=False)])
    if tool_calls:
        tokenizer.add_tokens([AddedToken(t, normalized=False) for t in TOOL_CALL_TOKENS])
    built = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=PAD,
        unk_token=UNK,
        eos_token=IM_END,
        padding_side="left",
        chat_template=TOOL_CHAT_TEMPLATE if tool_calls else CHATML_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=4096,
    )
    if tool_calls:
        built.response_template = TOOL_RESPONSE_TEMPLATE
    return built


def build_tiny_model(
    tokenizer: PreTrainedTokenizerFast,
    *,
    hidden_size: int = 128,
    num_layers: int = 2,
    num_heads: int = 4,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 1024,
    numeric_embeddings: bool = True,
    seed: int = 0,
    **config_overrides: Any,
) -> PreTrainedModel:
    """A randomly initialised Llama-style decoder for `tokenizer`, the same for the same seed.

    Args:
        tokenizer: Gives the vocabulary size and the pad/EOS ids.
        hidden_size, num_layers, num_heads: Width, depth and attention heads
            (`hidden_size` must be divisible by `num_heads`).
        intermediate_size: MLP width; default ``4 * hidden_size``.
        max_position_embeddings: Longest sequence (prompt + response) the model is used on.
        numeric_embeddings: Give the integer tokens (``"0"``, ``"1"``, ...) an embedding that
            encodes their value (see `numeric_embedding`) in their first dimensions, the
            prior about numbers a pretrained model would bring; the rest of each vector is
            random as usual and everything stays trainable.
        seed: Seeds the weight initialisation; the global torch RNG is left as it was.
        **config_overrides: Passed to ``transformers.LlamaConfig``.

    Returns:
        A ``LlamaForCausalLM`` in float32, in eval mode, with tied input/output embeddings.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if hidden_size % num_heads:
        raise ValueError(
            f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})"
        )
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 4 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_position_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
        **config_overrides,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    if numeric_embeddings:
        vocab = tokenizer.get_vocab()
        numbers = sorted(
            int(piece) for piece in vocab if piece.isdigit() and piece == str(int(piece))
        )
        codes = numeric_embedding(numbers, hidden_size)
        weight = model.get_input_embeddings().weight
        assert isinstance(weight, torch.Tensor)  # an nn.Embedding's weight
        with torch.no_grad():
            for n, code in zip(numbers, codes, strict=True):
                weight[vocab[str(n)], : len(code)] = torch.tensor(code, dtype=weight.dtype)
    return model.float().eval()


def numeric_embedding(
    numbers: list[int], hidden_size: int, num_frequencies: int = 8, scale: float = 0.05
) -> list[list[float]]:
    """Value codes for integer tokens: ``2 * num_frequencies + 1`` numbers per integer.

    For integer ``n``: ``sin(2 pi n / p)`` and ``cos(2 pi n / p)`` for `num_frequencies`
    periods ``p`` spaced geometrically from 3 to ``4 * max(numbers)``, then
    ``log(1 + n) / log(1 + max(numbers))``, all times `scale` (the random part of an
    embedding has standard deviation 0.02). Nearby integers get nearby codes, and a linear
    read-out can tell larger from smaller. Codes are cut to `hidden_size` numbers.
    """
    import math

    top = max(max(numbers), 1)
    k = num_frequencies
    periods = [3.0 * (4.0 * top / 3.0) ** (i / max(k - 1, 1)) for i in range(k)]
    codes = []
    for n in numbers:
        code = []
        for p in periods:
            code += [math.sin(2 * math.pi * n / p), math.cos(2 * math.pi * n / p)]
        code.append(math.log1p(max(n, 0)) / math.log1p(top))
        codes.append([scale * c for c in code][:hidden_size])
    return codes
