"""Infrastructure failures are typed (`Episode.outcome`), found where they happen and kept out
of the statistics a trainer learns from (`xpgym.core.errors`, recorder, collector, runner,
layouts, advantages). The adapters' tests are in each tests/adapters/test_adapter_<trainer>.py."""

from __future__ import annotations

import asyncio
import functools
import json
import math
from typing import Any

import numpy as np
import pytest
from adapter_cases import GROUPS, SCORES, episodes, with_failed_member
from random_byte_lm import EOS_ID, tiny_tokenizer
from toy_envs import ToyEnv

import xpgym
from xpgym.core import registry
from xpgym.core.chat import ChatPromptBuilder
from xpgym.core.env import Env
from xpgym.core.errors import InfraCause, InfraError, find_infra_cause, step_failure_info
from xpgym.core.sandbox import SandboxError
from xpgym.core.tools.base import Tool, ToolCall, ToolResult
from xpgym.core.tools.python import PythonTool
from xpgym.core.trajectory import (
    Episode,
    Turn,
    episode_metrics,
    infra_error_metrics,
    training_group_ids,
)
from xpgym.core.vector import SyncVectorEnv
from xpgym.core.wrappers import ToolEnvWrapper
from xpgym.envs.common.answer_env import BoxedAnswerEnv, GradeResult, Problem
from xpgym.remote import BackgroundServer, RemoteEnv
from xpgym.rollout.collector import collect_episodes
from xpgym.rollout.policies import Generation
from xpgym.rollout.recorder import EpisodeRecorder
from xpgym.rollout.runner import EpisodeTask, run_episode
from xpgym.training.advantages import (
    discounted_returns,
    dr_grpo,
    grpo,
    infra_filled_scores,
    rebn,
    turn_rewards,
)
from xpgym.training.layouts import INFRA_GROUP_PREFIX, episode_rows, on_last_policy_token, turn_rows

TOKENIZER = tiny_tokenizer()
GRADER_TIMEOUT = InfraCause("grader_timeout", "grading took over 5 s")

# --------------------------------------------------------------------------------------
# The record: Episode.outcome and its JSON
# --------------------------------------------------------------------------------------


def test_an_episode_is_ok_until_it_has_an_infra_error() -> None:
    episode = Episode("toy", turns=[Turn("obs", "act", 1.0, terminated=True)])
    assert (episode.outcome, episode.infra_error) == ("ok", None)
    episode.infra_error = GRADER_TIMEOUT
    assert episode.outcome == "infra_error"


def test_the_cause_round_trips_through_json() -> None:
    episode = Episode("toy", seed=3, infra_error=GRADER_TIMEOUT)
    data = json.loads(episode.to_json())
    assert data["outcome"] == "infra_error"
    assert data["infra_error"] == {"kind": "grader_timeout", "message": "grading took over 5 s"}
    assert Episode.from_json(episode.to_json()) == episode


def test_json_written_before_outcomes_existed_loads_as_ok_and_is_written_the_same() -> None:
    old = {"env_id": "toy", "seed": 1, "group_id": None, "turns": [], "info": {}}
    assert Episode.from_dict(old).outcome == "ok"
    assert Episode.from_dict(old).to_dict() == old
    assert Episode.from_dict({**old, "outcome": "ok", "infra_error": None}).outcome == "ok"


def test_an_outcome_that_disagrees_with_the_cause_is_refused() -> None:
    data = Episode("toy").to_dict()
    data["outcome"] = "infra_error"
    with pytest.raises(ValueError, match="disagrees with infra_error"):
        Episode.from_dict(data)


def test_a_cause_needs_a_kind() -> None:
    with pytest.raises(ValueError, match="non-empty str"):
        InfraCause("")


# --------------------------------------------------------------------------------------
# What counts as infrastructure
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (RuntimeError("boom"), "sub_env_crash"),
        (TimeoutError("sub-env 0 step took over 1s"), "sub_env_timeout"),
        (InfraError("remote_error", "HTTP 502"), "remote_error"),
    ],
)
def test_a_step_that_raised_is_infrastructure(exc: Exception, kind: str) -> None:
    info = step_failure_info(exc)
    assert info["error"].startswith(type(exc).__name__)
    assert find_infra_cause(info) == InfraCause(kind, info["infra_error"]["message"])


def test_a_bare_vector_env_error_is_a_crashed_sub_env() -> None:
    cause = find_infra_cause({"error": "RuntimeError: sub-env 1: died"})
    assert cause == InfraCause("sub_env_crash", "RuntimeError: sub-env 1: died")


def test_a_tool_backend_marker_is_found_in_the_tool_call() -> None:
    marker = {"kind": "tool_backend_error", "message": "disconnected"}
    info = {"tool_calls": [{"name": "sql", "ok": False, "info": {"infra_error": marker}}]}
    assert find_infra_cause(info) == InfraCause("tool_backend_error", "disconnected")


def test_the_policys_own_failures_are_not_infrastructure() -> None:
    policy_timeout = {"name": "python", "ok": False, "info": {"exit_reason": "timeout"}}
    assert find_infra_cause({"invalid_action": True, "correct": False}) is None
    assert find_infra_cause({"tool_calls": [policy_timeout]}) is None


def test_a_toolgym_step_that_counts_its_tool_calls_is_no_failure() -> None:
    env = xpgym.make("toolgym:ClosestToK-v0-easy")
    env.reset(seed=0)
    info = env.step('{"name": "Observe", "parameters": {}}')[4]
    assert info["tool_calls"] == 1  # toolgym's count of calls, not a list of call records
    assert find_infra_cause(info) is None


def test_a_malformed_marker_is_kept_as_unknown() -> None:
    assert find_infra_cause({"infra_error": "oops"}) == InfraCause("unknown", "oops")


# --------------------------------------------------------------------------------------
# Where failures are marked: grader, sandbox, tool wrapper, remote client
# --------------------------------------------------------------------------------------


class TimingOutGrader(BoxedAnswerEnv):
    """A boxed-answer env whose grader times out on ``\\boxed{slow}`` and grades the rest."""

    def _draw_problem(self, options: dict[str, Any] | None) -> Problem:
        return Problem("1 + 1?", ("2",))

    def _check(self, action: str) -> GradeResult:
        if "slow" in action:
            return GradeResult(False, "timeout", "slow", "grading took over 5 s")
        return GradeResult("2" in action, "graded", action)


def test_a_grader_timeout_is_marked_and_a_wrong_answer_is_not() -> None:
    env = TimingOutGrader()
    env.reset(seed=0)
    *_, info = env.step("\\boxed{slow}")
    assert info["infra_error"] == {"kind": "grader_timeout", "message": "grading took over 5 s"}
    env.reset(seed=0)
    *_, info = env.step("\\boxed{3}")
    assert "infra_error" not in info


class BrokenSandbox:
    def run_python(self, code: str, *, limits: Any) -> Any:
        raise SandboxError("bwrap: cannot create a user namespace")


def test_a_sandbox_that_does_not_start_is_marked() -> None:
    result = PythonTool(BrokenSandbox()).execute(ToolCall("python", {"code": "print(1)"}))  # type: ignore[arg-type]
    assert not result.ok
    assert result.info["infra_error"]["kind"] == "sandbox_error"


class RaisingTool(Tool):
    name = "lookup"

    def instructions(self) -> str:
        return "<lookup>key</lookup>"

    def function_schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": "lookup", "parameters": {}}}

    def parse(self, action: str) -> ToolCall | None:
        return ToolCall("lookup", {}, "<lookup>x</lookup>") if "<lookup>" in action else None

    def execute(self, call: ToolCall) -> ToolResult:
        raise ConnectionError("backend unreachable")


def test_a_tool_that_raises_is_a_tool_backend_error() -> None:
    env = ToolEnvWrapper(ToyEnv(), [RaisingTool()])
    env.reset(seed=0)
    *_, info = env.step("<lookup>x</lookup>")
    cause = find_infra_cause(info)
    assert cause is not None
    assert cause.kind == "tool_backend_error"
    assert "ConnectionError: backend unreachable" in cause.message


@pytest.fixture
def toy_server(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(registry, "registry", dict(registry.registry))  # no id left behind
    xpgym.register("test:InfraToy-v0", "toy_envs:ToyEnv", episode_length=3)
    with BackgroundServer(["test:InfraToy-*"]) as server:
        yield server


def test_a_remote_5xx_step_is_a_remote_error(toy_server: BackgroundServer) -> None:
    env = RemoteEnv(toy_server.url, "test:InfraToy-v0")
    try:
        env.reset(seed=0)
        *_, truncated, info = env.step("raise")  # the served ToyEnv raises: HTTP 500
    finally:
        env.close()
    assert truncated
    cause = find_infra_cause(info)
    assert cause is not None
    assert cause.kind == "remote_error"
    assert cause.message.startswith("HTTP 500")


# --------------------------------------------------------------------------------------
# The loops: recorder, collector, episode runner
# --------------------------------------------------------------------------------------


def test_the_recorder_ends_the_episode_at_its_first_infra_error() -> None:
    recorder = EpisodeRecorder(env_id="toy", seed=0, group_id="g", reset_info={})
    marker = {"kind": "tool_backend_error", "message": "disconnected"}
    info = {"infra_error": marker}
    over = recorder.record("obs", Generation(text="a"), 0.0, False, False, info, prompt_ids=None)
    episode = recorder.episode
    assert over
    assert recorder.done
    assert episode.infra_error == InfraCause("tool_backend_error", "disconnected")
    assert episode.turns[-1].truncated
    assert episode.turns[-1].info["truncated_reason"] == "infra_error"
    assert episode.info["truncated_reason"] == "infra_error"


class Scripted:
    """A batched policy that answers from a list, in order, for every prompt."""

    tokenizer = None

    def __init__(self, texts: list[str]) -> None:
        self.texts = list(texts)

    def generate(self, prompts: list[Any]) -> list[Generation]:
        return [Generation(text=self.texts.pop(0)) for _ in prompts]


def test_a_crashed_sub_env_gives_an_infra_error_episode_and_the_next_is_ok() -> None:
    vec = SyncVectorEnv([functools.partial(ToyEnv, 1)])
    try:
        crashed, healthy = collect_episodes(
            vec, Scripted(["raise", "0"]), num_episodes=2, group_size=2, seed=0
        )
    finally:
        vec.close()
    assert crashed.outcome == "infra_error"
    assert crashed.infra_error == InfraCause("sub_env_crash", "RuntimeError: toy failure")
    assert crashed.turns[-1].info["infra_error"]["kind"] == "sub_env_crash"
    assert healthy.outcome == "ok"


def test_a_grader_timeout_gives_an_infra_error_episode_a_wrong_answer_does_not() -> None:
    vec = SyncVectorEnv([TimingOutGrader, TimingOutGrader])
    try:
        slow, wrong = collect_episodes(
            vec, Scripted(["\\boxed{slow}", "\\boxed{3}"]), num_episodes=2, seed=0
        )
    finally:
        vec.close()
    assert slow.infra_error == GRADER_TIMEOUT
    assert (wrong.outcome, wrong.total_reward) == ("ok", 0.0)


class StepRaises(Env[str]):
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return "start", {}

    def step(self, action: str):
        raise self.exc


async def answer(prompt_ids: list[int], max_new_tokens: int) -> Generation:
    ids = [*TOKENIZER.encode("hi", add_special_tokens=False), EOS_ID]
    return Generation(text="hi", token_ids=ids, logprobs=[-0.5] * len(ids))


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (InfraError("remote_error", "HTTP 503 from the env server"), "remote_error"),
        (RuntimeError("env bug"), "sub_env_crash"),
    ],
)
def test_a_raising_step_in_the_runner_ends_the_episode_as_infra_error(
    exc: Exception, kind: str
) -> None:
    task = EpisodeTask("toy", 0, "g0")
    builder = ChatPromptBuilder(TOKENIZER)
    episode = asyncio.run(run_episode(StepRaises(exc), task, answer, builder, max_new_tokens=8))
    (turn,) = episode.turns
    assert episode.infra_error is not None
    assert episode.infra_error.kind == kind
    assert (turn.reward, turn.truncated) == (0.0, True)
    assert turn.response_ids  # the policy's tokens are kept, for the trainer to mask


# --------------------------------------------------------------------------------------
# What trainers see: layouts and advantages
# --------------------------------------------------------------------------------------


def test_infra_error_rows_keep_their_tokens_but_no_loss_reward_or_group() -> None:
    cases = with_failed_member()
    for rows in (episode_rows(cases), turn_rows(cases)):
        failed = rows.episode_index == 4
        assert rows.infra_error.tolist() == failed.tolist()
        start, stop = rows.cu_seqlens[np.flatnonzero(failed)[0]], rows.cu_seqlens[-1]
        assert rows.input_ids[start:stop].tolist()  # shapes do not change
        assert not rows.response_mask[start:stop].any()
        assert (rows.turn_index[start:stop] == -1).all()
        assert not rows.token_rewards[start:stop].any()
        assert set(rows.group_id[failed]) == {f"{INFRA_GROUP_PREFIX}4"}
    healthy = episode_rows(episodes())
    assert episode_rows(cases).response_mask[: healthy.cu_seqlens[-1]].tolist() == (
        healthy.response_mask.tolist()
    )


def test_row_values_skip_rows_without_policy_tokens_only_when_zero() -> None:
    mask = np.array([[0, 1, 1], [0, 0, 0]])
    assert on_last_policy_token([2.0, 0.0], mask).tolist() == [[0, 0, 2], [0, 0, 0]]
    with pytest.raises(ValueError, match="row 1 has no policy token"):
        on_last_policy_token([2.0, 1.0], mask)


def test_group_advantages_of_healthy_members_are_as_if_the_failed_one_were_absent() -> None:
    cases = with_failed_member()
    rewards, mask = turn_rewards(cases)
    scores = rewards.sum(axis=1)
    groups = training_group_ids(cases)
    assert groups[:4] == GROUPS
    assert groups[4] == f"{INFRA_GROUP_PREFIX}4"
    for estimator in (grpo, dr_grpo):
        got = estimator(scores, groups)[:4]
        np.testing.assert_array_equal(got, estimator(SCORES, GROUPS))
    returns = discounted_returns(rewards, mask, 0.9)
    base_rewards, base_mask = turn_rewards(episodes())
    base = rebn(discounted_returns(base_rewards, base_mask, 0.9), base_mask)
    np.testing.assert_array_equal(rebn(returns, mask)[:4, : base.shape[1]], base)
    assert not mask[4].any()


def test_fixed_block_groups_keep_the_healthy_mean_and_scale_grpo_by_the_named_factor() -> None:
    cases = with_failed_member()
    block = [cases[0], cases[1], cases[4]]  # group g0: A, B and the failed E
    filled = infra_filled_scores(block)
    assert filled.tolist() == [1.0, 0.0, 0.5]  # E gets mean(A, B) = 0.5
    np.testing.assert_allclose(dr_grpo(filled, ["g0"] * 3)[:2], dr_grpo([1.0, 0.0], ["g0"] * 2))
    m, k = 2, 1  # healthy and failed members
    exact = grpo([1.0, 0.0], ["g0"] * 2, eps=0.0)
    got = grpo(filled, ["g0"] * 3, eps=0.0)[:2]
    np.testing.assert_allclose(got, exact * math.sqrt((m + k - 1) / (m - 1)), atol=1e-12)


def test_infra_error_metrics_count_by_kind() -> None:
    crashed = Episode("toy", infra_error=InfraCause("sub_env_crash", "x"))
    assert infra_error_metrics([*with_failed_member(), crashed]) == {
        "infra_error_episodes": 2.0,
        "infra_error_episodes/grader_timeout": 1.0,
        "infra_error_episodes/sub_env_crash": 1.0,
    }
    assert infra_error_metrics(episodes()) == {"infra_error_episodes": 0.0}


def test_episode_metrics_average_each_key_over_the_ok_episodes_that_reported_it() -> None:
    def ep(metrics: dict[str, float] | None, failed: bool = False) -> Episode:
        info = {} if metrics is None else {"metrics": metrics}
        cause = {"kind": "grader_error", "message": ""} if failed else None
        return Episode(
            "toy", turns=[Turn("o", "a", 0.0, terminated=True)], info=info, infra_error=cause
        )

    episodes = [ep({"f1": 1.0, "len": 4.0}), ep({"f1": 0.5}), ep(None), ep({"f1": 9.0}, True)]
    assert episode_metrics(episodes) == {"metrics/f1": 0.75, "metrics/len": 4.0}
    assert episode_metrics([ep(None)]) == {}
