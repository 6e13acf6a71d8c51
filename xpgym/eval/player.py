"""Playing one planned episode and turning it into a record (see `xpgym.eval.records`).

`EpisodePlayer.play(key)` takes an env of the key's id from the run's `EnvPool`, plays the
episode with the policies of its agents and returns the record and its JSONL line; anything
the episode raises becomes a ``"failed"`` record instead (see `xpgym.eval.runner`).

* Single-agent ids: a one-env `SyncVectorEnv` (autoreset disabled) and `RolloutCollector`
  with ``collect(1, seed=seed)``; the reset seed is ``derive_seeds(seed, 1)[0]``. An episode
  that ended on an infrastructure failure (``Episode.outcome == "infra_error"``,
  `xpgym.core.errors`) gives an ``"infra_error"`` record: its ``error`` is
  ``"<kind>: <message>"``, ``infra_error`` the cause, ``episode`` the transcript, and
  ``results`` is empty.
* Multi-agent ids: `xpgym.eval.multiagent.play_multiagent` with the same reset seed.

Each agent's policy is wrapped in a `TimedPolicy` (per-request latencies go to the record);
the specs ``random``/``scripted`` get a `RandomPolicy` bound to the episode's env.
"""

from __future__ import annotations

import datetime
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xpgym.core.multiagent import MultiAgentEnv
from xpgym.core.registry import make, make_vec
from xpgym.core.vector.base import AutoresetMode, derive_seeds
from xpgym.core.vector.sync import SyncVectorEnv
from xpgym.eval.metrics import episode_result
from xpgym.eval.models import ModelSpec
from xpgym.eval.multiagent import play_multiagent
from xpgym.eval.policy_adapters import RandomPolicy, TimedPolicy
from xpgym.eval.records import EpisodeKey, to_line
from xpgym.eval.secrets import mask
from xpgym.rollout.collector import RolloutCollector
from xpgym.rollout.env_pool import EnvPool
from xpgym.rollout.policies import ConcurrentPolicy

__all__ = ["EpisodePlayer", "PlaySettings", "make_play_env"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlaySettings:
    """What every episode of a run shares: the turn limit and the system prompt."""

    max_turns: int | None = None
    system_prompt: str | None = None


class EpisodePlayer:
    """Plays planned episodes (from any thread) and returns their records.

    Args:
        settings: The run's turn limit and system prompt.
        models: ``{(env_id, agent or None): model spec}``.
        specs: The parsed specs of `models`' values.
        policies: The shared policy of every spec that is not of kind ``"env"``.
        agents: ``{env_id: agent ids}``, `None` for a single-agent id.
        pool: Envs by env id (`xpgym.rollout.env_pool.EnvPool` over `make_play_env`).
        secrets: Values to mask in recorded errors.
    """

    def __init__(
        self,
        settings: PlaySettings,
        models: Mapping[tuple[str, str | None], str],
        specs: Mapping[str, ModelSpec],
        policies: Mapping[str, ConcurrentPolicy],
        agents: Mapping[str, list[str] | None],
        pool: EnvPool[str, Any],
        secrets: Sequence[str],
    ) -> None:
        self.settings = settings
        self.models = models
        self.specs = specs
        self.policies = policies
        self.agents = agents
        self.pool = pool
        self.secrets = list(secrets)

    def play(self, key: EpisodeKey) -> tuple[dict[str, Any], str]:
        """``(record, JSONL line)``; a failure gives a ``"failed"`` record, never raises."""
        env_id, seed, sample = key
        started = datetime.datetime.now(datetime.timezone.utc)
        start = time.perf_counter()
        record: dict[str, Any] = {
            "env_id": env_id,
            "seed": seed,
            "sample": sample,
            "status": "ok",
            "error": None,
            "started_at": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
            "seconds": 0.0,
            "results": [],
            "episode": None,
            "transcript": None,
        }
        try:
            with self.pool.lease(env_id) as env:  # an env whose episode raised is closed
                if self.agents[env_id] is None:
                    self._play_single(env, key, record)
                else:
                    self._play_multiagent(env, key, record)
            record["seconds"] = round(time.perf_counter() - start, 4)
            return record, to_line(record)
        except Exception as exc:  # the episode failed; the run goes on
            error = mask(f"{type(exc).__name__}: {exc}", self.secrets)
            logger.warning("%s seed %d sample %d failed: %s", env_id, seed, sample, error)
            record.update(
                status="failed",
                error=error,
                seconds=round(time.perf_counter() - start, 4),
                results=[],
                episode=None,
                transcript=None,
            )
            return record, to_line(record)

    def _policy(self, model: str, sample: Callable[[], str]) -> TimedPolicy:
        if self.specs[model].kind == "env":
            return TimedPolicy(RandomPolicy(sample))
        return TimedPolicy(self.policies[model])

    def _play_single(self, vec: SyncVectorEnv, key: EpisodeKey, record: dict[str, Any]) -> None:
        env_id, seed, _ = key
        model = self.models[env_id, None]
        policy = self._policy(model, lambda: vec.call("sample_random_action")[0])
        collector = RolloutCollector(
            vec,
            policy,
            max_turns=self.settings.max_turns,
            system_prompt=self.settings.system_prompt,
            env_id=env_id,  # never asks a sub-env discarded after a crash for its spec
        )
        (episode,) = collector.collect(1, seed=seed)
        result = episode_result(episode)
        for turn in episode.turns:  # the transcript keeps text; ids are for training
            turn.prompt_ids = turn.response_ids = turn.response_logprobs = None
        record["episode"] = episode.to_dict()
        if episode.infra_error is not None:
            cause = episode.infra_error
            logger.warning("%s seed %d: infrastructure failure %s", env_id, seed, cause)
            record["status"] = "infra_error"
            record["error"] = mask(f"{cause.kind}: {cause.message}", self.secrets)
            record["infra_error"] = {"kind": cause.kind, "message": record["error"]}
            return
        record["results"] = [
            {"agent": None, "model": model, **result, "generation_seconds": _rounded(policy)}
        ]

    def _play_multiagent(self, env: MultiAgentEnv, key: EpisodeKey, record: dict[str, Any]) -> None:
        env_id, seed, _ = key
        policies = {
            agent: self._policy(
                self.models[env_id, agent], functools.partial(env.sample_random_action, agent)
            )
            for agent in env.possible_agents
        }
        reset_seed = derive_seeds(seed, 1)[0]
        played = play_multiagent(
            env,
            policies,
            seed=reset_seed,
            max_turns=self.settings.max_turns,
            system_prompt=self.settings.system_prompt,
        )
        record["results"] = [
            {
                "agent": agent,
                "model": self.models[env_id, agent],
                **outcome.result(),
                "generation_seconds": _rounded(policies[agent]),
            }
            for agent, outcome in played.agents.items()
        ]
        record["transcript"] = {
            "reset_seed": reset_seed,
            "truncated_reason": played.truncated_reason,
            "steps": played.transcript,
        }


def make_play_env(env_id: str, agents: list[str] | None) -> Any:
    """The env an episode of `env_id` is played on.

    Args:
        env_id: The env id.
        agents: `None` for a single-agent id: a one-env `SyncVectorEnv` with autoreset
            disabled (the collector resets it). The agent ids of a multi-agent id: the
            `MultiAgentEnv` itself.
    """
    if agents is None:
        return make_vec(env_id, 1, vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED})
    return make(env_id)


def _rounded(policy: TimedPolicy) -> list[float]:
    return [round(seconds, 4) for seconds in policy.seconds]
