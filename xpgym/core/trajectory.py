"""Episodes as trainers see them: `Turn`, `Episode`, and their JSON.

An `Episode` is the record of one env episode: a list of `Turn`s, each holding what the
policy saw (`observation`), what it wrote (`action`), what the env returned, and, when the
collector had a tokenizer, the exact token ids (`prompt_ids`, `response_ids`) and the
sampler's log-probabilities (`response_logprobs`). Episodes round-trip losslessly through
JSON (`Episode.to_json` / `Episode.from_json`, `save_episodes` / `load_episodes`).
`xpgym.rollout.recorder` writes them; `xpgym.training.layouts` turns them into token rows.

Token-exactness contract: when ids are present, ``turns[t + 1].prompt_ids`` starts with
``turns[t].prompt_ids + turns[t].response_ids`` (the collector builds prompts by appending,
never by re-rendering history; `xpgym.core.chat.ChatPromptBuilder` does this with a chat
template), so all turns of an episode concatenate into one sequence in which env and tool
tokens are told apart from policy tokens. The tokens ``turns[t + 1].prompt_ids`` adds after
that prefix are env tokens (end-of-turn markers, the next observation, the generation
prompt): never trained on.
"""

from __future__ import annotations

import json
import math
import operator
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from xpgym.core.env import STATE_KEY
from xpgym.core.errors import InfraCause

__all__ = [
    "INFRA_GROUP_PREFIX",
    "METRICS_PREFIX",
    "OUTCOMES",
    "UNGROUPED_PREFIX",
    "Episode",
    "Outcome",
    "Turn",
    "checked_token_ids",
    "episode_metrics",
    "infra_error_metrics",
    "load_episodes",
    "mean_metrics",
    "save_episodes",
    "training_group_ids",
    "tree_nodes",
    "turn_state_keys",
]


Outcome = Literal["ok", "infra_error"]
OUTCOMES: tuple[str, ...] = ("ok", "infra_error")
"""`Episode.outcome` values: ``"ok"``, or ``"infra_error"`` (see `xpgym.core.errors`)."""

UNGROUPED_PREFIX = "xpgym-ungrouped-"
"""Group id given to an episode without ``group_id``: this prefix and the episode's index."""

INFRA_GROUP_PREFIX = "xpgym-infra-error-"
"""Group id given to an infra-error episode: this prefix and the episode's index."""

_FORK_FIELDS = ("episode_id", "parent_id", "parent_turn")

# --------------------------------------------------------------------------------------
# Turn and Episode
# --------------------------------------------------------------------------------------


@dataclass
class Turn:
    """One policy step.

    Attributes:
        observation: The observation the policy acted on (text, or chat messages).
        action: The policy's text.
        reward: The env's reward for this turn (stored as a finite `float`).
        terminated: The task ended on this turn.
        truncated: A limit ended the episode on this turn (turns, tool calls, context).
        info: The env's info for this turn (JSON-compatible).
        prompt_ids: Token ids of the full prompt the policy was given (history included).
        response_ids: Token ids the policy generated (stop token included if sampled).
        response_logprobs: Sampler log-probabilities of `response_ids`, same length.

    Construction normalises types so that equality and the JSON round trip are exact:
    `reward` becomes a `float`, the flags `bool`, ids a `list[int]` (numpy arrays, tensors
    and tuples are accepted; ids must be non-negative integers) and log-probabilities a
    `list[float]`.
    """

    observation: Any
    action: str
    reward: float
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    prompt_ids: list[int] | None = None
    response_ids: list[int] | None = None
    response_logprobs: list[float] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.reward, (str, bytes)):
            raise TypeError(f"Turn.reward must be a number, got {self.reward!r}")
        self.reward = float(self.reward)
        if not math.isfinite(self.reward):
            raise ValueError(f"Turn.reward must be finite, got {self.reward!r}")
        self.terminated = _as_flag("terminated", self.terminated)
        self.truncated = _as_flag("truncated", self.truncated)
        self.prompt_ids = _as_ids("prompt_ids", self.prompt_ids)
        self.response_ids = _as_ids("response_ids", self.response_ids)
        if self.response_logprobs is not None:
            values = _tolist(self.response_logprobs)  # a new list
            plain = set(map(type, values)) <= {float}
            self.response_logprobs = values if plain else [float(x) for x in values]
        if (
            self.response_logprobs is not None
            and self.response_ids is not None
            and len(self.response_logprobs) != len(self.response_ids)
        ):
            raise ValueError(
                f"response_logprobs has {len(self.response_logprobs)} entries for "
                f"{len(self.response_ids)} response_ids"
            )


@dataclass
class Episode:
    """The turns of one episode, with where it came from.

    Attributes:
        env_id: The registered id of the env (or a description for unregistered envs).
        seed: The reset seed, if the episode was seeded.
        group_id: Episodes that started from the same state share a group id (GRPO).
        turns: The turns in order; the last one has `terminated` or `truncated` set when
            the episode is complete.
        info: Episode-level facts (e.g. ``{"episode": {...}}`` from `EpisodeStatistics`).
        infra_error: The infrastructure failure that ended the episode (`xpgym.core.errors`),
            or `None`. A dict ``{"kind", "message"}`` is accepted and becomes an
            `InfraCause`.
        episode_id: A name of this episode, unique within a collection, or `None`. The
            collector gives one only when it records fork points
            (``RolloutCollector(record_states=True)``).
        parent_id: For a branch forked from another episode (`RolloutCollector.fork`): that
            episode's `episode_id`; else `None`.
        parent_turn: For a branch: the index of the turn it was forked at. The branch's
            turns ``0 .. parent_turn - 1`` are copies of the parent's (the shared prefix);
            turn ``parent_turn`` onwards is its own continuation.

    JSON: `to_dict` of an infra-error episode adds ``"outcome": "infra_error"`` and
    ``"infra_error": {"kind", "message"}``; an ok episode's JSON has neither (it is byte for
    byte what it was before outcomes existed), and `from_dict` reads JSON without them as
    ``"ok"``. The three fork fields appear in the JSON only when set, so the JSON of an
    episode that is not a branch and has no id is unchanged by them.
    """

    env_id: str
    seed: int | None = None
    group_id: str | None = None
    turns: list[Turn] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    infra_error: InfraCause | None = None
    episode_id: str | None = None
    parent_id: str | None = None
    parent_turn: int | None = None

    def __post_init__(self) -> None:
        if self.seed is not None:
            self.seed = operator.index(self.seed)
        if self.parent_turn is not None:
            self.parent_turn = operator.index(self.parent_turn)
        if (self.parent_id is None) != (self.parent_turn is None):
            raise ValueError(
                f"Episode.parent_id ({self.parent_id!r}) and parent_turn "
                f"({self.parent_turn!r}) are set together (a branch) or not at all"
            )
        if isinstance(self.infra_error, Mapping):
            self.infra_error = InfraCause.from_dict(self.infra_error)
        elif self.infra_error is not None and not isinstance(self.infra_error, InfraCause):
            raise TypeError(
                f"Episode.infra_error must be an InfraCause, a dict or None, got "
                f"{self.infra_error!r:.60}"
            )

    @property
    def outcome(self) -> Outcome:
        """``"infra_error"`` when `infra_error` is set, else ``"ok"``."""
        return "ok" if self.infra_error is None else "infra_error"

    @property
    def complete(self) -> bool:
        """Whether the last turn ended the episode."""
        return bool(self.turns) and (self.turns[-1].terminated or self.turns[-1].truncated)

    @property
    def total_reward(self) -> float:
        """Undiscounted sum of the turns' rewards."""
        return float(sum(turn.reward for turn in self.turns))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict (a deep copy); `Episode.from_dict` inverts it exactly.

        Raises:
            TypeError: A value is not one of the types JSON gives back unchanged: `dict`
                with `str` keys, `list`, `str`, `int`, `float`, `bool`, `None` (exact types;
                tuples, sets, numpy scalars, enums, dict subclasses... are refused rather
                than silently changed). The message names the offending path.
            ValueError: A float is NaN or infinite, or a string has a lone surrogate.
        """
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["turns"] = [
            _turn_dict(turn, f"Episode.turns[{t}]") for t, turn in enumerate(self.turns)
        ]
        for name in ("env_id", "seed", "group_id", "info"):
            data[name] = _json_copy(data[name], f"Episode.{name}")
        for name in _FORK_FIELDS:  # only when set: other episodes' JSON is as it was
            if data[name] is None:
                del data[name]
        del data["infra_error"]
        if self.infra_error is not None:  # an ok episode's JSON is what it was before outcomes
            data["outcome"] = self.outcome
            data["infra_error"] = self.infra_error.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Episode:
        """Rebuild an episode from `to_dict` output; unknown keys raise `ValueError`, and
        so does an ``"outcome"`` that disagrees with ``"infra_error"``. Without these two
        keys (older JSON) the episode is ``"ok"``."""
        data = dict(data)
        outcome = data.pop("outcome", None)
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown Episode fields {sorted(unknown)}")
        expected = "ok" if data.get("infra_error") is None else "infra_error"
        if outcome is not None and outcome != expected:
            raise ValueError(
                f"Episode outcome {outcome!r} disagrees with infra_error "
                f"{data.get('infra_error')!r}; outcome is one of {OUTCOMES} and is "
                f"'infra_error' exactly when infra_error is set"
            )
        turn_fields = {f.name for f in fields(Turn)}
        turns = []
        for i, turn in enumerate(data.get("turns", [])):
            extra = set(turn) - turn_fields
            if extra:
                raise ValueError(f"turn {i}: unknown Turn fields {sorted(extra)}")
            turns.append(Turn(**turn))
        return cls(**{**data, "turns": turns})

    def to_json(self) -> str:
        """One line of JSON; `from_json` gives back an equal episode, floats bit for bit.

        Raises the errors of `to_dict` for values JSON cannot carry unchanged.
        """
        return json.dumps(
            self.to_dict(), ensure_ascii=False, allow_nan=False, separators=(",", ":")
        )

    @classmethod
    def from_json(cls, text: str) -> Episode:
        """Inverse of `to_json`."""
        return cls.from_dict(json.loads(text))


def training_group_ids(episodes: Sequence[Episode]) -> list[str]:
    """The GRPO group of each episode as trainers see it (``[N]`` str, episode order).

    ``group_id`` as recorded; ``f"{UNGROUPED_PREFIX}{i}"`` for episode ``i`` without one;
    ``f"{INFRA_GROUP_PREFIX}{i}"`` for an infra-error episode, a group of its own, so that
    the healthy members' group statistics are exactly those of the group without it.
    """
    return [
        f"{INFRA_GROUP_PREFIX}{i}"
        if episode.infra_error is not None
        else f"{UNGROUPED_PREFIX}{i}"
        if episode.group_id is None
        else str(episode.group_id)
        for i, episode in enumerate(episodes)
    ]


def turn_state_keys(episodes: Sequence[Episode]) -> list[list[str]]:
    """The state key of every turn for `xpgym.training.advantages.gigpo`: the key of the
    env state the turn acted on (the paper's anchor states).

    That is the env's own key where it gives one (`xpgym.core.env.STATE_KEY`): for turn 0
    ``info["state_key"]`` of the reset (``Episode.info["reset_info"]``), for turn ``t`` that
    of turn ``t - 1``'s step; prefixed ``"env:"``. Otherwise the observation the turn acted
    on, as JSON with sorted keys (text, or chat messages), prefixed ``"obs:"``: turns whose
    observations are identical are taken to act on identical states.
    """
    keys = []
    for episode in episodes:
        before = episode.info.get("reset_info") or {}
        row = []
        for turn in episode.turns:
            key = before.get(STATE_KEY) if isinstance(before, dict) else None
            if isinstance(key, str):
                row.append(f"env:{key}")
            else:
                row.append("obs:" + json.dumps(turn.observation, sort_keys=True, default=repr))
            before = turn.info
        keys.append(row)
    return keys


def tree_nodes(episodes: Sequence[Episode]) -> tuple[list[str], list[list[str]]]:
    """``(root_ids, node_ids)`` of forked episodes for
    `xpgym.training.advantages.tree_advantages`.

    A branch (``parent_id`` set) shares its parent's nodes up to ``parent_turn`` and its
    root; from there on each turn is a node of its own, ``f"{episode_id}#{t}"``. An episode
    that is not a branch is a root path: its root is its ``group_id`` (episodes of one
    group start from one state), else its ``episode_id``.

    Raises:
        ValueError: an episode without ``episode_id``, or a branch whose parent is not in
            `episodes`.
    """
    by_id = {}
    for i, episode in enumerate(episodes):
        if episode.episode_id is None:
            raise ValueError(
                f"episodes[{i}] has no episode_id; collect with "
                "RolloutCollector(record_states=True)"
            )
        by_id[episode.episode_id] = episode
    done: dict[str, tuple[str, list[str]]] = {}

    def nodes(episode: Episode) -> tuple[str, list[str]]:
        key = str(episode.episode_id)
        if key not in done:
            own = [f"{key}#{t}" for t in range(len(episode.turns))]
            if episode.parent_id is None:
                done[key] = (str(episode.group_id or key), own)
            else:
                parent = by_id.get(episode.parent_id)
                if parent is None:
                    raise ValueError(
                        f"the parent {episode.parent_id!r} of episode {key!r} is not among "
                        "the episodes; pass every episode of the tree"
                    )
                root, shared = nodes(parent)
                turn = int(episode.parent_turn or 0)
                done[key] = (root, shared[:turn] + own[turn:])
        return done[key]

    pairs = [nodes(episode) for episode in episodes]
    return [root for root, _ in pairs], [path for _, path in pairs]


def infra_error_metrics(episodes: Iterable[Episode]) -> dict[str, float]:
    """Counts for a trainer's metrics: ``infra_error_episodes`` (episodes with
    ``outcome == "infra_error"``) and ``infra_error_episodes/<kind>`` for each cause kind
    seen (`xpgym.core.errors.InfraCause.kind`), as floats."""
    kinds = Counter(ep.infra_error.kind for ep in episodes if ep.infra_error is not None)
    metrics = {"infra_error_episodes": float(sum(kinds.values()))}
    metrics.update({f"infra_error_episodes/{kind}": float(n) for kind, n in sorted(kinds.items())})
    return metrics


METRICS_PREFIX = "metrics/"
"""The prefix of `episode_metrics` keys in trainers' logs."""


def episode_metrics(episodes: Iterable[Episode]) -> dict[str, float]:
    """The episodes' metrics for a trainer's log or an eval summary:
    ``{"metrics/<key>": mean}`` for every key of ``Episode.info["metrics"]`` (the last
    value each episode reported, `xpgym.rollout.recorder`), averaged over the ok episodes that
    reported it (infra-error episodes are left out, as from the loss), keys sorted. No
    episode with metrics: ``{}``."""
    healthy = (ep.info.get("metrics") or {} for ep in episodes if ep.infra_error is None)
    return {f"{METRICS_PREFIX}{key}": mean for key, mean in mean_metrics(healthy).items()}


def mean_metrics(reports: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """``{key: mean}`` of metric dicts, each key averaged over the dicts that have it,
    keys sorted (what `episode_metrics` and the eval summary report)."""
    sums: dict[str, float] = {}
    counts: Counter[str] = Counter()
    for report in reports:
        for key, value in report.items():
            sums[key] = sums.get(key, 0.0) + float(value)
            counts[key] += 1
    return {key: sums[key] / counts[key] for key in sorted(sums)}


def save_episodes(episodes: Iterable[Episode], path: str | Path) -> None:
    """Write episodes as JSON Lines (one episode per line, UTF-8)."""
    lines = [episode.to_json() + "\n" for episode in episodes]  # validate all before writing
    with Path(path).open("w", encoding="utf-8") as f:
        f.writelines(lines)


def load_episodes(path: str | Path) -> list[Episode]:
    """Read episodes written by `save_episodes`."""
    with Path(path).open(encoding="utf-8") as f:
        return [Episode.from_json(line) for line in f if line.strip()]


def _tolist(values: Any) -> list[Any]:
    """A new list of `values`' items (numpy arrays and torch tensors give Python numbers)."""
    if type(values) is list:  # the common case, without a failing attribute look-up
        return values.copy()
    tolist = getattr(values, "tolist", None)
    return tolist() if callable(tolist) else list(values)


def checked_token_ids(ids: Any, what: str) -> list[int]:
    """`ids` as a new list of plain non-negative ints (numpy integers and arrays, torch
    tensors and other sequences of integers converted), checked in one pass at C speed
    when every id is below ``2**64``.

    Args:
        ids: The token ids.
        what: What they are, for the error message (e.g. ``"Turn.prompt_ids"``).

    Raises:
        TypeError: `ids` is a str or bytes, or holds something that is not an integer.
        ValueError: an id is negative.
    """
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{what} must be a sequence of token ids, got {ids!r:.60}")
    out = ids if type(ids) is list else _tolist(ids)  # array(...).tolist() is a new list
    try:  # one pass at C speed: integers (or __index__) in [0, 2**64), as new plain ints
        return array("Q", out).tolist()
    except (TypeError, OverflowError):
        pass  # the slow path says which rule failed (and takes ids of 2**64 and more)
    try:
        out = list(map(operator.index, out))
    except TypeError as err:
        raise TypeError(f"{what} must be integer token ids: {err}") from None
    if out and min(out) < 0:
        raise ValueError(f"{what} must be non-negative token ids, got {min(out)}")
    return out


def _as_ids(name: str, ids: Any) -> list[int] | None:
    return None if ids is None else checked_token_ids(ids, f"Turn.{name}")


def _as_flag(name: str, value: Any) -> bool:
    if value is True or value is False:
        return value
    if isinstance(value, (str, bytes)) or value not in (0, 1):
        raise TypeError(f"Turn.{name} must be a bool, got {value!r}")
    return bool(value)


def _turn_dict(turn: Turn, where: str) -> dict[str, Any]:
    data = {f.name: getattr(turn, f.name) for f in fields(turn)}
    for name, value in data.items():
        if name in ("prompt_ids", "response_ids"):  # list[int] since __post_init__
            data[name] = None if value is None else list(value)
        elif name == "response_logprobs" and value is not None:
            if not all(map(math.isfinite, value)):
                i = next(i for i, x in enumerate(value) if not math.isfinite(x))
                raise ValueError(
                    f"{where}.{name}[{i}] is {value[i]!r}; JSON has no NaN or infinity"
                )
            data[name] = list(value)
        else:
            data[name] = _json_copy(value, f"{where}.{name}")
    return data


def _json_copy(value: Any, path: str) -> Any:
    """A copy of `value`, which must come back from ``json.loads(json.dumps(value))``
    unchanged; else an error naming `path`."""
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return value
    if kind is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"{path} contains a lone surrogate ({value!r:.60}), which UTF-8 cannot store"
            ) from None
        return value
    if kind is float:
        if not math.isfinite(value):
            raise ValueError(f"{path} is {value!r}; JSON has no NaN or infinity")
        return value
    if kind is list:
        return [_json_copy(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if kind is dict:
        copy = {}
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(
                    f"{path} has the key {key!r} ({type(key).__name__}); JSON object keys "
                    f"are strings, so it would come back as {str(key)!r}: use str keys"
                )
            copy[key] = _json_copy(item, f"{path}[{key!r}]")
        return copy
    raise TypeError(
        f"{path} is a {kind.__module__}.{kind.__qualname__} ({value!r:.60}), which JSON "
        f"would not give back unchanged; store only dict (str keys), list, str, int, "
        f"float, bool and None (e.g. convert with float(x), int(x), list(x), x.tolist())"
    )
