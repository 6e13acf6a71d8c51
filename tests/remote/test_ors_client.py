"""``ors:`` ids: ors-sdk's own server (`ors.Server`, an `ors.Environment` with ``@tool``s) played
through `xpgym.make` with tool calls in the model's text, the reference collector, and a
crash of the server.

The server is `ors_own_server.py`: the env ``multiply`` (tasks ``{"a", "b"}``; tools ``add``,
``submit``, ``crash``, ``sleep``).
"""

from __future__ import annotations

import asyncio
import json
import pickle
import re
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from own_server import OwnServer

import xpgym
from xpgym.core.chat import Prompt
from xpgym.core.errors import find_infra_cause
from xpgym.core.vector import SyncVectorEnv
from xpgym.remote import BackgroundServer, ORSEnv, RemoteEnvError, parse_ors_id
from xpgym.remote.ors_client import sse_events
from xpgym.rollout.collector import collect_episodes
from xpgym.rollout.policies import Generation
from xpgym.rollout.runner import make_tasks, run_episode, shared_prompt_builder, task_env_pool

TRAIN = [(2, 3), (4, 5), (6, 7), (3, 9), (8, 8)]  # the server's train split
_QUESTION = re.compile(r"What is (\d+) times (\d+)\?")


def start_ors_server() -> OwnServer:
    """`ors_own_server.py` in a subprocess of the test venv (skips without ors-sdk)."""
    pytest.importorskip("ors", reason="ors-sdk is the `interop` extra")
    return OwnServer(sys.executable, "ors_own_server.py")


@pytest.fixture(scope="module")
def server() -> Iterator[OwnServer]:
    srv = start_ors_server()
    try:
        yield srv
    finally:
        srv.stop()


def multiply(srv: OwnServer, **kwargs: Any) -> ORSEnv:
    env = xpgym.make(f"ors:{srv.url}/multiply", **kwargs)
    assert isinstance(env, ORSEnv)
    return env


def call(name: str, **arguments: Any) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def question(text: str) -> tuple[int, int]:
    a, b = _QUESTION.search(text).groups()  # type: ignore[union-attr]
    return int(a), int(b)


class AddThenSubmit:
    """A batched chat policy: first ``add`` (a, b), then ``submit`` a * b."""

    tokenizer = None

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        out = []
        for prompt in prompts:
            a, b = question(prompt[0]["content"])  # type: ignore[index]
            asked = any(m["role"] == "assistant" for m in prompt)  # type: ignore[index]
            text = call("submit", answer=a * b) if asked else call("add", x=a, y=b)
            out.append(Generation(text=f"Let me see. {text}"))
        return out


# -- ids ------------------------------------------------------------------------------------
def test_an_ors_id_is_the_server_url_and_the_env_name() -> None:
    assert parse_ors_id("ors:http://h:1/pre/fix/mathenv") == ("http://h:1/pre/fix", "mathenv")
    spec = xpgym.spec("ors:http://127.0.0.1:9/multiply")
    assert (spec.entry_point, spec.kwargs) == (
        "xpgym.remote.ors_client:ORSEnv",
        {"url": "http://127.0.0.1:9", "env_name": "multiply"},
    )


@pytest.mark.parametrize(
    ("env_id", "message"),
    [
        ("ors:", "names no env"),
        ("ors:http://127.0.0.1:8080", "names no env"),
        ("ors:http://127.0.0.1:8080/", "names no env"),
        ("ors:multiply", "is not an http"),
        ("ors:ws://127.0.0.1:8080/multiply", "is not an http"),
    ],
)
def test_an_ors_id_without_an_env_name_is_a_clear_error(env_id: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        xpgym.make(env_id)
    assert "ors:http://127.0.0.1:8080/mathenv" in str(info.value)  # shows a good id


def test_server_sent_events_are_read_with_comments_and_multi_line_data() -> None:
    body = b': ping\n\nevent: task_id\ndata: 7\n\nevent: end\ndata: {"a":\ndata: 1}\n\n'
    assert sse_events(body) == [("task_id", "7"), ("end", '{"a":\n1}')]


# -- whole episodes on ors-sdk's own server -------------------------------------------------
def test_make_plays_whole_episodes_through_tool_calls_in_the_text(server: OwnServer) -> None:
    with multiply(server) as env:
        for seed in (0, 1, 2):
            obs, info = env.reset(seed=seed)
            a, b = question(obs)
            assert (a, b) in TRAIN
            assert info["task_spec"] == {"a": a, "b": b}
            names = [t["function"]["name"] for t in info["tools"]]
            assert names == ["add", "crash", "sleep", "submit"]
            assert info["tool_instructions"] in obs  # the tool list follows the prompt
            assert env.metadata["tools"] == info["tools"]
            obs, reward, terminated, truncated, info = env.step(call("add", x=a, y=b))
            assert (obs, reward, terminated, truncated) == (str(a + b), 0.0, False, False)
            assert info["tool_calls"][0]["ok"] is True
            obs, reward, terminated, _, info = env.step(call("submit", answer=a * b))
            assert (obs, reward, terminated) == ("Correct.", 1.0, True)
            assert info["tool_calls"][0]["info"]["metadata"] == {"right": True}


def test_the_seed_picks_the_task_and_options_name_one(server: OwnServer) -> None:
    with multiply(server) as env, multiply(server) as other:
        assert env.reset(seed=4) == other.reset(seed=4)
        obs, _ = env.reset(options={"split": "test", "index": 1})
        assert question(obs) == (13, 7)
        obs, _ = env.reset(options={"task_spec": {"a": 100, "b": 3}})
        assert question(obs) == (100, 3)
        assert env.step(call("submit", answer=300))[1] == 1.0
        with pytest.raises(ValueError, match="unknown reset options"):
            env.reset(options={"level": 3})


@pytest.mark.parametrize(
    ("action", "problem"),
    [
        ("The answer is 6.", "No tool call found"),
        ("<tool_call>{not json}</tool_call>", "Invalid tool call: invalid JSON"),
        (call("divide", x=1, y=2), "Unknown tool 'divide'"),
        (call("add", x=1), "missing required argument 'y'"),
        (call("submit", answer="six"), "argument 'answer': expected integer"),
    ],
)
def test_a_bad_call_is_the_policys_and_the_episode_goes_on(
    server: OwnServer, action: str, problem: str
) -> None:
    with multiply(server) as env:
        env.reset(options={"task_spec": {"a": 2, "b": 3}})
        obs, reward, terminated, truncated, info = env.step(action)
        assert problem in obs
        assert "Available tools: add, crash, sleep, submit." in obs
        assert (reward, terminated, truncated, info["invalid_action"]) == (0.0, False, False, True)
        assert find_infra_cause(info) is None
        assert env.step(call("submit", answer=6))[:3] == ("Correct.", 1.0, True)


def test_a_tool_that_raises_on_the_server_is_an_infra_error(server: OwnServer) -> None:
    with multiply(server) as env:
        first, _ = env.reset(options={"task_spec": {"a": 2, "b": 3}})
        obs, reward, terminated, truncated, info = env.step(call("crash"))
        assert (obs, reward, terminated, truncated) == (first, 0.0, False, True)
        cause = find_infra_cause(info)
        assert cause is not None
        assert cause.kind == "remote_error"
        assert "crashed on purpose" in cause.message
        assert env.session_id is None  # abandoned; the next reset opens another
        env.reset(options={"task_spec": {"a": 2, "b": 3}})
        assert env.step(call("submit", answer=6))[1] == 1.0


def test_a_group_snapshot_is_the_task_and_a_mid_episode_one_is_refused(server) -> None:
    with multiply(server) as env, multiply(server) as other:
        obs, _ = env.reset(seed=7)
        snapshot = env.get_state()
        other.reset(seed=8)
        other.set_state(snapshot)
        a, b = question(obs)
        assert other.step(call("submit", answer=a * b))[1] == 1.0
        env.step(call("add", x=1, y=1))
        with pytest.raises(ValueError, match="mid-episode"):
            other.set_state(env.get_state())


def test_random_actions_are_calls_of_the_episodes_tools(server: OwnServer) -> None:
    with multiply(server) as env:
        env.reset(seed=0)
        for _ in range(5):
            action = env.sample_random_action()
            assert action.startswith("<tool_call>")
            assert json.loads(action[11:-12])["name"] in {"add", "crash", "sleep", "submit"}


def test_a_pickled_client_opens_its_own_session(server: OwnServer) -> None:
    env = multiply(server)
    obs, _ = env.reset(seed=2)
    copy = pickle.loads(pickle.dumps(env))
    assert copy.session_id is None
    assert copy.reset(seed=2)[0] == obs
    assert copy.session_id != env.session_id
    env.close()
    copy.close()


def test_a_server_that_is_not_there_fails_the_reset_clearly() -> None:
    env = ORSEnv("http://127.0.0.1:9", "multiply", max_retries=0)
    with pytest.raises(RemoteEnvError, match="is the server running"):
        env.reset()


# -- the reference collector ----------------------------------------------------------------
def test_the_collector_collects_groups_of_episodes(server: OwnServer) -> None:
    vec = SyncVectorEnv([lambda: multiply(server) for _ in range(2)])
    try:
        episodes = collect_episodes(vec, AddThenSubmit(), num_episodes=4, group_size=2, seed=3)
    finally:
        vec.close()
    assert [e.outcome for e in episodes] == ["ok"] * 4
    for episode in episodes:
        assert [t.reward for t in episode.turns] == [0.0, 1.0]
        assert episode.turns[-1].terminated
    for group in (episodes[0:2], episodes[2:4]):
        assert len({e.turns[0].observation for e in group}) == 1  # one task per group


def test_a_server_killed_mid_episode_gives_infra_error_episodes() -> None:
    srv = start_ors_server()

    class Sleeps(AddThenSubmit):
        def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
            return [Generation(text=call("sleep")) for _ in prompts]

    killed: list[str] = []

    def kill_once_a_call_runs() -> None:
        killed.append(srv.wait_for_step("call sleep"))
        srv.proc.kill()

    killer = threading.Thread(target=kill_once_a_call_runs)
    killer.start()
    vec = SyncVectorEnv([lambda: multiply(srv, max_retries=0) for _ in range(2)])
    try:
        episodes = collect_episodes(vec, Sleeps(), num_episodes=2, seed=0)
    finally:
        killer.join()
        vec.close()
        srv.stop()
    assert killed == ["call sleep\n"]  # killed while a call ran
    assert [e.outcome for e in episodes] == ["infra_error"] * 2
    for episode in episodes:
        assert episode.infra_error is not None
        assert episode.infra_error.kind == "remote_error"
        assert episode.turns[-1].truncated


# -- a trainer's rollout (the adapters' hooks: task_env_pool + run_episode) -----------------
def test_a_trainers_runner_plays_an_ors_task_with_token_ids(server: OwnServer) -> None:
    pytest.importorskip("transformers", reason="the runner builds prompts with a tokenizer")
    from random_byte_lm import EOS_ID, tiny_tokenizer

    tokenizer = tiny_tokenizer()
    (task,) = make_tasks(f"ors:{server.url}/multiply", 1, seed=5)
    pool = task_env_pool()
    env = pool.acquire(task)
    with multiply(server) as probe:
        a, b = question(probe.reset(seed=task.seed)[0])  # the task this seed picks
    texts = [call("add", x=a, y=b), call("submit", answer=a * b)]

    async def engine(prompt_ids: list[int], max_new_tokens: int) -> Generation:
        text = texts.pop(0)
        ids = [*tokenizer.encode(text, add_special_tokens=False), EOS_ID]
        return Generation(text=text, token_ids=ids, logprobs=[-0.5] * len(ids))

    builder = shared_prompt_builder(tokenizer)
    try:
        episode = asyncio.run(run_episode(env, task, engine, builder, max_new_tokens=256))
    finally:
        pool.release(task, env)
        env.close()
    assert (episode.outcome, episode.group_id) == ("ok", task.group_id)
    assert [t.reward for t in episode.turns] == [0.0, 1.0]
    assert all(t.response_ids for t in episode.turns)
    assert episode.turns[1].prompt_ids[: len(episode.turns[0].prompt_ids)] == (
        episode.turns[0].prompt_ids
    )


# -- xpgym's own ORS server -------------------------------------------------------------------
def test_xpgyms_own_ors_server_plays_like_xpgym_make() -> None:
    """A text env through its ``respond`` tool: text, rewards, end flags and info unchanged."""
    game = "game:GuessTheNumber-v0"
    actions = [r"\boxed{10}", "no box", *[r"\boxed{1}"] * 6]
    with BackgroundServer([game]) as srv, xpgym.make(f"ors:{srv.url}/{game}") as env:
        remote_obs, info = env.reset(options={"task_spec": {"seed": 3}})
        local = xpgym.make(game)
        local_obs, _ = local.reset(seed=3)
        assert remote_obs.startswith(local_obs)  # then the tool list
        assert [t["function"]["name"] for t in info["tools"]] == ["respond"]
        for action in actions:
            *remote, remote_info = env.step(call("respond", text=action))
            *expected, local_info = local.step(action)
            assert remote == expected
            assert {k: remote_info.get(k) for k in local_info} == local_info
            if expected[2] or expected[3]:
                break
        assert expected[3]  # a limit ended it: truncated, not terminated, on both
