"""The token view: an episode's tokens as the trainer's loss mask sees them.

The rows come from `xpgym.training.layouts.episode_rows` (``on_mismatch="split"``), the layout
the per-episode trainers consume, so the colours on the page are the trainer's
``response_mask``, not a re-derivation: *policy* tokens (mask 1, trained on), *env* tokens
(mask 0: end-of-turn markers, observations, tool results, generation prompts between the
policy's turns) and the row's *prompt* (mask 0).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from xpgym.core.optional import import_optional
from xpgym.core.trajectory import Episode
from xpgym.training.layouts import episode_rows

__all__ = ["ENV", "POLICY", "PROMPT", "TokenView", "load_decoder", "token_view", "vocabulary"]

PROMPT, POLICY, ENV = 0, 1, 2
"""Segment kinds: the row's first prompt, policy tokens (``response_mask`` 1), env/tool
tokens after the first policy token (``response_mask`` 0)."""

TokenView = dict[str, Any]
"""``{"rows": [{"first_turn": int, "segments": [[kind, turn, [id, ...]], ...]}]}`` where a
segment is a run of tokens of one kind (`PROMPT`, `POLICY`, `ENV`) and, for policy tokens,
one turn (``turn`` is -1 on prompt and env tokens); or ``{"unavailable": reason}``."""


def token_view(episode: Episode) -> TokenView:
    """The token rows of `episode` in runs of one kind (see `TokenView`).

    An episode whose turns re-render history (a prompt that does not extend the previous
    turn's prompt and response) gives one row per prefix-consistent run of turns, as
    ``episode_rows(on_mismatch="split")`` does for RL2. An episode the layout refuses (a
    turn without ids or with an empty response) gives ``{"unavailable": <the reason>}``.
    """
    try:
        rows = episode_rows([episode], on_mismatch="split")
    except ValueError as exc:
        return {"unavailable": str(exc)}
    out = []
    for b in range(len(rows)):
        row = rows.row(b)
        segments: list[list[Any]] = []
        columns = (row.input_ids.tolist(), row.response_mask.tolist(), row.turn_index.tolist())
        for j, (token, mask, turn) in enumerate(zip(*columns, strict=True)):
            kind = PROMPT if j < row.prompt_length else (POLICY if mask else ENV)
            if segments and segments[-1][0] == kind and segments[-1][1] == turn:
                segments[-1][2].append(token)
            else:
                segments.append([kind, turn, [token]])
        out.append({"first_turn": row.first_turn, "segments": segments})
    return {"rows": out}


def load_decoder(path: str) -> Callable[[int], str]:
    """A function from one token id to its text, from the tokenizer at `path` (a directory
    saved with ``save_pretrained``, or any name ``transformers.AutoTokenizer`` loads).

    Raises:
        ImportError: transformers is not installed (the message says how to install it).
        OSError: transformers cannot load a tokenizer from `path`.
    """
    transformers = import_optional(
        "transformers", needed_by="the viewer's --tokenizer", install="pip install transformers"
    )
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)

    def decode(token: int) -> str:
        return tokenizer.decode([token], skip_special_tokens=False)

    return decode


def vocabulary(views: Iterable[TokenView], decode: Callable[[int], str]) -> dict[str, str]:
    """``{str(id): text}`` for every token id that occurs in `views` (the page's id -> text
    table: each id is decoded once, however often it occurs)."""
    ids = {
        token
        for view in views
        for row in view.get("rows", ())
        for _, _, tokens in row["segments"]
        for token in tokens
    }
    return {str(token): decode(token) for token in sorted(ids)}
