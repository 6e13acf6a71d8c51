"""TRL (trl 1.16) ``environment_factory``: the env class `environment_class` builds (its tool
methods and the JSON schemas transformers derives from them, reset, reward, the env's
errors), the chat dataset, and the tiny tokenizer's tool chat that TRL's checks accept."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any, Literal

import pytest

pytest.importorskip(
    "xpgym.adapters.trl", reason="needs trl 1.16 (the trl extra)", exc_type=ImportError
)

from toy_envs import ToyEnv
from transformers.utils import get_json_schema
from trl.chat_template_utils import (
    is_chat_template_prefix_preserving,
    parse_response,
    supports_tool_calling,
)

import xpgym
from xpgym.adapters.trl import (
    ACTION_TOOL,
    TRLEnvironment,
    environment_class,
    task_dataset,
)
from xpgym.core import registry
from xpgym.core.tools.decorator import tool
from xpgym.core.wrappers.tools import ToolEnvWrapper
from xpgym.reference.tiny_model import build_tiny_tokenizer
from xpgym.rollout.runner import EpisodeTask, make_tasks

GUESS = "game:GuessTheNumber-v0-easy"
TOOLGYM = "toolgym:ClosestToK-v0-easy"
TOY = "test:TRLEnvToy-v0"
TYPED = "test:TRLEnvTyped-v0"


@tool
def lookup(
    keys: list[int],
    mode: Literal["fast", "exact"],
    limit: float | None = None,
    labels: dict[str, str] | None = None,
) -> str:
    """Look keys up.

    Args:
        keys: The keys to look up.
        mode: How hard to look.
        limit: Seconds to spend at most.
        labels: A label per key.
    """
    return json.dumps({"keys": keys, "mode": mode, "limit": limit, "labels": labels})


@tool(name="reset")
def reset_tool() -> str:
    """A tool TRL would take for the env's reset."""
    return ""


@pytest.fixture(scope="module", autouse=True)
def toy_envs() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry, "registry", dict(registry.registry))  # no id left behind
        xpgym.register(TOY, entry_point=ToyEnv)
        xpgym.register(TYPED, entry_point=lambda: ToolEnvWrapper(ToyEnv(), [lookup]))
        yield


def tools_of(cls: type[TRLEnvironment]) -> dict[str, Any]:
    """The tool methods TRL finds on an instance: public functions but reset/get_reward."""
    instance = cls()
    return {
        schema["function"]["name"]: getattr(instance, schema["function"]["name"])
        for schema in cls.tool_schemas
    }


def task(env_id: str, seed: int = 3) -> str:
    return EpisodeTask(env_id, seed=seed, group_id=f"g{seed}").to_json()


def play(environment: TRLEnvironment, name: str, **arguments: Any) -> str:
    return asyncio.run(getattr(environment, name)(**arguments))


def test_a_text_env_gets_the_one_action_tool_with_its_documented_schema() -> None:
    cls = environment_class(GUESS)
    assert [s["function"]["name"] for s in cls.tool_schemas] == [ACTION_TOOL]
    schema = get_json_schema(tools_of(cls)[ACTION_TOOL])
    assert schema == cls.tool_schemas[0]
    assert schema["function"]["parameters"] == {
        "type": "object",
        "properties": {
            "action": {"type": "string", "description": "The action, as the task asks for it."}
        },
        "required": ["action"],
    }


def test_a_toolgym_env_gets_its_typed_tools_and_no_action_tool() -> None:
    cls = environment_class(TOOLGYM)
    methods = tools_of(cls)
    assert list(methods) == ["Observe", "LookUp", "Distance", "Done"]
    for schema in cls.tool_schemas:
        derived = get_json_schema(methods[schema["function"]["name"]])["function"]
        own = schema["function"]
        assert derived["name"] == own["name"]
        assert derived["description"] == own["description"]
        assert derived["parameters"]["properties"] == own["parameters"]["properties"]
        assert derived["parameters"].get("required", []) == own["parameters"].get("required", [])


def test_a_tool_wrapper_env_gets_its_tools_typed_and_the_action_tool_for_answers() -> None:
    cls = environment_class(TYPED)
    methods = tools_of(cls)
    assert list(methods) == ["lookup", ACTION_TOOL]
    parameters = get_json_schema(methods["lookup"])["function"]["parameters"]
    assert parameters["required"] == ["keys", "mode"]
    properties = parameters["properties"]
    assert properties["keys"] == {
        "type": "array",
        "items": {"type": "integer"},
        "description": "The keys to look up.",
    }
    assert properties["mode"]["enum"] == ["fast", "exact"]
    assert properties["limit"]["type"] == "number"
    assert properties["labels"]["additionalProperties"] == {"type": "string"}


def test_a_tool_call_reaches_the_env_as_its_call_and_the_reply_comes_back() -> None:
    environment = environment_class(TYPED)()
    environment.reset(task=task(TYPED))
    reply = play(environment, "lookup", keys=[1, 2], mode="exact")
    assert json.loads(reply) == {"keys": [1, 2], "mode": "exact", "limit": None, "labels": None}
    assert environment.episode is not None
    assert environment.episode.turns[0].info["tool_calls"][0]["name"] == "lookup"
    assert not environment.done


def test_reset_plays_the_rows_task_from_its_seed() -> None:
    cls = environment_class(TOOLGYM)
    first, second = cls(), cls()
    row = {"prompt": [{"role": "user", "content": ""}], "task": task(TOOLGYM, seed=7)}
    assert first.reset(**row) == second.reset(**row)
    assert play(first, "Observe") == play(second, "Observe")
    assert first.episode is not None
    assert first.episode.group_id == "g7"


def test_reset_refuses_a_row_without_a_task_or_with_another_envs_task() -> None:
    environment = environment_class(GUESS)()
    with pytest.raises(ValueError, match="no 'task' column"):
        environment.reset(prompt=[{"role": "user", "content": ""}])
    with pytest.raises(ValueError, match="toolgym:ClosestToK-v0-easy"):
        environment.reset(task=task(TOOLGYM))


def test_the_reward_is_the_episodes_return_and_a_finished_episode_takes_no_call() -> None:
    environment = environment_class(GUESS)()
    reference = xpgym.make(GUESS)
    reference.reset(seed=3)
    environment.reset(task=task(GUESS, seed=3))
    expected = 0.0
    for guess in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10):
        if environment.done:
            break
        action = f"\\boxed{{{guess}}}"
        reply = play(environment, ACTION_TOOL, action=action)
        observation, reward, *_ = reference.step(action)
        assert reply == observation
        expected += reward
    assert environment.done
    assert environment.get_reward() == pytest.approx(expected)
    with pytest.raises(RuntimeError, match="the episode has ended"):
        play(environment, ACTION_TOOL, action="\\boxed{1}")


def test_an_invalid_call_is_the_envs_error_observation_not_an_exception() -> None:
    environment = environment_class(TOOLGYM)()
    environment.reset(task=task(TOOLGYM))
    reply = play(environment, "LookUp", index=10**6)
    assert "out of range" in reply
    assert environment.episode is not None
    assert environment.episode.turns[-1].info["invalid_action"] is False
    assert not environment.done
    assert environment.get_reward() == 0.0


def test_an_env_that_fails_ends_the_episode_as_an_infra_error_without_reward() -> None:
    environment = environment_class(TOY)()
    environment.reset(task=task(TOY))
    with pytest.raises(RuntimeError, match=r"the environment failed: .*toy failure"):
        play(environment, ACTION_TOOL, action="raise")
    assert environment.done
    assert environment.episode is not None
    assert environment.episode.outcome == "infra_error"
    assert environment.get_reward() is None


def test_max_turns_truncates_the_episode() -> None:
    environment = environment_class(TOY, max_turns=2)()
    environment.reset(task=task(TOY))
    play(environment, ACTION_TOOL, action="x")
    assert not environment.done
    play(environment, ACTION_TOOL, action="y")
    assert environment.done
    assert environment.episode is not None
    assert environment.episode.turns[-1].info["truncated_reason"] == "max_turns"


def test_reward_and_tools_before_reset_are_refused() -> None:
    with pytest.raises(TypeError, match="base class"):
        TRLEnvironment()
    environment = environment_class(TOY)()
    with pytest.raises(RuntimeError, match="before reset"):
        environment.get_reward()
    with pytest.raises(RuntimeError, match="before reset"):
        play(environment, ACTION_TOOL, action="x")


def test_a_tool_named_like_a_method_trl_reserves_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry, "registry", dict(registry.registry))  # no id left behind
    clash = "test:TRLEnvClash-v0"
    xpgym.register(clash, entry_point=lambda: ToolEnvWrapper(ToyEnv(), [reset_tool]))
    with pytest.raises(ValueError, match="tool named 'reset'"):
        environment_class(clash)


def test_the_chat_dataset_has_a_chat_prompt_and_the_task_for_reset() -> None:
    tasks = make_tasks(GUESS, 2, seed=1)
    rows = task_dataset(tasks, chat=True, system_prompt="Be brief.")
    assert rows["prompt"][0] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": ""},
    ]
    assert [EpisodeTask.from_json(t) for t in rows["task"]] == tasks
    assert task_dataset(tasks)["prompt"] == [t.to_json() for t in tasks]
    with pytest.raises(ValueError, match="chat=True"):
        task_dataset(tasks, system_prompt="Be brief.")


def test_the_tiny_tool_chat_passes_trls_checks_and_its_calls_parse_back() -> None:
    methods = tools_of(environment_class(GUESS))
    call = '<tool_call>{"name": "act", "arguments": {"action": "\\\\boxed{7}"}}</tool_call>'
    tokenizer = build_tiny_tokenizer([call, "Guess"], tool_calls=True)
    assert supports_tool_calling(tokenizer)
    assert is_chat_template_prefix_preserving(tokenizer)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Guess"}],
        tools=list(methods.values()),
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
    )
    ids = tokenizer.encode(call + tokenizer.eos_token, add_special_tokens=False)
    parsed = parse_response(tokenizer, ids, prefix=prompt, tools=list(methods.values()))
    assert parsed["tool_calls"] == [
        {"type": "function", "function": {"name": "act", "arguments": {"action": "\\boxed{7}"}}}
    ]
    plain = tokenizer.encode("no call" + tokenizer.eos_token, add_special_tokens=False)
    assert "tool_calls" not in parse_response(tokenizer, plain, prefix=prompt)


def test_the_interop_example_plays_a_rollout_as_trl_does() -> None:
    """docs/interop.md, "What TRL does with the class, per rollout", line for line."""
    Environment = environment_class("toolgym:ClosestToK-v0-easy")  # noqa: N806 - as the doc
    environment = Environment()
    row = task_dataset(make_tasks("toolgym:ClosestToK-v0-easy", 1, seed=0), chat=True)[0]
    first_observation = environment.reset(**row)
    sizes = asyncio.run(environment.Observe())  # type: ignore[attr-defined]
    asyncio.run(environment.Done(answer=7))  # type: ignore[attr-defined]
    reward = environment.get_reward()

    assert "Find the element closest to the number K" in first_observation
    assert "length" in json.loads(sizes)
    assert environment.done
    assert reward in (0.0, 1.0)
    assert environment.episode is not None
    assert reward == environment.episode.turns[-1].reward
