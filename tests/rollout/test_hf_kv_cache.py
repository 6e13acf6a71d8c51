"""`HFPolicy`'s cross-turn KV cache: the same tokens and log-probs as uncached ``generate``.

Every test runs the same conversations twice, with ``kv_cache=True`` (the default) and with
``kv_cache=False`` (``model.generate`` on whole prompts), from the same seed, and compares:
sampled and greedy tokens exactly, log-probs to 1e-5. `CacheStats` shows that the cache was
really used (an implementation that always re-prefilled would pass the comparison alone).
"""

from __future__ import annotations

import functools
import random
from typing import Any

import pytest

random_byte_lm = pytest.importorskip("random_byte_lm", reason="needs torch and transformers")
torch = pytest.importorskip("torch", reason="needs torch")

from toy_envs import ToyEnv  # noqa: E402

from xpgym.core.vector import SyncVectorEnv  # noqa: E402
from xpgym.rollout.collector import RolloutCollector  # noqa: E402
from xpgym.rollout.policies.hf import HFPolicy  # noqa: E402

# Bytes 0..47 stop generations too, so rows of one batch stop at different steps (the random
# model's greedy replies repeat one byte: rows stop after one token or run to the budget).
STOPS = [random_byte_lm.EOS_ID, *range(48)]
SETTINGS = {
    "sampled": {},
    "greedy": {"greedy": True},
    "warped": {"temperature": 0.7, "top_k": 40, "top_p": 0.9},
}


@pytest.fixture(scope="module")
def model():
    return random_byte_lm.tiny_model(seed=0)


@pytest.fixture(scope="module")
def tokenizer():
    return random_byte_lm.tiny_tokenizer()


def policy(model: Any, tokenizer: Any, kv_cache: bool, **kwargs: Any) -> HFPolicy:
    settings = {"max_new_tokens": 8, "seed": 3, "stop_token_ids": STOPS, **kwargs}
    return HFPolicy(model, tokenizer, kv_cache=kv_cache, **settings)


def converse(policy: HFPolicy, turns: list[int], late: int = 0, seed: int = 0) -> list[Any]:
    """Multi-turn conversations: conversation ``c`` lasts ``turns[c]`` turns, and the last
    `late` of them start one turn late (prompts that extend nothing while the others
    continue). Each prompt is the previous prompt + response + 1..11 random "env" bytes.
    Returns ``(turn, conversation, token_ids, logprobs)`` of every generation."""
    rng = random.Random(seed)
    start = {c: int(c >= len(turns) - late) for c in range(len(turns))}
    prompts = {
        c: [random_byte_lm.IM_START_ID] + [rng.randrange(256) for _ in range(rng.randrange(3, 30))]
        for c in range(len(turns))
    }
    out = []
    for turn in range(max(start[c] + turns[c] for c in prompts)):
        live = [c for c in prompts if start[c] <= turn < start[c] + turns[c]]
        for c, generation in zip(live, policy.generate([prompts[c] for c in live]), strict=True):
            out.append((turn, c, generation.token_ids, generation.logprobs))
            prompts[c] = (
                prompts[c]
                + generation.token_ids
                + [rng.randrange(256) for _ in range(rng.randrange(1, 12))]
            )
    return out


def assert_same(cached: list[Any], uncached: list[Any]) -> None:
    assert [g[:3] for g in cached] == [g[:3] for g in uncached]
    for (*_, a), (*_, b) in zip(cached, uncached, strict=True):
        assert a == pytest.approx(b, abs=1e-5)


@pytest.mark.parametrize("mode", SETTINGS)
def test_cached_turns_match_uncached_generate(model, tokenizer, mode):
    turns = [1, 2, 5, 3, 4, 2, 5, 1]  # conversations end at different turns
    cached_policy = policy(model, tokenizer, True, **SETTINGS[mode])
    cached = converse(cached_policy, turns, late=2)
    uncached = converse(policy(model, tokenizer, False, **SETTINGS[mode]), turns, late=2)
    assert_same(cached, uncached)
    lengths = {len(g[2]) for g in cached}
    assert len(lengths) > 1  # some rows stopped before others
    stats = cached_policy.cache_stats
    assert stats is not None
    # the first call, and at most one more when the holes made the cache twice too wide
    assert stats.full_prefills <= 2
    assert stats.reused > stats.prefilled  # later turns prefilled only their new tokens


def test_batch_size_slots_keep_their_own_cache(model, tokenizer):
    turns = [3, 3, 2, 4, 3]
    cached_policy = policy(model, tokenizer, True, batch_size=2)
    cached = converse(cached_policy, turns)
    assert_same(cached, converse(policy(model, tokenizer, False, batch_size=2), turns))
    assert cached_policy.cache_stats.reused > 0


def test_changed_weights_drop_the_cache(model, tokenizer):
    changed = random_byte_lm.tiny_model(seed=0)
    cached_policy = policy(changed, tokenizer, True)
    reference = policy(changed, tokenizer, False)
    first = [[random_byte_lm.IM_START_ID, 65, 66, 67], [random_byte_lm.IM_START_ID, 70]]
    cached = converse_once(cached_policy, first)
    assert_same(cached, converse_once(reference, first))
    again = [p + g[2] + [72] for p, g in zip(first, cached, strict=True)]  # extends the cache
    with torch.no_grad():  # an optimiser step changes the weights in place
        next(changed.parameters()).mul_(1.5)
    assert_same(converse_once(cached_policy, again), converse_once(reference, again))
    assert cached_policy.cache_stats.full_prefills == 2
    assert cached_policy.cache_stats.reused == 0


def converse_once(p: HFPolicy, prompts: list[list[int]]) -> list[Any]:
    return [(0, c, g.token_ids, g.logprobs) for c, g in enumerate(p.generate(prompts))]


def test_a_batch_that_continues_nothing_is_prefilled_whole(model, tokenizer):
    cached_policy = policy(model, tokenizer, True)
    converse(cached_policy, [2, 2], seed=1)
    converse(cached_policy, [2, 2], seed=2)  # new conversations: no cached row is a prefix
    assert cached_policy.cache_stats.full_prefills == 2
    cached_policy.clear_cache()
    converse_once(cached_policy, [[random_byte_lm.IM_START_ID, 65]])
    assert cached_policy.cache_stats.full_prefills == 3


def test_collector_episodes_match_with_and_without_cache(model, tokenizer):
    """Token-exact episodes of different lengths, more episodes than sub-envs: new episodes
    start (full prefill) while others continue (cached) in the same calls."""

    def collect(kv_cache: bool) -> list[Any]:
        envs = [functools.partial(ToyEnv, episode_length=n) for n in (1, 3, 5)]
        with SyncVectorEnv(envs) as vec:
            collector = RolloutCollector(
                vec, policy(model, tokenizer, kv_cache), system_prompt="Go."
            )
            return collector.collect(7, seed=4)

    cached, uncached = collect(True), collect(False)
    assert len({len(e.turns) for e in cached}) > 1
    for a, b in zip(cached, uncached, strict=True):
        assert [t.response_ids for t in a.turns] == [t.response_ids for t in b.turns]
        assert [t.prompt_ids for t in a.turns] == [t.prompt_ids for t in b.turns]
        for ta, tb in zip(a.turns, b.turns, strict=True):
            assert ta.response_logprobs == pytest.approx(tb.response_logprobs, abs=1e-5)


def test_generation_kwargs_or_unsupported_processors_decode_uncached(model, tokenizer):
    assert policy(model, tokenizer, True).kv_cache
    assert not policy(model, tokenizer, False).kv_cache
    assert not policy(model, tokenizer, True, generation_kwargs={"min_new_tokens": 2}).kv_cache
    custom = random_byte_lm.tiny_model(seed=0)
    custom.generation_config.no_repeat_ngram_size = 2
    assert not policy(custom, tokenizer, True).kv_cache
    assert policy(custom, tokenizer, False).cache_stats is None


@pytest.mark.parametrize("mode", ["sampled", "greedy"])
def test_prompts_a_cached_row_went_past_reuse_all_but_their_last_token(model, tokenizer, mode):
    """Fork branches: two prompts that the first row already extends (the row holds the
    prompt and its response) are decoded from the row's first tokens, with the same tokens
    and log-probs as uncached ``generate``; only their last token is prefilled."""
    first = [[random_byte_lm.IM_START_ID, 65, 66, 67, 68], [random_byte_lm.IM_START_ID, 70]]
    cached_policy = policy(model, tokenizer, True, **SETTINGS[mode])
    reference = policy(model, tokenizer, False, **SETTINGS[mode])
    assert_same(converse_once(cached_policy, first), converse_once(reference, first))
    prefilled = cached_policy.cache_stats.prefilled
    again = [first[0], first[0]]
    assert_same(converse_once(cached_policy, again), converse_once(reference, again))
    stats = cached_policy.cache_stats
    assert stats.full_prefills == 1
    assert stats.reused == 2 * (len(first[0]) - 1)
    assert stats.prefilled - prefilled == 2


def test_cache_layers_grow_in_place_and_return_what_transformers_layers_return():
    cache_utils = pytest.importorskip("transformers.cache_utils")
    from xpgym.rollout.policies.hf_cache import _growing_layer

    growing_class = _growing_layer()
    if growing_class is None or not hasattr(cache_utils, "DynamicLayer"):
        pytest.skip("this transformers has no layered caches")
    growing, dynamic = growing_class(), cache_utils.DynamicLayer()
    generator = torch.Generator().manual_seed(0)
    # The buffers the keys have lived in so far. Held (not only their addresses), so that a
    # freed buffer's address cannot come back as a new buffer's and be counted once.
    buffers: list[torch.Tensor] = []

    def update(width: int) -> None:
        batch = growing.keys.shape[0] if growing.get_seq_length() else 3
        keys, values = (torch.randn(batch, 2, width, 4, generator=generator) for _ in range(2))
        got, want = growing.update(keys, values), dynamic.update(keys, values)
        assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
        assert growing.get_seq_length() == dynamic.get_seq_length()
        if growing.keys.data_ptr() not in [held.data_ptr() for held in buffers]:
            buffers.append(growing.keys)

    for width in (5, 1, 1, 1, 7, 1):  # room for 5, then 10 (doubled), then 16
        update(width)
    assert len(buffers) == 3
    for layer in (growing, dynamic):  # rows 2 and 0, as a batch slot continues them
        layer.batch_select_indices(torch.tensor([2, 0]))
    assert torch.equal(growing.keys, dynamic.keys)
    update(1)  # the selected buffer kept its room: written in place
    assert len(buffers) == 4
    for layer in (growing, dynamic):  # transformers' own methods, then updates adopt them
        layer.crop(-2)
    update(3)
    for layer in (growing, dynamic):
        layer.reset()
    update(2)


def test_the_tiny_models_cache_is_built_of_growing_layers(model):
    from xpgym.rollout.policies.hf_cache import _growing_layer, _new_cache

    if _growing_layer() is None:
        pytest.skip("this transformers has no layered caches")
    cache = _new_cache(model)
    assert [type(layer) for layer in cache.layers] == [_growing_layer()] * 2


def test_the_first_row_starting_with_a_prompt_is_found_past_shorter_and_other_rows():
    from xpgym.rollout.policies.hf_cache import _first_row_starting_with

    rows = [(1, 2), (1, 2, 4, 3), (1, 2, 3), (1, 2, 3, 9), (5, 2, 3, 9)]
    assert _first_row_starting_with(rows, (1, 2, 3)) == 2
    assert _first_row_starting_with(rows, (2, 3)) is None
    assert _first_row_starting_with(rows, (5,)) == 4
    assert _first_row_starting_with(rows[:2], (1, 2, 3)) is None


def test_the_longest_row_that_a_prompt_extends_is_found_among_rows_of_every_length():
    from xpgym.rollout.policies.hf_cache import _longest_row_before, _rows_by_length_and_end

    rows = [(1, 2), (1, 2, 3), (1, 2, 3, 4), (1, 2, 9), (1, 2, 3), ()]
    by_end = _rows_by_length_and_end(rows)
    lengths = sorted({n for n, _ in by_end}, reverse=True)
    assert _longest_row_before(by_end, lengths, (1, 2, 3, 4, 5)) == (2, 4)
    assert _longest_row_before(by_end, lengths, (1, 2, 3, 4)) == (4, 3)  # the last of twins
    assert _longest_row_before(by_end, lengths, (1, 2, 9, 9)) == (3, 3)
    assert _longest_row_before(by_end, lengths, (1, 5)) == (5, 0)  # the empty row
    assert _longest_row_before(_rows_by_length_and_end(rows[:5]), lengths, (7, 2, 3)) is None
