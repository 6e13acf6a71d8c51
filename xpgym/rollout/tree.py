"""Tree rollouts: which turns a finished episode branches at, the tree's budget, and what a
collection cost in generated tokens.

`xpgym.rollout.collector.RolloutCollector.collect_tree` grows each group as a tree: it
starts `TreeSpec.roots` episodes from one reset state (a GRPO group) and, each time one of
the tree's episodes finishes, forks it (``RolloutCollector.fork``'s branches, started in
the same loop) `TreeSpec.branches` ways at every turn its `BranchRule` chooses, as long as
the tree's budget allows. This module has no collector in it: the rule, the budget and the
cost are plain functions of episodes.

Which turns an episode can branch at: a root's turns ``1 ..`` (turn 0 is where the roots
already differ), a branch's turns after the one it was forked at (``parent_turn + 1 ..``:
at ``parent_turn`` its siblings already differ). An episode that ended by an
infrastructure failure never branches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from xpgym.core.trajectory import Episode, Turn

__all__ = [
    "BranchRule",
    "GenerationCost",
    "TreeSpec",
    "generated_tokens",
    "generation_cost",
    "own_turns",
    "turn_surprisal",
]

BranchKind = Literal["every", "turns", "entropy"]
_KINDS: tuple[BranchKind, ...] = ("every", "turns", "entropy")


def own_turns(episode: Episode) -> list[Turn]:
    """The turns `episode` generated itself: all of a root's, a branch's from
    ``parent_turn`` on (the turns before are copies of its parent's)."""
    return episode.turns[episode.parent_turn or 0 :]


def generated_tokens(episode: Episode) -> int:
    """Tokens the policy generated for `episode`'s own turns (`own_turns`): the sum of
    their ``response_ids`` lengths (0 for turns without ids)."""
    return sum(len(turn.response_ids or ()) for turn in own_turns(episode))


def turn_surprisal(turn: Turn) -> float:
    """``-mean(log p)`` over the turn's sampled tokens: a one-sample estimate of the
    per-token entropy of the distribution they were drawn from (its expectation is that
    entropy). A turn without tokens has 0.

    Raises:
        ValueError: the turn has token ids but no log-probs (the policy reports none).
    """
    if turn.response_logprobs is None:
        if turn.response_ids:
            raise ValueError(
                "the entropy branch rule needs each turn's response_logprobs; this policy "
                "reports none (use BranchRule('every') or BranchRule('turns', ...))"
            )
        return 0.0
    if not turn.response_logprobs:
        return 0.0
    return -sum(turn.response_logprobs) / len(turn.response_logprobs)


@dataclass(frozen=True)
class BranchRule:
    """Which of a finished episode's turns to fork it at.

    Attributes:
        kind: ``"every"``: every turn it can branch at (module docstring); ``"turns"``:
            those of `turns`; ``"entropy"``: the `top` turns of highest `turn_surprisal`
            (the policy's least certain turns; ties go to the earlier turn).
        turns: The turn indices for ``"turns"``.
        top: How many turns ``"entropy"`` picks per episode.
    """

    kind: BranchKind = "every"
    turns: tuple[int, ...] = ()
    top: int = 1

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"BranchRule kind must be one of {_KINDS}, got {self.kind!r}")
        if self.kind == "turns" and (not self.turns or min(self.turns) < 0):
            raise ValueError(f"BranchRule('turns') needs turn indices >= 0, got {self.turns!r}")
        if self.kind != "turns" and self.turns:
            raise ValueError(f"turns={self.turns!r} is only for BranchRule('turns')")
        if self.top < 1:
            raise ValueError(f"BranchRule top must be >= 1, got {self.top}")

    def choose(self, episode: Episode) -> list[int]:
        """The turns to fork `episode` at, in the order the forks are made (the budget
        may stop before the last): turn order, or for ``"entropy"`` most uncertain first."""
        if episode.infra_error is not None:
            return []
        first = 1 if episode.parent_turn is None else episode.parent_turn + 1
        candidates = range(first, len(episode.turns))
        if self.kind == "every":
            return list(candidates)
        if self.kind == "turns":
            wanted = set(self.turns)
            return [t for t in candidates if t in wanted]
        ranked = sorted(candidates, key=lambda t: (-turn_surprisal(episode.turns[t]), t))
        return ranked[: self.top]


@dataclass(frozen=True)
class TreeSpec:
    """The shape and budget of each tree of `RolloutCollector.collect_tree`.

    Attributes:
        roots: Episodes started from the tree's reset state (its first group).
        branches: Branches per fork (each fork is a group of this many episodes).
        rule: Where finished episodes branch.
        max_episodes: A tree's episodes, roots included, never exceed this: a fork is made
            only if all its `branches` fit (``None``: no limit).
        max_tokens: A fork is made only while the tree's finished episodes have generated
            fewer than this many tokens (`generated_tokens`; ``None``: no limit). Episodes
            already running finish, so a tree can end above it by what they generate.

    At least one budget must be set: with ``"every"`` a tree would otherwise grow for as
    long as its episodes have turns left.
    """

    roots: int = 2
    branches: int = 2
    rule: BranchRule = BranchRule()
    max_episodes: int | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.roots < 1 or self.branches < 1:
            raise ValueError(
                f"TreeSpec needs roots >= 1 and branches >= 1, got {self.roots}, {self.branches}"
            )
        if self.max_episodes is None and self.max_tokens is None:
            raise ValueError("TreeSpec needs a budget: max_episodes, max_tokens or both")
        if self.max_episodes is not None and self.max_episodes < self.roots:
            raise ValueError(
                f"max_episodes ({self.max_episodes}) is below roots ({self.roots}): the roots "
                "are the tree's first episodes"
            )
        if self.max_tokens is not None and self.max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {self.max_tokens}")

    def allows(self, episodes: int, tokens: int) -> bool:
        """Whether a tree with `episodes` started and `tokens` generated by its finished
        episodes may fork once more."""
        if self.max_episodes is not None and episodes + self.branches > self.max_episodes:
            return False
        return self.max_tokens is None or tokens < self.max_tokens


@dataclass(frozen=True)
class GenerationCost:
    """What a collection cost: `episodes` finished, `tokens` generated for them (shared
    prefixes counted once: `generated_tokens`), and `tokens_per_episode`."""

    episodes: int
    tokens: int

    @property
    def tokens_per_episode(self) -> float:
        """``tokens / episodes`` (0.0 for no episodes)."""
        return self.tokens / self.episodes if self.episodes else 0.0


def generation_cost(episodes: Sequence[Episode]) -> GenerationCost:
    """The `GenerationCost` of `episodes`, a tree collection or flat groups alike (a flat
    episode generated all its turns), so the two compare per finished episode."""
    return GenerationCost(len(episodes), sum(generated_tokens(e) for e in episodes))
