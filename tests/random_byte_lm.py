"""A random-weight byte-level causal LM and its tokenizer, built offline, for tests.

`tiny_tokenizer()` is a byte-level tokenizer (every UTF-8 byte is one token, ids 0..255, no
merges) plus three special tokens, wrapped in `transformers.PreTrainedTokenizerFast` with a
ChatML chat template (the one Qwen models use):

* ``<|endoftext|>`` (id 256): the pad token;
* ``<|im_start|>`` (id 257) and ``<|im_end|>`` (id 258, the eos token): message delimiters,
  ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message, and
  ``<|im_start|>assistant\\n`` as the generation prompt.

`tiny_model(seed)` is a 2-layer `Qwen2ForCausalLM` (hidden size 32) over that vocabulary,
initialised from `seed` without touching the global torch RNG, in float32 and eval mode. Its
weights are random, so it writes random bytes; tests use it for shapes, determinism and
token bookkeeping, never for what it says. (The model the CPU demo trains is another one:
`xpgym.reference.tiny_model`, word-level, with a vocabulary taken from an env's text.)

Importing this module imports `transformers` and `torch`, and sets torch to one intra-op
thread: the model is so small that thread synchronisation costs more than it saves, most of
all on a busy machine (measured in docs/benchmarks.md, "The tests' random byte-level LM").
"""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

__all__ = [
    "CHATML_TEMPLATE",
    "EOS_ID",
    "IM_START_ID",
    "PAD_ID",
    "VOCAB_SIZE",
    "tiny_model",
    "tiny_tokenizer",
]

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""ChatML, as in Qwen2/Qwen2.5 chat templates (without tool support)."""

torch.set_num_threads(1)

PAD_ID = 256
IM_START_ID = 257
EOS_ID = 258
VOCAB_SIZE = 259


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """The byte-level ChatML tokenizer described in the module docstring (a new object)."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet(), key=_byte_of)
    vocab = {char: i for i, char in enumerate(alphabet)}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        padding_side="left",
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") == EOS_ID
    return tokenizer


def tiny_model(seed: int = 0) -> Qwen2ForCausalLM:
    """A randomly initialised 2-layer Qwen2 LM over `tiny_tokenizer`'s vocabulary.

    Same `seed`, same weights; the global torch RNG state is left as it was.
    """
    config = Qwen2Config(
        vocab_size=VOCAB_SIZE,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = EOS_ID
    model.generation_config.pad_token_id = PAD_ID
    return model.float().eval()


def _byte_of(char: str) -> int:
    """The byte that `ByteLevel` maps to `char` (GPT-2's bytes_to_unicode, inverted)."""
    code = ord(char)
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    if code in printable:
        return code
    missing = [b for b in range(256) if b not in printable]
    return missing[code - 256]
