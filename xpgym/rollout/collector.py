"""The rollout collector: drive a vector env with a policy, return complete `Episode`s.

``RolloutCollector(vec_env, policy).collect(num_episodes, group_size=n, seed=s)`` runs
exactly `num_episodes` episodes to their end and returns them in episode order: group ``g``
holds episodes ``g * n .. g * n + n - 1``, which start from the same state and share
``group_id``. Importing this module imports neither torch nor transformers.

Scheduling
    Each sub-env runs one episode at a time. A free sub-env takes the next episode: the first
    episode of a group is started by ``vec.reset`` of that sub-env alone (``reset_mask``) with
    the group's seed, and the sub-env's ``get_state()`` is kept as the group's snapshot; every
    other episode of the group is started by ``set_state(snapshot)`` on whichever sub-env
    frees up (so ``num_envs`` may be smaller than `group_size`). Episodes of a group also
    share the reset observation and info. Sub-envs whose turn is ready are stepped together
    with ``vec.step({i: action, ...})``; the others are left alone.

    * A batched policy (`xpgym.rollout.policies.Policy`) gets one ``generate`` call with the
      prompts of all sub-envs waiting for an action.
    * A concurrent policy (`xpgym.rollout.policies.ConcurrentPolicy`, e.g. HTTP) gets one
      ``submit`` per waiting sub-env; the collector waits for the first results to arrive,
      steps those sub-envs at once, and submits their next prompts while the other requests
      are still in flight. A slow generation never holds up the other sub-envs.

    While it collects, the collector runs the vector env with autoreset disabled
    (``AutoresetMode.DISABLED``, whatever its mode; the mode is restored when `collect`
    returns): a finished sub-env waits until the collector starts its next episode on it,
    with a masked ``reset`` or ``set_states``, so no sub-env is ever reset twice or behind
    the collector's back. It calls the vector env from the calling thread only.

Determinism
    Group ``g``'s seed is ``derive_seeds(seed, num_groups)[g]`` (which does not depend on
    `num_episodes`); with ``seed=None`` each sub-env continues its own RNG stream. What
    happens inside an episode depends only on its start state and the policy's outputs,
    never on which sub-env ran it. So with a policy whose answer to a prompt is fixed (a
    scripted policy; greedy decoding up to float noise from batching), the same seed gives
    the same episodes in the same order, in any backend and at any ``num_envs``. A sampling
    policy whose samples depend on its batch, like `HFPolicy`, is reproducible for the same
    ``num_envs``, seed and batched (not concurrent) policy.

Prompts (`prompt_mode`)
    * ``"tokens"``: token-exact prompts. The collector keeps the conversation as token ids:
      ``prompt_{t+1} = prompt_t + response_t + template tokens of the new observation +
      generation prompt``, built by `xpgym.core.chat.ChatPromptBuilder` over
      ``policy.tokenizer``; history is never re-rendered. The policy gets ``list[int]``
      prompts. Turns record ``prompt_ids``, ``response_ids`` and ``response_logprobs``, and
      satisfy the token-exactness contract of `xpgym.core.trajectory`.
    * ``"messages"``: the collector keeps the conversation as chat messages (the policy's
      raw text as ``"assistant"`` turns); the policy gets ``list[Message]`` prompts.
    * ``"observation"``: the env's observation is the prompt as is (text or messages); the
      env's wrappers own the history (e.g. `ChatTemplate`, `ObservationActionHistory`).
    * ``"auto"`` (default): ``"tokens"`` if ``policy.tokenizer`` has a chat template,
      ``"observation"`` if it has a tokenizer without one, else ``"messages"``.

    In ``"tokens"`` and ``"messages"`` modes an observation becomes new messages
    (`xpgym.core.chat.observation_messages`): a `str` is one message, role ``"tool"`` if the
    step's ``info["tool_calls"]`` is truthy, else ``"user"``; a list of messages (from
    `ChatMessages`) contributes, at reset, all of its messages and afterwards the messages
    after its last ``"assistant"`` message. So use `LastObservation` or `ChatMessages` below
    the collector, not the history-rendering wrappers. `system_prompt` is prepended at reset
    unless the messages start with one.
    `Turn.prompt_ids` in the other modes is what the policy reports in
    ``Generation.prompt_ids`` (no prefix guarantee).

Limits, all visible in the last turn's ``info`` and in ``Episode.info`` (the episode's
turns, limits and end are recorded by `xpgym.rollout.recorder.EpisodeRecorder`):
    * Truncated generation (``finish_reason == "length"``): the cut-off text is sent to the
      env as the action, unchanged, and the turn gets ``info["generation_truncated"] =
      True``. (The env judges it like any text; GEM instead sends a fixed invalid action.)
    * Over-long prompt: if the next prompt has more than `max_prompt_tokens` tokens (counted
      when the collector knows the ids: ``"tokens"`` mode, or a policy with a tokenizer),
      the policy is not called and the episode ends as truncated: the previous turn gets
      ``truncated=True`` and ``info["truncated_reason"] = "context"``. If it is the very
      first prompt, the episode gets one placeholder turn with ``action=""``, empty
      ``response_ids``/``response_logprobs``, reward 0.0, ``truncated=True``, and
      ``info = {"truncated_reason": "context", "generation_skipped": True}``. A concurrent
      policy's `ContextLengthError` for a request is handled the same way.
    * `max_turns`: after that many turns the last turn gets ``truncated=True`` and
      ``info["truncated_reason"] = "max_turns"`` (unless the env ended the episode).
    ``Episode.info["truncated_reason"]`` names the limit that ended an episode (context or
    `max_turns`).
    * A sub-env that fails (``info["error"]``) ends its episode as truncated; the episode is
      returned like any other, with the error in its last turn's info.

Infrastructure failures (`xpgym.core.errors`), a failed sub-env's included, end the episode
with ``Episode.outcome == "infra_error"`` and the cause in ``Episode.infra_error``
(`xpgym.rollout.recorder` marks them).

Forking (``record_states=True``)
    The collector then keeps a fork point for every turn of every episode it collects on a
    sub-env whose ``can_fork()`` is true (`xpgym.core.env.Env.can_fork`): the sub-env's
    ``get_state()`` before the turn (turn 0's is the group's snapshot, taken once; later
    ones come from one ``get_states`` call per step for all running sub-envs), the
    observation and, in ``"messages"`` mode, the conversation; each episode gets
    ``episode_id = f"{group_id}/{member}"``. ``fork(episode, turn, k)`` continues the
    episode from before `turn` ``k`` ways: each branch's sub-env is restored to that state
    (``set_states``), the branch's first `turn` turns are copies of the parent's, its first
    prompt is the parent's prompt of `turn` (the same token ids in ``"tokens"`` mode), and
    it records ``parent_id`` and ``parent_turn``. Branches share the env's RNG state at the
    fork point, so they differ only where the policy's actions do: replayed with the
    parent's actions, a branch is the parent again. A `collect` call replaces the kept
    fork points (a `fork` adds its branches'); without ``record_states`` nothing is kept
    and the output is as before.

Trees (``collect_tree``)
    Each group grows as a tree (`xpgym.rollout.tree`): an episode that finishes is forked,
    as by `fork`, at the turns a `BranchRule` chooses while the tree's budget lasts, and the
    branches are queued in the same loop, so they start at the next free sub-env next to the
    episodes still running (and, with the HF policy, continue the KV cache rows of their
    parent or siblings instead of prefilling the shared prefix).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import secrets
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import numpy as np

from xpgym.core import chat
from xpgym.core.trajectory import Episode
from xpgym.core.vector.base import AutoresetMode, SubEnvError, VectorEnv, derive_seeds
from xpgym.rollout.policies import (
    ConcurrentPolicy,
    ContextLengthError,
    Generation,
    Policy,
    PolicyError,
)
from xpgym.rollout.recorder import EpisodeRecorder, TurnLimit
from xpgym.rollout.tree import TreeSpec, generated_tokens

__all__ = ["PromptMode", "RolloutCollector", "collect_episodes"]


logger = logging.getLogger(__name__)

PromptMode = Literal["auto", "tokens", "messages", "observation"]
_PROMPT_MODES = ("auto", "tokens", "messages", "observation")


@dataclass
class _Work:
    """One episode to run: its position in the output and its group."""

    slot: int
    group: int
    member: int


@dataclass
class _ForkPoint:
    """An episode before one of its turns: the sub-env's state, the observation and, in
    ``"messages"`` mode, the conversation: the first `num_messages` of `messages`, the
    episode's own list, which only grows (``"tokens"`` mode uses the turn's prompt ids)."""

    state: Any
    observation: Any
    messages: list[chat.Message] | None
    num_messages: int

    def conversation(self) -> list[chat.Message]:
        """A copy of the conversation at this point (empty outside ``"messages"`` mode)."""
        return copy.deepcopy((self.messages or [])[: self.num_messages])


@dataclass
class _Branching:
    """What a group of fork branches continues: `parent` from before its turn `turn`."""

    parent: Episode
    turn: int
    point: _ForkPoint


@dataclass
class _Group:
    seed: int | None
    group_id: str
    kind: str = ""
    observation: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    snapshot: Any = None
    remaining: int = 0  # members not started yet
    branching: _Branching | None = None  # a group of fork branches: every member restores
    tree: int = 0  # the tree it belongs to, in a `collect_tree`


@dataclass
class _Run:
    """An episode in progress on one sub-env."""

    work: _Work
    recorder: EpisodeRecorder
    observation: Any
    prompt: chat.Prompt
    prompt_ids: list[int] | None = None
    messages: list[chat.Message] | None = None
    in_flight: bool = False
    points: list[_ForkPoint] | None = None  # one per turn so far, when recording


class RolloutCollector:
    """Collects complete episodes from `vec_env` with `policy` (see the module docstring).

    Args:
        vec_env: Any `VectorEnv`. Its sub-envs must implement `get_state`/`set_state` for
            ``group_size > 1``. Sub-envs of different env ids may be mixed; a group's
            episodes then all run on sub-envs with the leader's id.
        policy: A `Policy` (batched) or `ConcurrentPolicy` (has ``submit``).
        max_turns: End episodes after this many turns (``None``: only the env ends them);
            the loop-side limit of `xpgym.rollout.recorder` (the env-side one is `MaxTurns`).
        prompt_mode: ``"auto"``, ``"tokens"``, ``"messages"`` or ``"observation"``.
        system_prompt: System message for ``"tokens"``/``"messages"`` modes.
        max_prompt_tokens: Longest prompt, in tokens, given to the policy (default:
            ``policy.max_prompt_tokens`` if it has one, else no limit).
        chat_template_kwargs: Template options (``tools``, ``enable_thinking``, ...) for the
            prompt builder and for counting tokens of message prompts.
        prompt_builder: The `ChatPromptBuilder` for ``"tokens"`` mode (default: one over
            ``policy.tokenizer`` with `chat_template_kwargs`). It is stateless and shared by
            all episodes; `system_prompt` is added by the collector, not by the builder.
        env_id: `Episode.env_id` for every episode (default: the sub-env's ``spec.id``, or
            its class name for unregistered envs).
        record_states: Keep a fork point at every turn (on sub-envs that can fork) so that
            `fork` can continue the episodes; see "Forking" in the module docstring.

    Raises:
        ValueError: unknown `prompt_mode`, ``"tokens"`` without a policy tokenizer, or a
            `max_turns` that is neither `None` nor a positive int.
    """

    def __init__(
        self,
        vec_env: VectorEnv,
        policy: Policy,
        *,
        max_turns: int | None = None,
        prompt_mode: PromptMode = "auto",
        system_prompt: str | None = None,
        max_prompt_tokens: int | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        prompt_builder: chat.ChatPromptBuilder | None = None,
        env_id: str | None = None,
        record_states: bool = False,
    ) -> None:
        if prompt_mode not in _PROMPT_MODES:
            raise ValueError(f"prompt_mode must be one of {_PROMPT_MODES}, got {prompt_mode!r}")
        TurnLimit(max_turns)  # refuse a bad limit now, not at the first episode
        if not callable(getattr(policy, "generate", None)):
            raise TypeError(
                f"policy must have generate(prompts) -> list[Generation] (the Policy protocol), "
                f"got {type(policy).__name__}"
            )
        self.vec_env = vec_env
        self.policy = policy
        self.max_turns = max_turns
        self.system_prompt = system_prompt
        self.tokenizer = getattr(policy, "tokenizer", None)
        if prompt_mode == "auto":
            if self.tokenizer is None:
                prompt_mode = "messages"
            elif getattr(self.tokenizer, "chat_template", None):
                prompt_mode = "tokens"
            else:
                prompt_mode = "observation"
        self.prompt_mode: PromptMode = prompt_mode
        if max_prompt_tokens is None:
            max_prompt_tokens = getattr(policy, "max_prompt_tokens", None)
        self.max_prompt_tokens = max_prompt_tokens
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        if prompt_mode == "tokens":
            if self.tokenizer is None:
                raise ValueError(
                    f"prompt_mode='tokens' needs a policy with a tokenizer; "
                    f"{type(policy).__name__} has none (use prompt_mode='messages' or "
                    "'observation')"
                )
            if prompt_builder is None:
                prompt_builder = chat.ChatPromptBuilder(
                    self.tokenizer, chat_template_kwargs=self.chat_template_kwargs
                )
        self.prompt_builder = prompt_builder
        self.env_id = env_id
        self.concurrent = callable(getattr(policy, "submit", None))
        self.record_states = record_states
        self._kinds: list[str] | None = None
        self._forkable: list[bool] | None = None
        self._fork_points: dict[str, list[_ForkPoint]] = {}

    # -- public API ----------------------------------------------------------------------
    def collect(
        self, num_episodes: int, *, group_size: int = 1, seed: int | None = None
    ) -> list[Episode]:
        """Run `num_episodes` complete episodes; return them in episode order.

        Args:
            num_episodes: How many episodes; a multiple of `group_size`.
            group_size: Episodes per start state (GRPO groups); they share ``group_id``.
            seed: Base seed of the groups' reset seeds (see module docstring).

        Returns:
            `num_episodes` episodes, each complete (its last turn terminated or truncated);
            group ``g`` is ``episodes[g * group_size:(g + 1) * group_size]``.

        Raises:
            ValueError: bad counts. PolicyError: the policy failed. SubEnvError: a sub-env
            failed to reset or to get/set its state.
        """
        if isinstance(num_episodes, bool) or not isinstance(num_episodes, int) or num_episodes < 0:
            raise ValueError(f"num_episodes must be a non-negative int, got {num_episodes!r}")
        if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
            raise ValueError(f"group_size must be a positive int, got {group_size!r}")
        if num_episodes % group_size:
            raise ValueError(
                f"num_episodes ({num_episodes}) must be a multiple of group_size ({group_size})"
            )
        self._prepare()
        state = self._new_collection(num_episodes, group_size, seed)
        return self._run(state, group_size)

    def fork(self, episode: Episode, turn: int, k: int) -> list[Episode]:
        """Continue `episode` from before its turn `turn`, `k` ways (module docstring,
        "Forking").

        Args:
            episode: An episode returned by the last `collect` (or a `fork` since) of this
                collector with ``record_states=True``.
            turn: The turn to fork at, ``0 <= turn < len(episode.turns)``: each branch
                keeps the turns before it and plays its own turn `turn` onwards.
            k: Branches, a positive int.

        Returns:
            `k` complete episodes, each with ``parent_id = episode.episode_id``,
            ``parent_turn = turn``, ``group_id = f"{episode.episode_id}@{turn}"`` (they
            start from one state: a GRPO group), ``episode_id = f"{group_id}/{b}"`` for
            branch ``b``, and the parent's env id, seed and reset info.

        Raises:
            ValueError: the collector does not record states, `turn` or `k` is out of
                range, the episode's env cannot fork (`Env.can_fork`), or the episode has
                no fork points here (not collected by this collector's last `collect`).
            PolicyError, SubEnvError: as `collect`.
        """
        self._prepare()
        state = _Collection(
            groups=[], queue=deque(), results=[], free=list(range(self.vec_env.num_envs))
        )
        self._add_fork(state, episode, turn, k)
        return self._run(state, k)

    def collect_tree(
        self, num_trees: int, tree: TreeSpec, *, seed: int | None = None
    ) -> list[Episode]:
        """Grow `num_trees` trees of episodes (`xpgym.rollout.tree`); return them tree by tree.

        Tree ``g`` starts as `collect`'s group ``g`` of ``tree.roots`` episodes (the same
        seed, ``group_id`` and start state as ``collect(num_trees * tree.roots,
        group_size=tree.roots, seed=seed)``). When one of its episodes finishes, it is forked
        with `fork`'s semantics (``tree.branches`` branches per turn that ``tree.rule``
        chooses, while ``tree.allows`` the tree's started episodes and generated tokens), and
        the branches join the same loop as the running episodes. A branch's first prompt is
        its parent's prompt of the fork turn: when the branch starts in the next generation
        call (a sub-env is free) the HF policy's KV cache still holds the parent's row, or
        later a sibling's, and only the prompt's last token is prefilled
        (`xpgym.rollout.policies.hf_cache`); a branch that waits longer than every relative
        runs prefills its prompt whole. Branches finish and branch in turn.

        Returns:
            Each tree's episodes, roots first, then its branches in the order they were
            forked; a tree is contiguous and the trees come in order. Every episode has an
            ``episode_id``; branches have ``parent_id``/``parent_turn`` (`tree_nodes` lays
            them out for `tree_advantages`). With the same seed and a policy whose answers
            depend only on its calls, the same trees come back.

        Raises:
            ValueError: the collector does not record states, a sub-env cannot fork, or a bad
                `num_trees`. PolicyError, SubEnvError: as `collect`.
        """
        if isinstance(num_trees, bool) or not isinstance(num_trees, int) or num_trees < 0:
            raise ValueError(f"num_trees must be a non-negative int, got {num_trees!r}")
        self._prepare()
        if not self.record_states:
            raise ValueError(
                "collect_tree forks episodes: make the collector with record_states=True"
            )
        assert self._forkable is not None
        assert self._kinds is not None
        cannot = sorted({k for k, ok in zip(self._kinds, self._forkable, strict=True) if not ok})
        if cannot:
            raise ValueError(f"collect_tree needs envs that can fork; {cannot} cannot (can_fork())")
        state = self._new_collection(num_trees * tree.roots, tree.roots, seed)
        state.growth = _Growth(
            tree,
            started=[tree.roots] * num_trees,
            tokens=[0] * num_trees,
            slot_tree=[g for g in range(num_trees) for _ in range(tree.roots)],
        )
        for g, group in enumerate(state.groups):
            group.tree = g
        episodes = self._run(state, tree.roots)
        trees = state.growth.slot_tree
        order = sorted(range(len(episodes)), key=lambda slot: (trees[slot], slot))
        return [episodes[slot] for slot in order]

    def _add_fork(self, state: _Collection, episode: Episode, turn: int, k: int) -> None:
        """Queue `k` branches of `episode` from before its turn `turn` (`fork`) in `state`."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        points = self._points_of(episode)
        if isinstance(turn, bool) or not isinstance(turn, int) or not 0 <= turn < len(points):
            raise ValueError(
                f"turn must be an int in [0, {len(points)}) for episode "
                f"{episode.episode_id!r} ({len(episode.turns)} turns), got {turn!r}"
            )
        point = points[turn]
        state.groups.append(
            _Group(
                episode.seed,
                f"{episode.episode_id}@{turn}",
                kind=episode.env_id,
                observation=point.observation,
                info=dict(episode.info.get("reset_info", {})),
                snapshot=point.state,
                remaining=k,
                branching=_Branching(episode, turn, point),
            )
        )
        for b in range(k):
            state.queue.append(_Work(len(state.results), len(state.groups) - 1, b))
            state.results.append(None)

    def _grow(self, state: _Collection, group: _Group, episode: Episode) -> None:
        """Fork a tree's just-finished `episode` where its rule says, within the budget."""
        growth = state.growth
        assert growth is not None
        tree = group.tree
        growth.tokens[tree] += generated_tokens(episode)
        for turn in growth.spec.rule.choose(episode):
            if not growth.spec.allows(growth.started[tree], growth.tokens[tree]):
                return
            self._add_fork(state, episode, turn, growth.spec.branches)
            state.groups[-1].tree = tree
            growth.started[tree] += growth.spec.branches
            growth.slot_tree.extend([tree] * growth.spec.branches)

    def _new_collection(self, num_episodes: int, group_size: int, seed: int | None) -> _Collection:
        """A collection of `num_episodes` fresh episodes in groups of `group_size`; it
        replaces the kept fork points."""
        self._fork_points = {}
        num_groups = num_episodes // group_size
        seeds: list[int | None] = (
            list(derive_seeds(seed, num_groups)) if seed is not None else [None] * num_groups
        )
        tag = str(seed) if seed is not None else secrets.token_hex(4)
        return _Collection(
            groups=[_Group(s, f"{tag}-{g}", remaining=group_size) for g, s in enumerate(seeds)],
            queue=deque(
                _Work(g * group_size + m, g, m)
                for g in range(num_groups)
                for m in range(group_size)
            ),
            results=[None] * num_episodes,
            free=list(range(self.vec_env.num_envs)),
        )

    def _points_of(self, episode: Episode) -> list[_ForkPoint]:
        """The kept fork points of `episode`, or a `ValueError` that says why there are none."""
        if not self.record_states:
            raise ValueError(
                "this RolloutCollector keeps no fork points; make it with record_states=True "
                "and collect the episode again"
            )
        points = self._fork_points.get(episode.episode_id or "")
        if points is not None:
            return points
        assert self._kinds is not None
        assert self._forkable is not None
        cannot = {kind for kind, ok in zip(self._kinds, self._forkable, strict=True) if not ok}
        if episode.env_id in cannot:
            raise ValueError(
                f"cannot fork episode {episode.episode_id!r}: its env {episode.env_id!r} "
                "cannot fork (can_fork() is False: its state lives outside the process, e.g. "
                "a sandbox session, a remote env or an MCP server, or it has no get_state)"
            )
        raise ValueError(
            f"no fork points for episode {episode.episode_id!r} of {episode.env_id!r}: fork "
            "episodes of this collector's last collect (or of forks since)"
        )

    def _prepare(self) -> None:
        """Learn the sub-envs' kinds (and, when recording, which can fork) once."""
        if self._kinds is None:
            self._kinds = self._sub_env_kinds()
        if self.record_states and self._forkable is None:
            self._forkable = [bool(ok) for ok in self.vec_env.call("can_fork")]

    def _run(self, state: _Collection, group_size: int) -> list[Episode]:
        """Play every episode of `state` to its end; return them in slot order."""
        pending: dict[Future[Generation], int] = {}
        with _autoreset_disabled(self.vec_env):
            try:
                while state.queue or state.runs:
                    self._start_episodes(state, group_size)
                    if self.concurrent:
                        generations = self._await_generations(state, pending)
                    else:
                        generations = self._generate_batch(state)
                    if generations:
                        self._step(state, generations)
            finally:
                for future in pending:
                    future.cancel()
        episodes = [episode for episode in state.results if episode is not None]
        assert len(episodes) == len(state.results)  # the loop runs until every slot is filled
        return episodes

    # -- starting episodes ---------------------------------------------------------------
    def _sub_env_kinds(self) -> list[str]:
        if self.env_id is not None:
            return [self.env_id] * self.vec_env.num_envs
        kinds = []
        for spec, name in zip(
            self.vec_env.get_attr("spec"), self.vec_env.call("__str__"), strict=True
        ):
            kinds.append(spec.id if spec is not None else name)
        return kinds

    def _start_episodes(self, state: _Collection, group_size: int) -> None:
        """Give queued episodes to free sub-envs: reset leaders, restore other members."""
        assert self._kinds is not None
        while state.free and state.queue:
            leaders: list[tuple[int, _Work]] = []
            members: list[tuple[int, _Work]] = []
            waiting: deque[_Work] = deque()
            starting: dict[int, str] = {}  # group -> kind, for leaders placed in this round
            while state.queue and state.free:
                work = state.queue.popleft()
                group = state.groups[work.group]
                kind = group.kind or starting.get(work.group)
                if work.member == 0 and group.branching is None:
                    i = state.free.pop(0)
                    starting[work.group] = self._kinds[i]
                    leaders.append((i, work))
                    continue
                same_kind = next((j for j in state.free if self._kinds[j] == kind), None)
                if same_kind is None:  # no free sub-env of this group's env; wait for one
                    waiting.append(work)
                    continue
                state.free.remove(same_kind)
                members.append((same_kind, work))
            state.queue.extendleft(reversed(waiting))
            if not leaders and not members:
                return
            self._reset(state, leaders, members)
            kept = [(i, w) for i, w in leaders if group_size > 1 or self._can_fork(i)]
            if kept:
                snapshots = self._get_states([i for i, _ in kept])
                for (_, work), snapshot in zip(kept, snapshots, strict=True):
                    state.groups[work.group].snapshot = snapshot
            for i, work in members:
                group = state.groups[work.group]
                self._restore(i, copy.deepcopy(group.snapshot), group.observation)
            for i, work in leaders + members:
                group = state.groups[work.group]
                self._begin(state, i, work)
                group.remaining -= 1
                if group.remaining == 0:
                    group.snapshot = None  # every member has it now

    def _reset(
        self,
        state: _Collection,
        leaders: list[tuple[int, _Work]],
        members: list[tuple[int, _Work]],
    ) -> None:
        """One masked reset: leaders with their group's seed, and members whose sub-env was
        discarded after a failure (rebuilt by the reset, then restored)."""
        assert self._kinds is not None
        broken = [(i, w) for i, w in members if i in state.broken]
        if not leaders and not broken:
            return
        vec = self.vec_env
        seeds: list[int | None] = [None] * vec.num_envs
        mask = [False] * vec.num_envs
        for i, work in leaders:
            seeds[i] = state.groups[work.group].seed
            mask[i] = True
        for i, _ in broken:
            mask[i] = True
        observations, infos = vec.reset(
            seed=seeds, options={"reset_mask": np.array(mask, dtype=np.bool_)}
        )
        for i, work in leaders:
            group = state.groups[work.group]
            group.kind = self._kinds[i]
            group.observation, group.info = observations[i], dict(infos[i])
            logger.debug("group %s: reset sub-env %d (seed %s)", group.group_id, i, group.seed)
        state.broken.difference_update(i for i, _ in leaders + broken)

    def _get_states(self, indices: list[int]) -> list[Any]:
        """``get_state()`` of the sub-envs `indices` (in parallel where the backend can)."""
        try:
            return self.vec_env.get_states(indices)
        except SubEnvError as exc:
            raise SubEnvError(
                exc.index,
                "get_state",
                f"{exc}; group_size > 1 needs envs (and wrappers) that implement "
                "get_state()/set_state()",
            ) from exc

    def _restore(self, i: int, snapshot: Any, observation: Any) -> None:
        """``set_state(snapshot)`` on sub-env `i`; it is then mid-episode, showing
        `observation`, and steppable (as after ``VectorEnv.reset``)."""
        self.vec_env.set_states({i: snapshot}, {i: observation})

    def _begin(self, state: _Collection, i: int, work: _Work) -> None:
        group = state.groups[work.group]
        recorder = EpisodeRecorder(
            env_id=group.kind,
            seed=group.seed,
            group_id=group.group_id,
            reset_info=group.info,
            max_turns=self.max_turns,
            system_prompt=self.system_prompt,
        )
        observation = copy.deepcopy(group.observation)  # members never share message lists
        prompt: chat.Prompt
        prompt_ids = messages = None
        branching = group.branching
        if branching is not None:
            recorder.resume(branching.parent.turns[: branching.turn])
            recorder.episode.parent_id = branching.parent.episode_id
            recorder.episode.parent_turn = branching.turn
        if self.prompt_mode == "tokens":
            assert self.prompt_builder is not None
            if branching is not None:
                prompt = prompt_ids = list(branching.parent.turns[branching.turn].prompt_ids or [])
            else:
                first = recorder.first_messages(observation)
                prompt = prompt_ids = self.prompt_builder.start(first)
        elif self.prompt_mode == "messages":
            if branching is not None:
                messages = branching.point.conversation()
            else:
                messages = recorder.first_messages(observation)
            prompt = [dict(m) for m in messages]
        else:
            prompt = observation
        run = _Run(work, recorder, observation, prompt, prompt_ids, messages)
        if self.record_states and self._can_fork(i):
            recorder.episode.episode_id = f"{group.group_id}/{work.member}"
            prefix = (
                self._fork_points[str(branching.parent.episode_id)][: branching.turn]
                if branching is not None
                else []
            )
            run.points = [*prefix, self._fork_point(group.snapshot, run)]
        state.runs[i] = run
        self._check_context(state, i)

    def _can_fork(self, i: int) -> bool:
        return self._forkable is not None and self._forkable[i]

    def _fork_point(self, env_state: Any, run: _Run) -> _ForkPoint:
        length = len(run.messages) if run.messages is not None else 0
        return _ForkPoint(env_state, copy.deepcopy(run.observation), run.messages, length)

    # -- prompts -------------------------------------------------------------------------
    def _advance(
        self, state: _Collection, going_on: list[tuple[int, Generation, Any, dict]]
    ) -> None:
        """Build the next prompt of each ``(sub-env, generation, observation, info)`` of
        `going_on` from its new observation (in ``"tokens"`` mode: one `extend_many` call)."""
        if self.prompt_mode == "tokens":
            assert self.prompt_builder is not None
            turns = []
            for i, generation, obs, info in going_on:
                previous = state.runs[i].prompt_ids
                assert previous is not None
                assert generation.token_ids is not None
                new = chat.observation_messages(obs, info, first=False)
                turns.append((previous, generation.token_ids, new))
            prompts = self.prompt_builder.extend_many(turns)
        for n, (i, generation, obs, info) in enumerate(going_on):
            run = state.runs[i]
            run.observation = obs
            if self.prompt_mode == "tokens":
                run.prompt = run.prompt_ids = prompts[n]
            elif self.prompt_mode == "messages":
                assert run.messages is not None
                run.messages.append({"role": "assistant", "content": generation.text})
                run.messages.extend(chat.observation_messages(obs, info, first=False))
                run.prompt = [dict(m) for m in run.messages]
            else:
                run.prompt = obs
            self._check_context(state, i)

    def _check_context(self, state: _Collection, i: int) -> None:
        """End the episode (no policy call) if its next prompt exceeds `max_prompt_tokens`."""
        if self.max_prompt_tokens is None:
            return
        run = state.runs[i]
        if run.prompt_ids is not None:
            length = len(run.prompt_ids)
        elif self.tokenizer is not None:
            length = len(chat.encode_prompt(self.tokenizer, run.prompt, self.chat_template_kwargs))
        else:
            return
        if length > self.max_prompt_tokens:
            logger.debug(
                "episode %d: prompt of %d tokens > max_prompt_tokens=%d; truncating",
                run.work.slot,
                length,
                self.max_prompt_tokens,
            )
            self._end_for_context(state, i)

    def _end_for_context(self, state: _Collection, i: int) -> None:
        run = state.runs[i]
        run.recorder.end_for_context(run.observation, run.prompt_ids)
        self._finish(state, i)

    # -- generating ----------------------------------------------------------------------
    def _generate_batch(self, state: _Collection) -> dict[int, Generation]:
        """One ``policy.generate`` call for every sub-env waiting for an action."""
        ready = sorted(i for i, run in state.runs.items() if not run.in_flight)
        if not ready:
            return {}
        prompts = [state.runs[i].prompt for i in ready]
        generations = self.policy.generate(prompts)
        if not isinstance(generations, list) or len(generations) != len(prompts):
            raise PolicyError(
                f"{type(self.policy).__name__}.generate returned "
                f"{len(generations) if isinstance(generations, list) else generations!r:.60} "
                f"generations for {len(prompts)} prompts"
            )
        return dict(zip(ready, generations, strict=True))

    def _await_generations(
        self, state: _Collection, pending: dict[Future[Generation], int]
    ) -> dict[int, Generation]:
        """Submit every waiting sub-env's prompt; return the results that are ready first."""
        # Only called when `self.concurrent`: the policy has a callable `submit`.
        submit = cast(ConcurrentPolicy, self.policy).submit
        for i in sorted(state.runs):
            run = state.runs[i]
            if not run.in_flight:
                pending[submit(run.prompt)] = i
                run.in_flight = True
        if not pending:
            return {}
        done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
        generations: dict[int, Generation] = {}
        for future in done:
            i = pending.pop(future)
            state.runs[i].in_flight = False
            try:
                generations[i] = future.result()
            except ContextLengthError as exc:
                logger.debug("sub-env %d: the policy rejected the prompt: %s", i, exc)
                self._end_for_context(state, i)
        return generations

    # -- stepping ------------------------------------------------------------------------
    def _step(self, state: _Collection, generations: dict[int, Generation]) -> None:
        order = sorted(generations)
        for i in order:
            _check_generation(generations[i], self.prompt_mode, self.policy)
        observations, rewards, terminated, truncated, infos = self.vec_env.step(
            {i: generations[i].text for i in order}
        )
        going_on: list[tuple[int, Generation, Any, dict]] = []
        tokens = self.prompt_mode == "tokens"
        for j, i in enumerate(order):
            run, generation, info = state.runs[i], generations[i], infos[j]
            if "error" in info:
                state.broken.add(i)
            over = run.recorder.record(
                run.observation,
                generation,
                rewards[j],
                terminated[j],
                truncated[j],
                info,
                # "tokens": the builder's list (or a copy of a recorded turn's), plain ints
                prompt_ids=run.prompt_ids if tokens else generation.prompt_ids,
                prompt_ids_checked=tokens,
            )
            if over:
                self._finish(state, i)
            else:
                going_on.append((i, generation, observations[j], info))
        self._advance(state, going_on)
        self._record_fork_points(state, order)

    def _record_fork_points(self, state: _Collection, stepped: list[int]) -> None:
        """A fork point for the next turn of each just-stepped episode that goes on (one
        ``get_states`` call), when recording."""
        going_on = [i for i in stepped if i in state.runs and state.runs[i].points is not None]
        if not going_on:
            return
        for i, env_state in zip(going_on, self._get_states(going_on), strict=True):
            run = state.runs[i]
            assert run.points is not None
            run.points.append(self._fork_point(env_state, run))

    def _finish(self, state: _Collection, i: int) -> None:
        run = state.runs.pop(i)
        state.results[run.work.slot] = run.recorder.episode
        if run.points is not None:
            self._fork_points[str(run.recorder.episode.episode_id)] = run.points
        state.free.append(i)
        state.free.sort()
        if state.growth is not None:
            self._grow(state, state.groups[run.work.group], run.recorder.episode)
        logger.debug(
            "episode %d finished on sub-env %d after %d turns",
            run.work.slot,
            i,
            len(run.recorder.episode.turns),
        )


@dataclass
class _Collection:
    """The state of one `RolloutCollector.collect` call."""

    groups: list[_Group]
    queue: deque[_Work]
    results: list[Episode | None]
    free: list[int]
    runs: dict[int, _Run] = field(default_factory=dict)
    broken: set[int] = field(default_factory=set)  # sub-envs discarded after a failed step
    growth: _Growth | None = None  # set by `collect_tree`: finished episodes branch


@dataclass
class _Growth:
    """The trees of one `RolloutCollector.collect_tree` call: per tree, the episodes started
    and the tokens its finished episodes generated, and each result slot's tree."""

    spec: TreeSpec
    started: list[int]
    tokens: list[int]
    slot_tree: list[int]


def _check_generation(generation: Any, mode: str, policy: Any) -> None:
    if not isinstance(generation, Generation) or not isinstance(generation.text, str):
        raise PolicyError(
            f"{type(policy).__name__} returned {generation!r:.80}, not a Generation with text"
        )
    if mode == "tokens" and generation.token_ids is None:
        raise PolicyError(
            f"prompt_mode='tokens' needs token ids, but {type(policy).__name__} returned a "
            "Generation without token_ids; use prompt_mode='messages'"
        )


@contextlib.contextmanager
def _autoreset_disabled(vec_env: VectorEnv) -> Iterator[None]:
    """Run `vec_env` with ``AutoresetMode.DISABLED`` (and publish it in its ``metadata``)
    inside the block; its own mode is back afterwards, even on error."""
    mode = vec_env.autoreset_mode
    vec_env.autoreset_mode = vec_env.metadata["autoreset_mode"] = AutoresetMode.DISABLED
    try:
        yield
    finally:
        vec_env.autoreset_mode = vec_env.metadata["autoreset_mode"] = mode


def collect_episodes(
    vec_env: VectorEnv,
    policy: Policy,
    *,
    num_episodes: int,
    group_size: int = 1,
    seed: int | None = None,
    **collector_kwargs: Any,
) -> list[Episode]:
    """``RolloutCollector(vec_env, policy, **collector_kwargs).collect(num_episodes, ...)``.

    See `RolloutCollector` for `collector_kwargs` (``max_turns``, ``prompt_mode``,
    ``system_prompt``, ``max_prompt_tokens``, ...) and the module docstring for the rules.
    """
    collector = RolloutCollector(vec_env, policy, **collector_kwargs)
    return collector.collect(num_episodes, group_size=group_size, seed=seed)
