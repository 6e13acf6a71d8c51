"""The step ids the layouts carry (``step_ids=True``): GiGPO's anchor-state keys and the
nodes of a tree of forked episodes, per turn of each row.

The main check recomputes `gigpo` and `tree_advantages` from nothing but a layout's fields
(per-turn rewards read off `token_rewards`, `group_id`, `state_keys`, `node_ids`,
`tree_root`) and asks for exactly the advantages `episode_advantages` computes from the
episodes, for both layouts (and split episode rows), packed, padded and split.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from xpgym.core.errors import InfraCause
from xpgym.core.trajectory import Episode, Turn, tree_nodes
from xpgym.training.advantages import (
    episode_advantages,
    episode_scores,
    gigpo,
    tree_advantages,
)
from xpgym.training.layouts import (
    PackedRows,
    PaddedRows,
    RowInfo,
    SplitRows,
    episode_rows,
    turn_rows,
)

GAMMA = 0.9


def played(
    rewards: list[float],
    observations: list[str],
    states: list[str] | None = None,
    *,
    break_at: int | None = None,
) -> tuple[list[Turn], dict]:
    """Turns with prefix-consistent token ids (turn ``break_at``'s prompt re-renders the
    history instead) and, with `states`, the env's state key before each turn: the reset's
    in the returned episode info, then each step's in the turn before."""
    turns, prompt = [], [1]
    for t, (reward, observation) in enumerate(zip(rewards, observations, strict=True)):
        if t == break_at:
            prompt = [3, *prompt]
        after = {} if states is None or t + 1 >= len(states) else {"state_key": states[t + 1]}
        response = [10 + t, 20 + t]
        turns.append(
            Turn(
                observation,
                "act",
                reward,
                terminated=t == len(rewards) - 1,
                info=after,
                prompt_ids=prompt,
                response_ids=response,
            )
        )
        prompt = [*prompt, *response, 2]
    info = {} if states is None else {"reset_info": {"state_key": states[0]}}
    return turns, info


def forest() -> list[Episode]:
    """Group g: three roots whose env reports state keys (s1 is reached by all three, at
    different turns), a branch of g/0 forked at turn 1 (its own group, g's tree) and an
    infra-error member; group h: two roots keyed by their observations, one of them not
    prefix-consistent at turn 1."""

    def episode(
        episode_id: str,
        group: str,
        rewards: list[float],
        observations: list[str],
        states: list[str] | None = None,
        break_at: int | None = None,
    ) -> Episode:
        turns, info = played(rewards, observations, states, break_at=break_at)
        return Episode("toy", group_id=group, turns=turns, info=info, episode_id=episode_id)

    failed = episode("g/3", "g", [0.0, 1.0], ["o", "o"], ["s0", "s1"])
    failed.infra_error = InfraCause("sub_env_crash", "gone")
    branch = episode("g/0@1/0", "g/0@1", [0.0, 0.5, 1.0], ["o", "o", "o"], ["s0", "s1", "s4"])
    return [
        episode("g/0", "g", [0.0, 0.0, 1.0], ["o", "o", "o"], ["s0", "s1", "s2"]),
        episode("g/1", "g", [0.0, 1.0], ["o", "o"], ["s0", "s1"]),
        episode("g/2", "g", [0.0, 0.0, 0.0], ["o", "o", "o"], ["s0", "s3", "s1"]),
        replace(branch, parent_id="g/0", parent_turn=1),
        failed,
        episode("h/0", "h", [0.5, 1.0], ["a", "b"]),
        episode("h/1", "h", [0.0, 0.0, 1.0], ["a", "c", "b"], break_at=1),
    ]


def per_token(rows: RowInfo, b: int) -> tuple[np.ndarray, np.ndarray]:
    """Row `b`'s ``(turn_index, token_rewards)``, whatever the form (padding is -1 / 0)."""
    if isinstance(rows, PackedRows):
        span = slice(int(rows.cu_seqlens[b]), int(rows.cu_seqlens[b + 1]))
        return rows.turn_index[span], rows.token_rewards[span]
    assert isinstance(rows, (PaddedRows, SplitRows))
    return rows.turn_index[b], rows.token_rewards[b]


def read_turns(rows: RowInfo) -> dict:
    """Every per-episode input of `gigpo` and `tree_advantages`, from the rows alone."""
    n = int(rows.episode_index.max()) + 1
    horizon = int((rows.first_turn + rows.num_turns).max())
    rewards, mask = np.zeros((n, horizon)), np.zeros((n, horizon), dtype=bool)
    groups, roots = [""] * n, [""] * n
    keys: list[list[str]] = [[""] * horizon for _ in range(n)]
    nodes: list[list[str]] = [[""] * horizon for _ in range(n)]
    assert rows.state_keys is not None
    assert rows.node_ids is not None
    assert rows.tree_root is not None
    for b in range(len(rows)):
        e, first = int(rows.episode_index[b]), int(rows.first_turn[b])
        groups[e], roots[e] = rows.group_id[b], rows.tree_root[b]
        turn_index, token_rewards = per_token(rows, b)
        assert len(rows.state_keys[b]) == len(rows.node_ids[b]) == rows.num_turns[b]
        for k, (key, node) in enumerate(zip(rows.state_keys[b], rows.node_ids[b], strict=True)):
            t = first + k
            keys[e][t], nodes[e][t] = key, node
            if not rows.infra_error[b]:  # its turns hold no reward and are no turns to learn
                rewards[e, t] = token_rewards[np.flatnonzero(turn_index == t)[-1]]
                mask[e, t] = True
    return {
        "rewards": rewards,
        "mask": mask,
        "groups": groups,
        "keys": keys,
        "roots": roots,
        "nodes": nodes,
    }


LAYOUTS: dict[str, Callable[..., PackedRows]] = {
    "turn rows": turn_rows,
    "episode rows": lambda eps, **kw: episode_rows(eps, on_mismatch="split", **kw),
}
FORMS: dict[str, Callable[[PackedRows], RowInfo]] = {
    "packed": lambda rows: rows,
    "padded": lambda rows: rows.pad(pad_token_id=0),
    "split": lambda rows: rows.split(pad_token_id=0),
}


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_gigpo_from_the_rows_alone_is_gigpo_of_the_episodes(layout: str, form: str) -> None:
    episodes = forest()
    rows = FORMS[form](LAYOUTS[layout](episodes, step_ids=True))
    got = read_turns(rows)
    out = gigpo(got["rewards"], got["mask"], got["groups"], got["keys"], gamma=GAMMA, omega=0.5)
    want = episode_advantages("gigpo", episodes, gamma=GAMMA, omega=0.5)
    np.testing.assert_array_equal(out, want)
    assert np.count_nonzero(want) > 10


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_tree_advantages_from_the_rows_alone_are_those_of_the_episodes(
    layout: str, form: str
) -> None:
    episodes = forest()
    rows = FORMS[form](LAYOUTS[layout](episodes, step_ids=True))
    got = read_turns(rows)
    scores = episode_scores(got["rewards"], got["mask"])
    out = tree_advantages(scores, got["mask"], got["roots"], got["nodes"])
    np.testing.assert_array_equal(out, episode_advantages("tree", episodes))
    assert np.count_nonzero(out) > 5


def test_episode_rows_split_at_a_mismatch_carry_each_runs_own_turns_ids() -> None:
    rows = episode_rows(forest(), on_mismatch="split", step_ids=True)
    runs = rows.episode_index == 6  # h/1 re-renders its history at turn 1
    assert rows.first_turn[runs].tolist() == [0, 1]
    assert rows.state_keys is not None
    assert rows.node_ids is not None
    assert rows.state_keys[runs].tolist() == [('obs:"a"',), ('obs:"c"', 'obs:"b"')]
    assert rows.node_ids[runs].tolist() == [("h/1#0",), ("h/1#1", "h/1#2")]


def test_turns_of_one_group_on_one_state_share_a_state_key() -> None:
    rows = turn_rows(forest(), step_ids=True)
    assert rows.state_keys is not None
    at = {
        (int(e), int(t)): key
        for e, t, (key,) in zip(rows.episode_index, rows.first_turn, rows.state_keys, strict=True)
    }
    assert at[0, 1] == at[1, 1] == at[2, 2] == at[3, 1] == "env:s1"
    assert at[2, 1] == "env:s3" != at[0, 2]
    assert at[5, 0] == at[6, 0] == 'obs:"a"'  # no key from the env: the observation


def test_a_branch_shares_its_parents_nodes_before_the_fork_and_its_root() -> None:
    rows = episode_rows(forest(), on_mismatch="split", step_ids=True)
    assert rows.node_ids is not None
    assert rows.tree_root is not None
    assert rows.node_ids[0] == ("g/0#0", "g/0#1", "g/0#2")
    assert rows.node_ids[3] == ("g/0#0", "g/0@1/0#1", "g/0@1/0#2")
    assert rows.group_id[3] == "g/0@1"
    assert rows.tree_root[3] == rows.tree_root[0] == "g"


def test_an_infra_error_row_is_a_tree_of_its_own() -> None:
    rows = episode_rows(forest(), on_mismatch="split", step_ids=True)
    assert rows.tree_root is not None
    assert rows.infra_error[4]
    assert rows.tree_root[4] == rows.group_id[4] != "g"


def test_without_step_ids_the_rows_carry_none() -> None:
    rows = turn_rows(forest())
    assert rows.state_keys is None
    assert rows.node_ids is None
    assert rows.tree_root is None


def test_episodes_without_episode_ids_have_state_keys_but_no_tree() -> None:
    episodes = [replace(ep, episode_id=None, parent_id=None, parent_turn=None) for ep in forest()]
    rows = turn_rows(episodes, step_ids=True)
    assert rows.state_keys is not None
    assert len(rows.state_keys) == len(rows)
    assert rows.node_ids is None
    assert rows.tree_root is None


def test_a_batch_without_a_branchs_parent_has_state_keys_but_no_tree() -> None:
    """A filtered batch (here g/0, the branch's parent, left out) lays out as usual: the
    state keys are there, the tree is not (ROLL's step rows need only the keys)."""
    episodes = [ep for ep in forest() if ep.episode_id != "g/0"]
    rows = turn_rows(episodes, step_ids=True)
    assert rows.state_keys is not None
    assert rows.state_keys.tolist() == turn_rows(forest(), step_ids=True).state_keys[3:].tolist()
    assert rows.node_ids is None
    assert rows.tree_root is None
    with pytest.raises(ValueError, match="not among the episodes"):
        tree_nodes(episodes)


def test_truncation_keeps_the_ids_of_every_turn_collected() -> None:
    rows = episode_rows(forest(), on_mismatch="split", step_ids=True)
    cut = rows.pad(pad_token_id=0, max_length=4, truncate=True)
    assert cut.overlong.any()
    assert cut.state_keys is not None
    assert rows.state_keys is not None
    assert cut.node_ids is not None
    assert rows.node_ids is not None
    assert cut.state_keys.tolist() == rows.state_keys.tolist()
    assert cut.node_ids.tolist() == rows.node_ids.tolist()
