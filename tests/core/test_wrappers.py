"""Specification of the observation, limit and statistics wrappers."""

from __future__ import annotations

import pickle
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from toy_envs import ToyEnv

from xpgym.core.env import Env, EpisodeFinishedError, ResetNeededError, Wrapper
from xpgym.core.wrappers import (
    ChatMessages,
    ChatTemplate,
    EpisodeStatistics,
    HorizonSchedule,
    LastObservation,
    LinearTurnSchedule,
    MaxTurns,
    ObservationActionHistory,
    ObservationHistory,
    PiecewiseTurnSchedule,
    count_tool_calls,
)


class ScriptedEnv(Env[str]):
    """Observation ``"o<turn>"``, reward 1.0 a step; step ``i``'s info is ``infos[i - 1]``.

    The info dicts are returned as they are (not copied), so a test can check that wrappers
    leave them alone. Action ``"end"`` terminates; ``"cut"`` truncates with reason ``"env"``.
    """

    def __init__(
        self, infos: Sequence[dict[str, Any]] = (), reset_info: dict[str, Any] | None = None
    ) -> None:
        self.infos = list(infos)
        self.reset_info = reset_info if reset_info is not None else {}
        self.turn = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.turn = 0
        return "o0", self.reset_info

    def step(self, action: str):
        self.turn += 1
        info = self.infos[self.turn - 1] if self.turn <= len(self.infos) else {}
        truncated = action == "cut"
        if truncated:
            info = {**info, "truncated_reason": "env"}
        return f"o{self.turn}", 1.0, action == "end", truncated, info

    def sample_random_action(self) -> str:
        return "a"

    def get_state(self) -> dict[str, Any]:
        return {"turn": self.turn}

    def set_state(self, state: dict[str, Any]) -> None:
        self.turn = state["turn"]


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class RecordingTokenizer:
    """Stands in for a tokenizer where only the call itself matters."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[dict[str, str]], dict[str, Any]]] = []

    def apply_chat_template(self, conversation, **kwargs):
        self.calls.append((conversation, kwargs))
        return "rendered"


class JoiningTokenizer:
    """Renders ``role:content`` pairs joined by ``|``: a deterministic template without jinja2."""

    def apply_chat_template(self, conversation, *, tokenize, add_generation_prompt, **kwargs):
        text = "|".join(f"{m['role']}:{m['content']}" for m in conversation)
        return text + ("|assistant:" if add_generation_prompt else "")


def make_real_tokenizer():
    """A real transformers tokenizer built offline, with a tiny Jinja chat template."""
    transformers = pytest.importorskip(
        "transformers", reason="ChatTemplate is tested against a real transformers tokenizer"
    )
    tokenizers = pytest.importorskip("tokenizers", reason="needed to build a tokenizer offline")
    pytest.importorskip("jinja2", reason="transformers renders chat templates with jinja2")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    backend = tokenizers.Tokenizer(WordLevel({"[UNK]": 0, "o0": 1, "o1": 2}, unk_token="[UNK]"))
    backend.pre_tokenizer = Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    tokenizer.chat_template = (
        "{% if greeting %}{{ greeting }}|{% endif %}"
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</{{ m['role'] }}>{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    return tokenizer


HISTORY_WRAPPERS: dict[str, Callable[[Env], Wrapper]] = {
    "LastObservation": LastObservation,
    "ObservationHistory": ObservationHistory,
    "ObservationActionHistory": ObservationActionHistory,
    "ChatMessages": lambda env: ChatMessages(env, system_prompt="sys"),
    "ChatTemplate": lambda env: ChatTemplate(env, JoiningTokenizer(), system_prompt="sys"),
}


# --- LastObservation -----------------------------------------------------------------------


def test_last_observation_is_the_envs_last_observation():
    env = LastObservation(ScriptedEnv())
    assert env.reset(seed=0)[0] == "o0"
    assert env.step("a")[0] == "o1"
    assert env.step("b")[0] == "o2"


def test_last_observation_adds_info_prefix_and_suffix_for_that_turn_only():
    env = LastObservation(ScriptedEnv(infos=[{"prefix": "P:", "suffix": ":S"}, {}]))
    env.reset(seed=0)
    assert env.step("a")[0] == "P:o1:S"
    assert env.step("b")[0] == "o2"


# --- ObservationHistory --------------------------------------------------------------------


def test_observation_history_joins_all_observations_with_newlines_oldest_first():
    env = ObservationHistory(ScriptedEnv())
    assert env.reset(seed=0)[0] == "o0"
    env.step("a")
    assert env.step("b")[0] == "o0\no1\no2"


def test_observation_history_uses_the_given_separator():
    env = ObservationHistory(ScriptedEnv(), separator="\n---\n")
    env.reset(seed=0)
    assert env.step("a")[0] == "o0\n---\no1"


def test_observation_history_drops_oldest_beyond_max_history():
    env = ObservationHistory(ScriptedEnv(), max_history=2)
    env.reset(seed=0)
    env.step("a")
    assert env.step("b")[0] == "o1\no2"


def test_observation_history_reset_clears_history():
    env = ObservationHistory(ScriptedEnv())
    env.reset(seed=0)
    env.step("a")
    assert env.reset(seed=0)[0] == "o0"
    assert env.step("a")[0] == "o0\no1"


def test_observation_history_puts_prefix_before_and_suffix_after_the_whole_history():
    env = ObservationHistory(
        ScriptedEnv(infos=[{}, {"prefix": "P\n", "suffix": "\nS"}], reset_info={"suffix": "!"})
    )
    assert env.reset(seed=0)[0] == "o0!"
    env.step("a")
    assert env.step("b")[0] == "P\no0\no1\no2\nS"


# --- ObservationActionHistory --------------------------------------------------------------


def test_observation_action_history_interleaves_observations_and_actions():
    env = ObservationActionHistory(ScriptedEnv())
    assert env.reset(seed=0)[0] == "o0"
    env.step("a")
    assert env.step("b")[0] == "o0\na\no1\nb\no2"


def test_observation_action_history_records_parsed_action_instead_of_raw_action():
    env = ObservationActionHistory(ScriptedEnv(infos=[{"parsed_action": "<python>1</python>"}]))
    env.reset(seed=0)
    obs = env.step("<python>1</python> and text after the call")[0]
    assert obs == "o0\n<python>1</python>\no1"


def test_observation_action_history_records_raw_action_when_parsed_action_is_not_text():
    env = ObservationActionHistory(ScriptedEnv(infos=[{"parsed_action": None}]))
    env.reset(seed=0)
    assert env.step("raw")[0] == "o0\nraw\no1"


def test_observation_action_history_drops_an_old_observation_with_its_action():
    env = ObservationActionHistory(ScriptedEnv(), max_history=2)
    env.reset(seed=0)
    env.step("a")
    assert env.step("b")[0] == "o1\nb\no2"


# --- ChatMessages --------------------------------------------------------------------------


def test_chat_messages_are_system_then_user_and_assistant_turns():
    env = ChatMessages(ScriptedEnv(), system_prompt="be brief")
    assert env.reset(seed=0)[0] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "o0"},
    ]
    assert env.step("a")[0] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "o0"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "o1"},
    ]


def test_chat_messages_without_system_prompt_start_with_the_first_observation():
    env = ChatMessages(ScriptedEnv())
    assert env.reset(seed=0)[0] == [{"role": "user", "content": "o0"}]


@pytest.mark.parametrize(
    ("tool_calls", "role"),
    [(1, "tool"), ([{"name": "python"}], "tool"), (True, "tool"), (0, "user"), ([], "user")],
)
def test_chat_messages_observation_of_a_tool_turn_has_tool_role(tool_calls, role):
    infos = [{"tool_calls": tool_calls, "parsed_action": "<python>1</python>"}]
    env = ChatMessages(ScriptedEnv(infos=infos))
    env.reset(seed=0)
    messages = env.step("<python>1</python> trailing")[0]
    assert messages[-2:] == [
        {"role": "assistant", "content": "<python>1</python>"},
        {"role": role, "content": "o1"},
    ]


def test_chat_messages_max_history_keeps_the_system_prompt():
    env = ChatMessages(ScriptedEnv(), system_prompt="sys", max_history=1)
    env.reset(seed=0)
    env.step("a")
    assert env.step("b")[0] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "o2"},
    ]


def test_chat_messages_prefix_goes_on_first_env_message_and_suffix_on_last():
    env = ChatMessages(ScriptedEnv(infos=[{"prefix": "P:", "suffix": ":S"}]), system_prompt="s")
    env.reset(seed=0)
    assert env.step("a")[0] == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "P:o0"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "o1:S"},
    ]
    assert env.step("b")[0][1] == {"role": "user", "content": "o0"}


def test_chat_messages_returns_fresh_messages_each_turn():
    env = ChatMessages(ScriptedEnv())
    messages = env.reset(seed=0)[0]
    messages[0]["content"] = "edited"
    messages.append({"role": "user", "content": "extra"})
    assert env.step("a")[0] == [
        {"role": "user", "content": "o0"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "o1"},
    ]


# --- ChatTemplate --------------------------------------------------------------------------


def test_chat_template_renders_messages_with_a_real_tokenizer():
    env = ChatTemplate(ScriptedEnv(), make_real_tokenizer(), system_prompt="sys")
    assert env.reset(seed=0)[0] == "<system>sys</system><user>o0</user><assistant>"
    assert env.step("a")[0] == (
        "<system>sys</system><user>o0</user><assistant>a</assistant><user>o1</user><assistant>"
    )


def test_chat_template_without_generation_prompt_ends_with_the_observation():
    env = ChatTemplate(ScriptedEnv(), make_real_tokenizer(), add_generation_prompt=False)
    assert env.reset(seed=0)[0] == "<user>o0</user>"


def test_chat_template_passes_chat_template_kwargs_to_the_template():
    env = ChatTemplate(
        ScriptedEnv(), make_real_tokenizer(), chat_template_kwargs={"greeting": "hi"}
    )
    assert env.reset(seed=0)[0] == "hi|<user>o0</user><assistant>"


def test_chat_template_uses_the_same_messages_as_chat_messages():
    infos = [{"tool_calls": 1, "parsed_action": "call", "suffix": "!"}]
    tokenizer = RecordingTokenizer()
    template = ChatTemplate(ScriptedEnv(infos=infos), tokenizer, system_prompt="sys")
    messages = ChatMessages(ScriptedEnv(infos=infos), system_prompt="sys")
    template.reset(seed=0)
    messages.reset(seed=0)
    template.step("call then text")
    expected = messages.step("call then text")[0]
    assert tokenizer.calls[-1] == (expected, {"tokenize": False, "add_generation_prompt": True})


def test_chat_template_rejects_an_object_without_apply_chat_template():
    with pytest.raises(TypeError, match="apply_chat_template"):
        ChatTemplate(ScriptedEnv(), tokenizer=object())


def test_observation_module_does_not_import_transformers():
    code = (
        "import sys, xpgym.core.wrappers.observation; "
        "sys.exit(1 if 'transformers' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# --- Shared history behaviour --------------------------------------------------------------


@pytest.mark.parametrize("max_history", [0, -1, 1.5, True, "2"])
@pytest.mark.parametrize("wrapper", [ObservationHistory, ObservationActionHistory, ChatMessages])
def test_max_history_must_be_a_positive_int(wrapper, max_history):
    with pytest.raises(ValueError, match=f"max_history must be a positive int.*{max_history!r}"):
        wrapper(ScriptedEnv(), max_history=max_history)


def test_text_history_wrappers_reject_non_text_observations():
    env = ObservationHistory(ChatMessages(ScriptedEnv()))
    with pytest.raises(TypeError, match="needs str observations"):
        env.reset(seed=0)


@pytest.mark.parametrize("name", list(HISTORY_WRAPPERS))
def test_history_wrapper_set_state_replays_identical_observations(name):
    env = HISTORY_WRAPPERS[name](ToyEnv(episode_length=10))
    env.reset(seed=3)
    env.step("x")
    state = env.get_state()
    first = [env.step("y")[0], env.step("z")[0]]
    env.set_state(state)
    assert [env.step("y")[0], env.step("z")[0]] == first


@pytest.mark.parametrize("name", list(HISTORY_WRAPPERS))
def test_history_wrapper_state_is_an_independent_copy(name):
    env = HISTORY_WRAPPERS[name](ToyEnv(episode_length=10))
    env.reset(seed=3)
    env.step("x")
    state = env.get_state()
    before = pickle.dumps(state)
    env.step("y")
    assert pickle.dumps(state) == before
    env.set_state(state)
    env.step("y")
    assert pickle.dumps(state) == before


@pytest.mark.parametrize("name", list(HISTORY_WRAPPERS))
def test_history_wrapper_reset_clears_history(name):
    env = HISTORY_WRAPPERS[name](ToyEnv(episode_length=10))
    first = env.reset(seed=3)[0]
    env.step("x")
    assert env.reset(seed=3)[0] == first


# --- MaxTurns ------------------------------------------------------------------------------


def test_max_turns_truncates_on_the_max_turns_th_step():
    env = MaxTurns(ScriptedEnv(), max_turns=2)
    env.reset(seed=0)
    assert env.step("a")[2:4] == (False, False)
    _, _, terminated, truncated, info = env.step("b")
    assert (terminated, truncated) == (False, True)
    assert info["truncated_reason"] == "max_turns"


def test_max_turns_adds_no_truncated_reason_before_the_limit():
    env = MaxTurns(ScriptedEnv(), max_turns=2)
    env.reset(seed=0)
    assert "truncated_reason" not in env.step("a")[4]


def test_max_turns_does_not_override_a_termination_on_the_same_step():
    env = MaxTurns(ScriptedEnv(), max_turns=1)
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step("end")
    assert (terminated, truncated) == (True, False)
    assert "truncated_reason" not in info


def test_max_turns_keeps_the_envs_own_truncation_reason():
    env = MaxTurns(ScriptedEnv(), max_turns=1)
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step("cut")
    assert (terminated, truncated, info["truncated_reason"]) == (False, True, "env")


def test_max_turns_returns_a_new_info_and_leaves_the_envs_alone():
    inner_info = {"correct": False}
    env = MaxTurns(ScriptedEnv(infos=[inner_info]), max_turns=1)
    env.reset(seed=0)
    info = env.step("a")[4]
    assert info == {"correct": False, "truncated_reason": "max_turns"}
    assert inner_info == {"correct": False}


def test_max_turns_step_after_truncation_raises_until_reset():
    env = MaxTurns(ScriptedEnv(), max_turns=1)
    env.reset(seed=0)
    env.step("a")
    with pytest.raises(EpisodeFinishedError):
        env.step("b")
    env.reset(seed=0)
    assert env.step("b")[3] is True


def test_max_turns_counter_restarts_on_reset():
    env = MaxTurns(ScriptedEnv(), max_turns=2)
    env.reset(seed=0)
    env.step("a")
    env.reset(seed=0)
    assert env.elapsed_turns == 0
    assert env.step("a")[3] is False


@pytest.mark.parametrize("max_turns", [0, -3, 2.0, True, "3", None])
def test_max_turns_must_be_a_positive_int(max_turns):
    with pytest.raises(ValueError, match=f"max_turns must be a positive int, got {max_turns!r}"):
        MaxTurns(ScriptedEnv(), max_turns=max_turns)


def test_max_turns_turn_counter_is_wrapper_state():
    env = MaxTurns(ScriptedEnv(), max_turns=3)
    env.reset(seed=0)
    env.step("a")
    state = env.get_state()
    assert state["wrapper"] == {"turns": 1}
    env.step("b")
    env.set_state(state)
    assert env.step("b")[3] is False
    assert env.step("c")[3] is True


# --- Turn schedules ------------------------------------------------------------------------


def test_piecewise_schedule_switches_cap_at_each_boundary():
    schedule = PiecewiseTurnSchedule(caps=[5, 10, 20], boundaries=[100, 200])
    assert [schedule(s) for s in (0, 99, 100, 199, 200, 10_000)] == [5, 5, 10, 10, 20, 20]


def test_piecewise_schedule_with_one_cap_is_constant():
    assert PiecewiseTurnSchedule(caps=[7])(123) == 7


@pytest.mark.parametrize(
    ("caps", "boundaries", "message"),
    [
        ([5, 10], [], "one boundary fewer than caps"),
        ([5, 10], [1, 2], "one boundary fewer than caps"),
        ([], [], "one boundary fewer than caps"),
        ([5, 10, 20], [200, 100], "strictly increasing"),
        ([5, 0], [10], "each cap must be a positive int, got 0"),
        ([5, 10], [-1], "each boundary must be a positive int, got -1"),
    ],
)
def test_piecewise_schedule_rejects_inconsistent_arguments(caps, boundaries, message):
    with pytest.raises(ValueError, match=message):
        PiecewiseTurnSchedule(caps=caps, boundaries=boundaries)


def test_linear_schedule_adds_increment_every_k_steps():
    schedule = LinearTurnSchedule(start=5, increment=2, every=10)
    assert [schedule(s) for s in (0, 9, 10, 25, 100)] == [5, 5, 7, 9, 25]


def test_linear_schedule_stops_at_maximum():
    schedule = LinearTurnSchedule(start=5, increment=5, every=10, maximum=12)
    assert [schedule(s) for s in (0, 10, 20, 1000)] == [5, 10, 12, 12]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"start": 0, "increment": 1, "every": 1}, "start must be a positive int, got 0"),
        ({"start": 1, "increment": -1, "every": 1}, "increment must be a non-negative int"),
        ({"start": 1, "increment": 1, "every": 0}, "every must be a positive int, got 0"),
        ({"start": 5, "increment": 1, "every": 1, "maximum": 4}, r"maximum \(4\) must be >="),
    ],
)
def test_linear_schedule_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LinearTurnSchedule(**kwargs)


# --- HorizonSchedule -----------------------------------------------------------------------


def steps_until_truncated(env: Env, limit: int = 100) -> int:
    """Reset `env`, step it until it ends, and return how many steps that took."""
    env.reset(seed=0)
    for turn in range(1, limit + 1):
        _, _, terminated, truncated, _ = env.step("a")
        if terminated or truncated:
            return turn
    raise AssertionError(f"no end within {limit} steps")


def test_horizon_schedule_truncates_at_the_cap_with_horizon_reason():
    env = HorizonSchedule(ScriptedEnv(), PiecewiseTurnSchedule(caps=[2]))
    env.reset(seed=0)
    env.step("a")
    _, _, terminated, truncated, info = env.step("b")
    assert (terminated, truncated, info["truncated_reason"]) == (False, True, "horizon")


def test_horizon_schedule_follows_the_training_step():
    env = HorizonSchedule(ScriptedEnv(), PiecewiseTurnSchedule([2, 4, 6], boundaries=[10, 20]))
    lengths = []
    for step in (0, 10, 25):
        env.set_training_step(step)
        lengths.append(steps_until_truncated(env))
    assert lengths == [2, 4, 6]


def test_horizon_schedule_new_cap_takes_effect_at_next_reset_not_mid_episode():
    env = HorizonSchedule(ScriptedEnv(), PiecewiseTurnSchedule([2, 5], boundaries=[10]))
    env.reset(seed=0)
    env.step("a")
    env.set_training_step(10)
    assert env.current_max_turns == 2
    assert env.next_max_turns == 5
    assert env.step("b")[3] is True
    env.reset(seed=0)
    assert env.current_max_turns == 5


def test_horizon_schedule_set_training_step_reaches_it_through_outer_wrappers():
    horizon = HorizonSchedule(ScriptedEnv(), LinearTurnSchedule(start=1, increment=1, every=1))
    env = EpisodeStatistics(ObservationHistory(horizon))
    env.set_training_step(3)  # what a vector env's call("set_training_step", 3) does
    assert horizon.training_step == 3
    assert steps_until_truncated(env) == 4
    assert env.current_max_turns == 4


def test_horizon_schedule_accepts_any_callable_schedule():
    env = HorizonSchedule(ScriptedEnv(), lambda step: 1 + step // 100)
    env.set_training_step(250)
    assert steps_until_truncated(env) == 3


@pytest.mark.parametrize("bad_cap", [0, -1, 2.5, None])
def test_horizon_schedule_rejects_a_schedule_that_gives_no_positive_int(bad_cap):
    with pytest.raises(ValueError, match="must return a positive int"):
        HorizonSchedule(ScriptedEnv(), lambda step: bad_cap)


def test_horizon_schedule_checks_the_cap_when_the_training_step_is_set():
    env = HorizonSchedule(ScriptedEnv(), lambda step: 3 - step)
    with pytest.raises(ValueError, match="at training step 3"):
        env.set_training_step(3)
    assert env.training_step == 0


@pytest.mark.parametrize("step", [-1, 1.5, "3"])
def test_horizon_schedule_rejects_a_bad_training_step(step):
    env = HorizonSchedule(ScriptedEnv(), PiecewiseTurnSchedule(caps=[2]))
    with pytest.raises(ValueError, match="training step must be a non-negative int"):
        env.set_training_step(step)


def test_horizon_schedule_rejects_a_non_callable_schedule():
    with pytest.raises(TypeError, match="schedule must map a training step"):
        HorizonSchedule(ScriptedEnv(), [5, 10])


def test_horizon_schedule_wrapper_state_holds_step_cap_and_turns():
    env = HorizonSchedule(ScriptedEnv(), PiecewiseTurnSchedule([2, 5], boundaries=[10]))
    env.set_training_step(10)
    env.reset(seed=0)
    env.step("a")
    state = env.get_state()
    assert state["wrapper"] == {"training_step": 10, "max_turns": 5, "turns": 1}
    env.set_training_step(0)
    steps_until_truncated(env)
    env.set_state(state)
    assert (env.training_step, env.current_max_turns, env.elapsed_turns) == (10, 5, 1)
    assert [env.step("a")[3] for _ in range(4)] == [False, False, False, True]


# --- EpisodeStatistics ---------------------------------------------------------------------


def test_episode_statistics_reports_the_episode_on_its_last_step():
    clock = FakeClock()
    env = EpisodeStatistics(ScriptedEnv(), clock=clock)
    env.reset(seed=0)
    clock.now += 1.5
    env.step("a")
    clock.now += 1.0
    info = env.step("end")[4]
    assert info["episode"] == {
        "return": 2.0,
        "length": 2,
        "tool_calls": 0,
        "invalid_actions": 0,
        "invalid_action_rate": 0.0,
        "time": 2.5,
    }
    assert isinstance(info["episode"]["return"], float)


def test_episode_statistics_adds_nothing_before_the_episode_ends():
    env = EpisodeStatistics(ScriptedEnv())
    env.reset(seed=0)
    assert "episode" not in env.step("a")[4]


def test_episode_statistics_reports_on_truncation_by_a_limit_inside_it():
    env = EpisodeStatistics(MaxTurns(ScriptedEnv(), max_turns=3))
    env.reset(seed=0)
    infos = [env.step("a")[4] for _ in range(3)]
    assert infos[-1]["episode"]["length"] == 3
    assert infos[-1]["truncated_reason"] == "max_turns"


def test_episode_statistics_sums_tool_calls_given_as_counts_or_lists():
    infos = [{"tool_calls": 2}, {"tool_calls": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}, {}]
    env = EpisodeStatistics(ScriptedEnv(infos=infos))
    env.reset(seed=0)
    env.step("a")
    env.step("b")
    assert env.step("end")[4]["episode"]["tool_calls"] == 5


@pytest.mark.parametrize(
    ("value", "count"),
    [(None, 0), (0, 0), (3, 3), (True, 1), (False, 0), ([], 0), (["a", "b"], 2), (("a",), 1)],
)
def test_count_tool_calls_reads_counts_lists_and_flags(value, count):
    assert count_tool_calls(value) == count


def test_episode_statistics_counts_steps_with_truthy_invalid_action():
    infos = [{"invalid_action": True}, {"invalid_action": False}, {}, {"invalid_action": 1}]
    env = EpisodeStatistics(ScriptedEnv(infos=infos))
    env.reset(seed=0)
    for action in ("a", "b", "c"):
        env.step(action)
    episode = env.step("end")[4]["episode"]
    assert (episode["invalid_actions"], episode["invalid_action_rate"]) == (2, 0.5)


def test_episode_statistics_time_is_measured_on_the_real_monotonic_clock():
    env = EpisodeStatistics(ToyEnv(episode_length=1))
    before = time.monotonic()
    env.reset(seed=0)
    elapsed = env.step("sleep:0.05")[4]["episode"]["time"]
    around = time.monotonic() - before  # the test's own reading brackets the episode's
    assert 0.05 <= elapsed <= around


def test_episode_statistics_returns_a_new_info_and_leaves_the_envs_alone():
    inner_info = {"correct": True}
    env = EpisodeStatistics(ScriptedEnv(infos=[inner_info]))
    env.reset(seed=0)
    info = env.step("end")[4]
    assert "episode" in info
    assert inner_info == {"correct": True}


def test_episode_statistics_reset_starts_a_new_count():
    clock = FakeClock()
    env = EpisodeStatistics(ScriptedEnv(infos=[{"tool_calls": 1}]), clock=clock)
    env.reset(seed=0)
    env.step("a")
    clock.now += 10.0
    env.reset(seed=0)
    episode = env.step("end")[4]["episode"]
    assert episode == {
        "return": 1.0,
        "length": 1,
        "tool_calls": 1,
        "invalid_actions": 0,
        "invalid_action_rate": 0.0,
        "time": 0.0,
    }


def test_episode_statistics_state_round_trips_sums_and_elapsed_time():
    clock = FakeClock()
    env = EpisodeStatistics(ScriptedEnv(infos=[{"tool_calls": 1}]), clock=clock)
    env.reset(seed=0)
    clock.now += 2.0
    env.step("a")
    state = env.get_state()
    first = env.step("end")[4]["episode"]
    clock.now += 50.0  # time spent elsewhere before restoring must not count
    env.set_state(state)
    assert env.step("end")[4]["episode"] == first


# --- Stacks --------------------------------------------------------------------------------


def make_stack() -> Env:
    return EpisodeStatistics(MaxTurns(ObservationHistory(ToyEnv(episode_length=10)), 3))


def test_wrappers_stack():
    env = make_stack()
    start = env.reset(seed=1)[0]
    assert start.startswith("start parity=")
    env.step("x")
    obs, _, terminated, truncated, info = env.step("y")
    assert obs == f"{start}\nturn=1 last=x\nturn=2 last=y"
    assert (terminated, truncated) == (False, False)
    obs, _, terminated, truncated, info = env.step("z")
    assert obs.endswith("turn=3 last=z")
    assert (terminated, truncated, info["truncated_reason"]) == (False, True, "max_turns")
    assert info["episode"]["length"] == 3
    assert info["episode"]["return"] == pytest.approx(-0.3)


def test_stack_get_state_round_trips_every_layer():
    env = make_stack()
    env.reset(seed=1)
    env.step("x")
    state = env.get_state()
    first = [env.step("y"), env.step("z")]
    env.set_state(state)
    again = [env.step("y"), env.step("z")]
    assert [r[:4] for r in again] == [r[:4] for r in first]
    assert again[-1][4]["episode"]["length"] == first[-1][4]["episode"]["length"] == 3


def test_stack_state_restores_into_a_fresh_stack():
    env = make_stack()
    env.reset(seed=1)
    env.step("x")
    state = pickle.loads(pickle.dumps(env.get_state()))
    expected = env.step("y")[0]
    fresh = make_stack()
    fresh.set_state(state)
    assert fresh.step("y")[0] == expected


def test_stack_pickles_mid_episode_and_continues_identically():
    env = make_stack()
    env.reset(seed=1)
    env.step("x")
    clone = pickle.loads(pickle.dumps(env))
    assert clone.step("y")[:4] == env.step("y")[:4]


def test_stack_delegates_attributes_to_the_inner_env_at_call_time():
    env = make_stack()
    env.reset(seed=1)
    env.step("x")
    assert env.turn == 1
    assert env.max_turns == 3
    assert env.unwrapped.turn == 1


def test_stack_enforces_the_env_lifecycle():
    env = make_stack()
    with pytest.raises(ResetNeededError):
        env.step("x")
    env.reset(seed=0)
    with pytest.raises(TypeError, match="takes the model's text as a str"):
        env.step(3)  # type: ignore[arg-type]


def test_the_reset_check_forwards_seed_options_and_any_extra_argument():
    class Recording(ScriptedEnv):
        def reset(self, *args: Any, seed: int | None = None, options: Any = None, **extra: Any):
            self.got = (args, seed, options, extra)
            return super().reset(seed=seed, options=options)

    env = Recording()
    env.reset()
    assert env.got == ((), None, None, {})
    env.reset(seed=3, options={"k": 1})
    assert env.got == ((), 3, {"k": 1}, {})
    env.reset("positional", seed=4, level=2)
    assert env.got == (("positional",), 4, None, {"level": 2})
    env.step("x")  # the check marked each reset's episode as running


def test_available_actions_defaults_to_none_and_wrappers_forward_it():
    class Listing(ScriptedEnv):
        def available_actions(self) -> list[str]:
            return ["a", "end"]

    assert ScriptedEnv().available_actions() is None
    assert EpisodeStatistics(MaxTurns(Listing(), max_turns=3)).available_actions() == ["a", "end"]
