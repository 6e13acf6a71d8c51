"""xpgym.compat.gymnasium: every offline xpgym id passes Gymnasium's own `check_env` through
the bridge, runs in Gymnasium's vector envs, and a text Gymnasium env passes xpgym's checker
through `from_gymnasium`."""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any, ClassVar

import numpy as np
import pytest

import xpgym
from xpgym.core.checks import check_env as xpgym_check_env
from xpgym.core.env import EpisodeFinishedError
from xpgym.core.multiagent import MultiAgentEnv
from xpgym.core.registry import load_entry_point

gymnasium = pytest.importorskip("gymnasium", reason="the bridge needs gymnasium (xpgym[compat])")
from gymnasium.utils.env_checker import check_env as gymnasium_check_env  # noqa: E402

from xpgym.compat.common import TEXT_CHARSET  # noqa: E402
from xpgym.compat.gymnasium import (  # noqa: E402
    XpgymToGymnasium,
    from_gymnasium,
    gymnasium_id,
    register_gymnasium_envs,
)

# A text env has no frame rate; Gymnasium's render check warns about that for every env.
RENDER_FPS_WARNING = "No render fps was declared"


def _is_multiagent(env_id: str) -> bool:
    factory = load_entry_point(xpgym.spec(env_id).entry_point)
    return isinstance(factory, type) and issubclass(factory, MultiAgentEnv)


def _single_agent_ids() -> list[Any]:
    """Every single-agent id (families included), those that need the network skipped."""
    params: list[Any] = []
    for env_id in xpgym.list_envs(include_families=True):
        if _is_multiagent(env_id):
            continue
        if xpgym.spec(env_id).requires_download:
            reason = f"{env_id} downloads its dataset (needs the network)"
            params.append(pytest.param(env_id, marks=pytest.mark.skip(reason=reason)))
        else:
            params.append(env_id)
    if importlib.util.find_spec("reasoning_gym") is None:
        reason = "the rg: family needs reasoning_gym (pip install 'xpgym[envs]')"
        params.append(pytest.param("rg:*", marks=pytest.mark.skip(reason=reason)))
    return params


SINGLE_AGENT_IDS = _single_agent_ids()


def _play(env: Any, seed: int, actions: list[str]) -> list[Any]:
    """Reset with `seed`, then step `actions` until the episode ends; the transcript."""
    transcript: list[Any] = [env.reset(seed=seed)[0]]
    for action in actions:
        observation, reward, terminated, truncated, _ = env.step(action)
        transcript.append((observation, float(reward), bool(terminated), bool(truncated)))
        if terminated or truncated:
            break
    return transcript


@pytest.mark.parametrize("env_id", SINGLE_AGENT_IDS)
def test_every_offline_env_passes_gymnasiums_check_env(env_id):
    env = gymnasium.make(gymnasium_id(env_id))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gymnasium_check_env(env.unwrapped)
    env.close()
    checker_warnings = [str(w.message) for w in caught if "WARN:" in str(w.message)]  # its logger
    other = [message for message in checker_warnings if RENDER_FPS_WARNING not in message]
    assert not other, f"gymnasium's check_env warned: {other}"


@pytest.mark.parametrize("env_id", SINGLE_AGENT_IDS)
def test_every_offline_env_keeps_its_text_inside_the_spaces(env_id):
    env = gymnasium.make(gymnasium_id(env_id)).unwrapped
    env.action_space.seed(0)
    for seed in range(3):
        observation, _ = env.reset(seed=seed)
        assert observation in env.observation_space, f"reset(seed={seed})"
        for _ in range(4):
            action = env.action_space.sample()
            observation, _, terminated, truncated, _ = env.step(action)
            assert observation in env.observation_space, f"step({action!r:.60})"
            if terminated or truncated:
                break
    env.close()


def test_the_charset_has_ascii_math_symbols_emoji_and_no_control_characters():
    charset = set(TEXT_CHARSET)
    assert set("\n\t abcXYZ019{}\\$") <= charset
    assert set("π×≤√∞αβ→🙂é") <= charset
    assert not charset & {"\x00", "\x1b", "\ud800"}


def test_make_of_an_id_gives_the_xpgym_episode_of_the_same_seed():
    actions = ["50", "25", "75", "12", "90"]
    bridged = gymnasium.make(gymnasium_id("game:GuessTheNumber-v0"))
    native = xpgym.make("game:GuessTheNumber-v0")
    assert _play(bridged, 7, actions) == _play(native, 7, actions)
    assert bridged.unwrapped.np_random is bridged.unwrapped.xpgym_env.np_random


def test_gymnasium_ids_write_the_category_colon_as_a_dot():
    assert gymnasium_id("game:Wordle-v0-easy") == "xpgym/game.Wordle-v0-easy"
    assert gymnasium_id("game:Wordle-v0-easy") in gymnasium.registry


def test_make_with_the_module_prefix_imports_the_bridge_and_finds_the_id():
    env = gymnasium.make("xpgym.compat.gymnasium:xpgym/game.Wordle-v0")
    assert isinstance(env.unwrapped, XpgymToGymnasium)
    env.close()


def test_make_passes_keyword_arguments_on_to_xpgym_make():
    env = gymnasium.make(gymnasium_id("game:GuessTheNumber-v0"), max_turns=1)
    env.reset(seed=0)
    _, _, terminated, truncated, _ = env.step("no number here")
    assert truncated
    assert not terminated
    assert env.unwrapped.xpgym_env.spec.kwargs["max_turns"] == 1


@pytest.mark.filterwarnings(f"ignore:.*{RENDER_FPS_WARNING}")
def test_ansi_render_mode_renders_the_last_observation():
    env = gymnasium.make(gymnasium_id("game:GuessTheNumber-v0"), render_mode="ansi")
    observation, _ = env.reset(seed=0)
    assert env.render() == observation
    observation, *_ = env.step("3")
    assert env.render() == observation


def test_an_unknown_render_mode_is_refused():
    with pytest.raises(ValueError, match="render_mode must be None or 'ansi'"):
        XpgymToGymnasium("game:GuessTheNumber-v0", render_mode="human")


def test_a_multiagent_id_points_at_the_pettingzoo_bridge():
    with pytest.raises(TypeError, match=r"xpgym\.compat\.pettingzoo"):
        gymnasium.make(gymnasium_id("multiagent:TicTacToe-v0"))


def test_make_kwargs_with_an_env_instance_are_refused():
    with pytest.raises(TypeError, match="pass an env id"):
        XpgymToGymnasium(xpgym.make("game:GuessTheNumber-v0"), max_turns=3)


def test_ids_registered_later_are_added_by_calling_register_again():
    xpgym.register("test:CompatLate-v0", "xpgym.envs.games.guess_the_number:GuessTheNumberEnv")
    try:
        assert "xpgym/test.CompatLate-v0" in register_gymnasium_envs(include_families=False)
        assert "xpgym/test.CompatLate-v0" not in register_gymnasium_envs(include_families=False)
        gymnasium.make("xpgym/test.CompatLate-v0").close()
    finally:
        xpgym.core.registry.registry.pop("test:CompatLate-v0")
        gymnasium.registry.pop("xpgym/test.CompatLate-v0")


def test_stepping_after_the_end_raises_xpgyms_error():
    env = XpgymToGymnasium("math:Arithmetic-v0")
    env.reset(seed=0)
    env.step("1")
    with pytest.raises(EpisodeFinishedError):
        env.step("1")


# ----------------------------------------------------------------------- vector envs


def _make_vec(env_id: str, mode: str) -> Any:
    # Gymnasium 1.4's AsyncVectorEnv reads a Text space's shared memory once, at start
    # (issue #1164 for Dict spaces, same cause): text goes through its pipes instead.
    vector_kwargs = {"shared_memory": False} if mode == "async" else {}
    return gymnasium.make_vec(
        gymnasium_id(env_id), num_envs=2, vectorization_mode=mode, vector_kwargs=vector_kwargs
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_gymnasium_vector_envs_step_bridged_envs_like_the_xpgym_envs(mode):
    env_id = "game:GuessTheNumber-v0"
    vector = _make_vec(env_id, mode)
    try:
        observations, _ = vector.reset(seed=[3, 4])
        natives = [xpgym.make(env_id), xpgym.make(env_id)]
        assert list(observations) == [natives[0].reset(seed=3)[0], natives[1].reset(seed=4)[0]]
        for actions in (["50", "10"], ["25", "no guess"]):
            observations, rewards, terminated, truncated, _ = vector.step(np.array(actions))
            expected = [env.step(a) for env, a in zip(natives, actions, strict=True)]
            assert list(observations) == [e[0] for e in expected]
            assert list(rewards) == [e[1] for e in expected]
            assert list(terminated) == [e[2] for e in expected]
            assert list(truncated) == [e[3] for e in expected]
    finally:
        vector.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_gymnasium_vector_envs_autoreset_a_finished_bridged_env_on_the_next_step(mode):
    env_id = "math:Arithmetic-v0"  # one turn: every step ends the episode
    vector = _make_vec(env_id, mode)
    native = xpgym.make(env_id)
    try:
        vector.reset(seed=[5, 6])
        native.reset(seed=5)
        _, _, terminated, _, _ = vector.step(np.array(["1", "1"]))
        assert list(terminated) == [True, True]
        native.step("1")
        observations, rewards, terminated, _, _ = vector.step(np.array(["1", "1"]))
        # NEXT_STEP autoreset: this step was the reset (no seed: the env's stream goes on)
        assert observations[0] == native.reset()[0]
        assert list(rewards) == [0.0, 0.0]
        assert list(terminated) == [False, False]
    finally:
        vector.close()


# --------------------------------------------------------------- from_gymnasium


class ReverseWord(gymnasium.Env[str, str]):
    """A native text Gymnasium env: write the word backwards (one turn)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}
    WORDS = ("gym", "text", "agent", "reward")

    def __init__(self) -> None:
        self.observation_space = gymnasium.spaces.Text(64, min_length=0)
        self.action_space = gymnasium.spaces.Text(8, min_length=0, charset="gymtexaardw")
        self._word = ""

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._word = str(self.np_random.choice(self.WORDS))
        return f"reverse {self._word}", {}

    def step(self, action: str):
        correct = action == self._word[::-1]
        return "done", float(correct), True, False, {"correct": correct}


def test_a_native_text_gymnasium_env_passes_xpgyms_checker():
    xpgym_check_env(from_gymnasium(ReverseWord()))


def test_a_bridged_xpgym_env_passes_xpgyms_checker_on_the_way_back():
    xpgym_check_env(from_gymnasium(gymnasium.make(gymnasium_id("game:GuessTheNumber-v0"))))


def test_from_gymnasium_keeps_rewards_flags_and_infos():
    env = from_gymnasium(ReverseWord())
    observation, _ = env.reset(seed=1)
    word = observation.removeprefix("reverse ")
    assert env.step(word[::-1]) == ("done", 1.0, True, False, {"correct": True})


def test_from_gymnasium_refuses_an_env_without_text_observations():
    env = from_gymnasium(gymnasium.make("CartPole-v1"))
    with pytest.raises(TypeError, match="not str; only text envs"):
        env.reset(seed=0)


def test_from_gymnasium_refuses_what_is_not_a_gymnasium_env():
    with pytest.raises(TypeError, match=r"needs a gymnasium\.Env"):
        from_gymnasium(xpgym.make("game:GuessTheNumber-v0"))  # type: ignore[arg-type]
