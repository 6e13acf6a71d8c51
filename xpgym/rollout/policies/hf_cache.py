"""Cross-turn KV cache for `xpgym.rollout.policies.hf.HFPolicy`: prefill only what a turn adds.

In a multi-turn episode the next prompt extends the previous prompt and response
token-exactly (the collector's ``"tokens"`` mode, `xpgym.core.chat.ChatPromptBuilder`), so the
keys and values of that prefix were computed in the previous call. `CachedDecoder` keeps them
and prefills only the new tokens, for the whole batch of in-flight episodes at once. Torch is
imported by the caller; this module only receives tensors and the model.

Layout
    One batched cache (``[B, heads, S, head_dim]`` per layer) holds row ``b``'s tokens in order,
    with holes: the left padding of each turn's block of new tokens and the tokens fed after
    the row stopped. Holes get attention mask 0, and ``position_ids`` count the row's real
    tokens only, so each real token sees the same keys at the same positions as in a fresh
    left-padded prefill of its whole prompt: log-probs agree with ``model.generate`` up to
    float rounding (tested to 1e-5), and so do the sampled tokens.

One call, prompts ``p_0 .. p_{B-1}``:
    1. Match: prompt ``p`` continues cached row ``r`` if ``r``'s real tokens are a proper
       prefix of ``p`` (it reuses all of them), or if ``p`` is a prefix of ``r`` (it reuses
       ``r``'s first ``len(p) - 1`` tokens and masks the rest of the row as holes: a fork
       branch whose first prompt its parent's row already went past,
       `xpgym.rollout.collector`), and the model's parameters have not changed since (their
       in-place version counters). The row reusing the most tokens wins; several prompts
       may continue one row. Rows no prompt continues are dropped. A prompt without a
       match gets a fully masked slot and is prefilled whole; if nothing matches, or the
       cache has become more than twice as wide as its longest row, the cache is dropped
       and every prompt is prefilled (memory is bounded by one batch).
    2. Prefill: one forward pass over the new tokens, left-padded to the longest.
    3. Decode like ``model.generate`` with ``do_sample`` (or greedy): logits in float32,
       then temperature, top-k and top-p (transformers' own warpers, in ``generate``'s
       order), then one ``torch.multinomial`` draw per step for the whole batch (finished
       rows draw too and get ``pad_token_id``), so the same RNG state gives the same tokens.
       It stops when every row has produced a stop token or after ``max_new_tokens``.
    4. Keep: each row's prompt plus the response tokens that were fed back (all but the last).

Memory: where transformers' cache is built of layers (``cache_utils.DynamicLayer``,
transformers >= 4.56), each full-attention layer keeps its keys and values in a buffer with
room to grow (`_GrowingLayer`): a step writes its new slots in place and the model sees a
view of the filled part, instead of ``torch.cat`` copying the whole cache at every step of
every layer. The buffer doubles when full, so it holds at most twice the cache's slots.

Limits: the model's cache must support ``batch_select_indices`` (transformers'
``DynamicCache``, what decoder-only models build by default). With sliding-window attention
the window counts cache slots, holes included, so once a cache is wider than the window the
results drift from ``generate``'s; use ``kv_cache=False`` for such models with long prompts.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any

__all__ = ["CacheStats", "CachedDecoder"]


@dataclass
class CacheStats:
    """Token counts since the policy was built: ``prefilled`` tokens went through a forward
    pass as prompt tokens, ``reused`` prompt tokens came from the cache instead, and
    ``full_prefills`` counts calls in which no cache row was reused."""

    prefilled: int = 0
    reused: int = 0
    full_prefills: int = 0


@dataclass
class _Session:
    cache: Any  # the model's cache object, batch = len(rows)
    mask: Any  # [B, S] long: 1 where the slot holds a real token of the row
    rows: list[tuple[int, ...]]  # each row's real tokens, in order
    weights: tuple[int, ...]  # parameter versions when the cache was computed


class CachedDecoder:
    """Batched sampling with a KV cache kept across calls (see the module docstring).

    One `_Session` per batch slot (``HFPolicy.batch_size`` splits a call into slots); a prompt
    only continues rows of its own slot's previous batch.
    """

    def __init__(
        self,
        model: Any,
        *,
        max_new_tokens: int,
        greedy: bool,
        temperature: float,
        top_k: int,
        top_p: float,
        stop_token_ids: list[int],
        pad_token_id: int,
    ) -> None:
        self.model = model
        self.max_new_tokens = max_new_tokens
        self.greedy = greedy
        self.stop_token_ids = stop_token_ids
        self.pad_token_id = pad_token_id
        self.stats = CacheStats()
        self._warpers = [] if greedy else _warpers(temperature, top_k, top_p)
        parameters = inspect.signature(model.forward).parameters
        self._keep_last = {"logits_to_keep": 1} if "logits_to_keep" in parameters else {}
        # transformers >= 5.24 names the cache argument ``cache``, earlier ``past_key_values``
        self._cache_arg = "cache" if "cache" in parameters else "past_key_values"
        self._sessions: dict[int, _Session] = {}

    def clear(self) -> None:
        """Drop every cached row."""
        self._sessions.clear()

    def decode(
        self, torch: Any, prompts: list[list[int]], slot: int, device: Any
    ) -> tuple[Any, Any]:
        """``(tokens, logprobs)``, both ``[B, T]`` on the CPU, for `prompts` in batch `slot`,
        computed on `device` (the model's: ``model.device``, which the caller has read).

        Row ``b`` holds its ``T`` drawn tokens (``pad_token_id`` after it stopped) and their
        log-probs under the processed distribution. Call it inside ``torch.inference_mode``
        with the RNG seeded: the draws are ``torch.multinomial`` calls like ``generate``'s.
        """
        session = self._sessions.pop(slot, None)  # consumed: a failed call leaves no cache
        weights = tuple(p._version for p in self.model.parameters())
        matches = self._match(session, prompts, weights)
        if session is None or all(m is None for m in matches):
            self.stats.full_prefills += 1
            cache, old_mask = (
                _new_cache(self.model),
                torch.zeros((len(prompts), 0), dtype=torch.long),
            )
            reused = [0] * len(prompts)
        else:
            index = torch.tensor([0 if m is None else m[0] for m in matches], dtype=torch.long)
            cache = session.cache
            cache.batch_select_indices(index.to(device))
            reused = [0 if m is None else m[1] for m in matches]
            # keep each row's first `reused` real tokens; the rest become holes
            old_mask = session.mask[index]
            kept = old_mask.cumsum(dim=1) <= torch.tensor(reused, dtype=torch.long)[:, None]
            old_mask = torch.where(kept, old_mask, 0)
        new = [prompt[start:] for prompt, start in zip(prompts, reused, strict=True)]
        self.stats.reused += sum(reused)
        self.stats.prefilled += sum(len(n) for n in new)

        width = max(len(n) for n in new)
        pads = [width - len(tokens) for tokens in new]  # left padding inside the block
        block = torch.tensor(
            [[self.pad_token_id] * pad + tokens for pad, tokens in zip(pads, new, strict=True)],
            dtype=torch.long,
        )
        block_mask = (torch.arange(width)[None, :] >= torch.tensor(pads)[:, None]).long()
        real = old_mask.sum(dim=1)  # real tokens before the block
        positions = (real[:, None] + block_mask.cumsum(dim=1) - 1).clamp(min=0)
        mask = torch.cat([old_mask, block_mask], dim=1).to(device)
        logits, cache = self._forward(block.to(device), mask, positions.to(device), cache)
        real = (real + block_mask.sum(dim=1)).to(device)

        stops = torch.tensor(self.stop_token_ids, dtype=torch.long, device=device)
        alive = torch.ones(len(new), dtype=torch.bool, device=device)
        tokens, logprobs, fed = [], [], []
        for step in range(self.max_new_tokens):
            scores = logits.float()
            for warp in self._warpers:
                scores = warp(None, scores)
            if self.greedy:
                picked = scores.argmax(dim=-1)
            else:
                picked = torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1)[:, 0]
            picked = torch.where(alive, picked, self.pad_token_id)
            tokens.append(picked)
            logprobs.append(torch.log_softmax(scores, dim=-1).gather(-1, picked[:, None])[:, 0])
            was_alive = alive
            alive = alive & ~torch.isin(picked, stops)
            if step == self.max_new_tokens - 1 or not alive.any():
                break
            # Feed the token back; a row that had already stopped gets a hole.
            fed.append(was_alive)
            mask = torch.cat([mask, was_alive[:, None].long()], dim=1)
            logits, cache = self._forward(picked[:, None], mask, real[:, None], cache)
            real = real + was_alive.long()

        tokens_t = torch.stack(tokens, dim=1).cpu()
        fed_rows = torch.stack(fed, dim=1).tolist() if fed else [[]] * len(new)
        rows = [  # drawn tokens outnumber fed ones: the last draw is never fed back
            (*prompt, *(token for token, was_fed in zip(drawn, fed_row, strict=False) if was_fed))
            for prompt, drawn, fed_row in zip(prompts, tokens_t.tolist(), fed_rows, strict=True)
        ]
        self._sessions[slot] = _Session(cache, mask.cpu(), rows, weights)
        return tokens_t, torch.stack(logprobs, dim=1).cpu()

    def _match(
        self, session: _Session | None, prompts: list[list[int]], weights: tuple[int, ...]
    ) -> list[tuple[int, int] | None]:
        """For each prompt, ``(row, tokens reused)`` of the cached row that saves the most
        prefill (module docstring, step 1), if any."""
        if session is None or session.weights != weights:
            return [None] * len(prompts)
        longest = max(len(row) for row in session.rows)
        if session.mask.shape[1] > 2 * longest:
            return [None] * len(prompts)  # too many holes: start a compact cache
        by_end = _rows_by_length_and_end(session.rows)
        lengths = sorted({n for n, _ in by_end}, reverse=True)
        matches: list[tuple[int, int] | None] = []
        for prompt in prompts:
            key = tuple(prompt)
            # (most prompts are longer than every row: then no row starts with them)
            within = (
                _first_row_starting_with(session.rows, key) if 1 < len(key) <= longest else None
            )
            if within is not None:
                matches.append((within, len(key) - 1))
            else:
                matches.append(_longest_row_before(by_end, lengths, key))
        return matches

    def _forward(self, input_ids: Any, mask: Any, positions: Any, cache: Any) -> tuple[Any, Any]:
        """Logits of each row's last position ``[B, V]`` and the extended cache."""
        output = self.model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            **{self._cache_arg: cache},
            **self._keep_last,
        )
        return output.logits[:, -1], output[self._cache_arg]


def _first_row_starting_with(rows: list[tuple[int, ...]], key: tuple[int, ...]) -> int | None:
    """The index of the first of `rows` that starts with `key` (not empty), or `None`.

    Rows that are too short or differ at the key's last token are passed over without
    slicing: prompts share long prefixes (a system prompt, the template), so comparing
    slices of every row would walk most of each prompt, for every pair of prompt and row.
    """
    n, last = len(key), key[-1]
    for index, row in enumerate(rows):
        if len(row) >= n and row[n - 1] == last and row[:n] == key:
            return index
    return None


_RowsByEnd = dict[tuple[int, int | None], dict[tuple[int, ...], int]]


def _rows_by_length_and_end(rows: list[tuple[int, ...]]) -> _RowsByEnd:
    """`rows` grouped by ``(length, last token)`` (``None`` for an empty row), each group
    mapping a row to its index (the last index of a row that occurs twice)."""
    groups: _RowsByEnd = {}
    for index, row in enumerate(rows):
        groups.setdefault((len(row), row[-1] if row else None), {})[row] = index
    return groups


def _longest_row_before(
    by_end: _RowsByEnd, lengths: list[int], key: tuple[int, ...]
) -> tuple[int, int] | None:
    """``(index, length)`` of the longest row that is a proper prefix of `key`, or `None`.

    `by_end` is `_rows_by_length_and_end` of the rows and `lengths` their lengths, longest
    first. Only the rows that end with the key's token at their length are compared: the
    key's slice is taken and hashed for those lengths alone.
    """
    for n in lengths:
        if n < len(key):
            rows = by_end.get((n, key[n - 1] if n else None))
            if rows is not None:
                index = rows.get(key[:n])
                if index is not None:
                    return index, n
    return None


def _new_cache(model: Any) -> Any:
    """An empty cache for `model` whose layers grow in place (`_growing_layer`), or ``None``
    (the model builds its own) where transformers' caches have no layers or a layer is not
    plain full attention (sliding windows, linear attention, ...)."""
    layer_class = _growing_layer()
    if layer_class is None:
        return None
    from transformers.cache_utils import DynamicCache, DynamicLayer

    try:
        cache = DynamicCache(config=model.config)
    except (TypeError, ValueError, KeyError):
        return None
    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer) is not DynamicLayer for layer in layers):
        return None
    cache.layers = [layer_class() for _ in layers]
    return cache


@functools.cache
def _growing_layer() -> type[Any] | None:
    """transformers' ``DynamicLayer`` with its keys and values kept in buffers with room to
    grow; ``None`` for transformers versions without layered caches.

    ``update`` writes the new slots into the buffers in place and returns views of their
    filled part ``[B, heads, S, head_dim]`` (the same values ``DynamicLayer`` would return).
    A full buffer is replaced by one twice as wide. ``batch_select_indices`` selects rows of
    the buffers, room included. Every other method is ``DynamicLayer``'s: those that replace
    ``keys``/``values`` (``crop``, ``reset``, ...) leave tensors that the next ``update``
    adopts as its buffers.
    """
    try:
        from transformers.cache_utils import DynamicLayer
    except ImportError:
        return None

    class GrowingLayer(DynamicLayer):
        _buffers: tuple[Any, Any] | None = None
        _views: Any = None  # the keys view `update` last returned

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            if self.keys is not self._views:  # first update, or replaced by another method
                filled = self.keys.dim() == 4 and self.keys.shape[-2] > 0
                self._buffers = (self.keys, self.values) if filled else None
            start = 0 if self._buffers is None else self.keys.shape[-2]
            end = start + key_states.shape[-2]
            if self._buffers is None or self._buffers[0].shape[-2] < end:
                self._buffers = (
                    _grown(key_states, self.keys, start, end),
                    _grown(value_states, self.values, start, end),
                )
            self._buffers[0][:, :, start:end] = key_states
            self._buffers[1][:, :, start:end] = value_states
            self._show(end)
            return self.keys, self.values

        def batch_select_indices(self, indices: Any) -> None:
            if self._buffers is None or self.keys is not self._views:
                super().batch_select_indices(indices)
                return
            keys, values = self._buffers
            self._buffers = (keys.index_select(0, indices), values.index_select(0, indices))
            self._show(self.keys.shape[-2])

        def _show(self, end: int) -> None:
            """Point ``keys``/``values`` at the buffers' first `end` slots."""
            assert self._buffers is not None
            keys, values = self._buffers
            self.keys, self.values = keys[:, :, :end], values[:, :, :end]
            self._views = self.keys

    return GrowingLayer


def _grown(new_states: Any, old: Any, start: int, end: int) -> Any:
    """An empty buffer like `new_states` with room for ``max(end, 2 * start)`` slots, holding
    `old`'s first `start` slots."""
    batch, heads, _, head_dim = new_states.shape
    buffer = new_states.new_empty((batch, heads, max(end, 2 * start), head_dim))
    if start:
        buffer[:, :, :start] = old[:, :, :start]
    return buffer


def _warpers(temperature: float, top_k: int, top_p: float) -> list[Any]:
    """transformers' sampling warpers that ``generate`` builds for these settings, in its
    order (temperature, top-k, top-p); each is called as ``warp(input_ids, scores)``."""
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    warpers: list[Any] = []
    if temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(temperature))
    if top_k != 0:
        warpers.append(TopKLogitsWarper(top_k=top_k))
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=top_p))
    return warpers
