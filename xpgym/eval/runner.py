"""Run an evaluation: plan episodes, play them concurrently, append records, resume, summarise.

Plan
    Episodes are keyed ``(env_id, seed, sample)``: every env id matched by ``config.envs``,
    seeds ``config.seed .. config.seed + config.episodes - 1``, samples ``0 ..
    config.samples - 1``. The samples of one seed start from the same state: seed ``s`` is
    the episode a one-env vector env plays after ``reset(seed=s)`` (reset seed
    ``derive_seeds(s, 1)[0]``, stored in the episode), and an env's reset is a function of
    its seed. So ``(env_id, seed)`` is a Pass@k problem with ``config.samples`` samples.

Play
    ``config.concurrency`` worker threads each take the next planned episode and play it
    with `xpgym.eval.player.EpisodePlayer`: single-agent episodes through
    `RolloutCollector`, multi-agent ones through `xpgym.eval.multiagent.play_multiagent`
    with one policy per agent id. Envs are reused by later episodes of the same id. Model
    policies are built once per run and shared by the threads; local models batch the
    threads' prompts (`BatchingPolicy`).

Failures
    Anything an episode raises (a request that failed after the policy's retries, a
    malformed response, a model error) makes that episode a record with ``"status":
    "failed"`` and the error; an episode ended by an infrastructure failure
    (`xpgym.core.errors`) a record with ``"status": "infra_error"``, counted apart
    (``infra_errors``). The other episodes go on. A re-run skips both unless
    ``retry_failed``.

Resume
    Records are appended to ``<out>/episodes.jsonl`` as episodes finish (see
    `xpgym.eval.records`); a new `Evaluation` over the same ``out`` skips every planned key
    that has a record. ``<out>/config.json`` keeps the settings that change results (models,
    sampling, turn limit, system prompt); resuming with other values raises `ValueError`.
    More envs, seeds or samples extend a run.

Secrets
    The API key is read by the HTTP policy from the environment variable
    ``config.api_key_env``; nothing here stores it. Its value is also masked (``***``) in
    recorded errors and in log messages made during `Evaluation.run`, in case a server
    echoes it back.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xpgym.core.multiagent import MultiAgentEnv
from xpgym.core.registry import list_envs, make, spec
from xpgym.eval import report
from xpgym.eval.metrics import SummaryRow, pass_at_k_values, summarize
from xpgym.eval.models import ModelSpec, SamplingSettings, build_policy, parse_model_spec
from xpgym.eval.player import EpisodePlayer, PlaySettings, make_play_env
from xpgym.eval.records import (
    EpisodeKey,
    RecordWriter,
    load_records,
    record_key,
    without_transcript,
)
from xpgym.eval.secrets import masked_logs
from xpgym.rollout.env_pool import EnvPool
from xpgym.rollout.policies import ConcurrentPolicy

__all__ = [
    "EvalConfig",
    "EvalSummary",
    "Evaluation",
    "default_out_dir",
    "plan_episodes",
    "resolve_env_ids",
    "run_eval",
]

logger = logging.getLogger(__name__)

_GLOB_CHARS = frozenset("*?[")
_RESULT_SETTINGS = (
    "model",
    "agent_models",
    "temperature",
    "top_p",
    "max_new_tokens",
    "max_turns",
    "system_prompt",
)
"""Config fields that change what an episode's record holds: a resumed run must match."""

RecordCallback = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class EvalConfig:
    """Everything an evaluation needs; `python -m xpgym eval` builds one from its arguments.

    Attributes:
        envs: Env ids or globs over registered ids (``"game:*-easy"``); a `str` is one.
        out: The output directory (created; see `Evaluation` for its files).
        model: The model spec of single-agent envs and of agents without their own
            (`xpgym.eval.models`).
        agent_models: ``{agent_id: model spec}`` for multi-agent envs.
        episodes: Seeds per env. seed: The first seed. samples: Episodes per seed (Pass@k).
        temperature, top_p, max_new_tokens: Sampling (temperature 0: greedy).
        max_turns: Most turns per episode (env steps, multi-agent; `None`: the env decides).
        system_prompt: A system message at the start of every conversation.
        concurrency: Episodes in flight.
        retry_failed: Re-run episodes recorded as failed.
        allow_download: Include ids whose env downloads data (``spec.requires_download``).
        api_key_env: Environment variable with the API key for URL specs.
        timeout: Seconds per HTTP socket operation. max_retries: Retries per HTTP request.
        retry_backoff: First wait before an HTTP retry, in seconds (doubles each retry).
        device: Device of local HF models.
        command: The command line, for the record (never holds a secret: specs may not).
    """

    envs: Sequence[str]
    out: str | Path
    model: str | None = None
    agent_models: Mapping[str, str] = field(default_factory=dict)
    episodes: int = 10
    seed: int = 0
    samples: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    max_turns: int | None = None
    system_prompt: str | None = None
    concurrency: int = 8
    retry_failed: bool = False
    allow_download: bool = False
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 60.0
    max_retries: int = 5
    retry_backoff: float = 0.5
    device: str | None = None
    command: Sequence[str] = ()

    def __post_init__(self) -> None:
        if isinstance(self.envs, str):  # one pattern, not its characters
            object.__setattr__(self, "envs", (self.envs,))
        checks = {
            "envs must name at least one env id or glob": len(self.envs) > 0,
            "episodes must be >= 1": self.episodes >= 1,
            "seed must be >= 0": self.seed >= 0,
            "samples must be >= 1": self.samples >= 1,
            "temperature must be >= 0": self.temperature >= 0,
            "top_p must be in (0, 1]": 0 < self.top_p <= 1,
            "max_new_tokens must be >= 1": self.max_new_tokens >= 1,
            "max_turns must be >= 1 or None": self.max_turns is None or self.max_turns >= 1,
            "concurrency must be >= 1": self.concurrency >= 1,
            "timeout must be > 0": self.timeout > 0,
            "max_retries must be >= 0": self.max_retries >= 0,
            "retry_backoff must be >= 0": self.retry_backoff >= 0,
        }
        failed = [message for message, ok in checks.items() if not ok]
        if failed:
            raise ValueError(f"bad eval config: {'; '.join(failed)}")

    def as_json(self) -> dict[str, Any]:
        """The config as JSON-compatible data (paths and tuples as JSON gives them back)."""
        return json.loads(json.dumps(asdict(self), default=str))


@dataclass
class EvalSummary:
    """What `Evaluation.summarize` computed and wrote.

    Attributes:
        rows: One `SummaryRow` per env id (and agent id, multi-agent).
        planned, completed, failed: Episode counts over the plan (``planned - completed -
            failed - infra_errors`` episodes have no record yet, e.g. after an interrupted
            run).
        infra_errors: Episodes ended by an infrastructure failure (`xpgym.core.errors`).
        infra_errors_by_kind: ``{cause kind: episodes}``.
        files: The files written (``summary.json``, and ``summary.png`` if matplotlib is
            installed).
    """

    rows: list[SummaryRow]
    planned: int
    completed: int
    failed: int
    files: list[Path]
    infra_errors: int = 0
    infra_errors_by_kind: dict[str, int] = field(default_factory=dict)


def default_out_dir(root: str | Path = "results/eval") -> Path:
    """``<root>/<UTC time, e.g. 20250101-120000>``."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path(root) / stamp


def resolve_env_ids(patterns: Sequence[str], *, allow_download: bool = False) -> list[str]:
    """The env ids named by `patterns`, in order, without repeats.

    A pattern with a glob character (``*?[``) matches registered ids; ids whose spec has
    ``requires_download`` are skipped (with a warning) unless `allow_download`. A pattern
    without one is an exact id (an alias or ``remote:`` id too).

    Raises:
        UnknownEnvError: an exact id is not registered (the message suggests close ids).
        ValueError: a glob matches nothing, or an exact id downloads data and
            `allow_download` is false.
    """
    ids: list[str] = []
    for pattern in patterns:
        if not _GLOB_CHARS & set(pattern):
            if spec(pattern).requires_download and not allow_download:
                raise ValueError(
                    f"{pattern!r} downloads its data on first use; pass --allow-download "
                    "(allow_download=True) to evaluate it"
                )
            matched = [pattern]
        else:
            matched = list_envs(pattern)
            if not matched:
                raise ValueError(f"no env ids match {pattern!r} (see `python -m xpgym list`)")
            skipped = [i for i in matched if spec(i).requires_download and not allow_download]
            if skipped:
                logger.warning(
                    "skipping %d ids that download data (pass --allow-download to include "
                    "them): %s",
                    len(skipped),
                    ", ".join(skipped),
                )
            matched = [i for i in matched if i not in skipped]
        ids.extend(i for i in matched if i not in ids)
    if not ids:
        raise ValueError(f"{list(patterns)} leave no env id to evaluate")
    return ids


def plan_episodes(env_ids: Sequence[str], seeds: Sequence[int], samples: int) -> list[EpisodeKey]:
    """Every ``(env_id, seed, sample)``, env ids outermost, samples innermost."""
    return [(env_id, seed, k) for env_id in env_ids for seed in seeds for k in range(samples)]


class Evaluation:
    """One evaluation run over ``config.out`` (see the module docstring).

    Construction resolves the env ids, makes each env once to learn its agents, checks that
    every agent has a model and that a resumed run has the same settings, and reads the
    existing records; it loads no model. `run` plays the `pending` episodes; `summarize`
    writes the summary. Files in ``config.out``:

    * ``config.json``: ``{"config": EvalConfig fields, "versions": package versions}``;
    * ``episodes.jsonl``: one record per episode (`xpgym.eval.records`);
    * ``summary.json``: config, versions, counts, Pass@k ks and the rows;
    * ``summary.png``: success rate and Pass@k per row (when matplotlib is installed).

    Attributes:
        config: The `EvalConfig`. out_dir: ``Path(config.out)``.
        env_ids: The resolved env ids, in order.
        agents: ``{env_id: agent ids}`` for multi-agent envs, ``None`` for single-agent.
        models: ``{(env_id, agent or None): model spec}``: who plays what.
        keys: Every planned episode.
        records: The latest record of each key on disk, without transcripts.
        pending: The keys `run` will play.

    Raises:
        ValueError: a bad pattern, a missing or unknown agent model, a bad model spec, or
            settings that differ from the run already in ``config.out``.
    """

    def __init__(self, config: EvalConfig) -> None:
        self.config = config
        self.out_dir = Path(config.out)
        self.env_ids = resolve_env_ids(config.envs, allow_download=config.allow_download)
        self.agents = {env_id: _agents_of(env_id) for env_id in self.env_ids}
        self.models = self._assign_models()
        self.specs: dict[str, ModelSpec] = {
            text: parse_model_spec(text) for text in dict.fromkeys(self.models.values())
        }
        self._check_settings()
        seeds = range(config.seed, config.seed + config.episodes)
        self.keys = plan_episodes(self.env_ids, seeds, config.samples)
        self.records = load_records(self.episodes_path, transcripts=False)
        self.pending = [key for key in self.keys if self._needs_run(key)]
        kinds = {s.kind for s in self.specs.values()}
        if config.samples > 1 and (config.temperature == 0 and kinds - {"env"}):
            logger.warning(
                "samples=%d with temperature 0: greedy samples are (nearly) identical, so "
                "Pass@k says little more than Pass@1; set a temperature > 0",
                config.samples,
            )
        if config.samples > 1 and "env" in kinds:
            logger.warning(
                "samples=%d with the env's own policy (random/scripted): it draws from the "
                "env's seeded RNG, so every sample of a seed repeats the same episode",
                config.samples,
            )

    @property
    def episodes_path(self) -> Path:
        """``<out>/episodes.jsonl``."""
        return self.out_dir / "episodes.jsonl"

    @property
    def config_path(self) -> Path:
        """``<out>/config.json``."""
        return self.out_dir / "config.json"

    def run(self, on_record: RecordCallback | None = None) -> None:
        """Play every pending episode; append its record and call `on_record(record)` as
        each one finishes (in the calling thread). Builds the model policies first.

        Raises:
            ImportError: a model backend is not installed. Errors of loading a model.
        """
        if not self.pending:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if not self.config_path.exists():
            payload = {"config": self.config.as_json(), "versions": report.package_versions()}
            self.config_path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        with contextlib.ExitStack() as stack:
            secrets = self._secrets()
            if secrets:
                stack.enter_context(masked_logs(secrets))
            policies = self._build_policies(stack)
            pool: EnvPool[str, Any] = EnvPool(
                lambda env_id: make_play_env(env_id, self.agents[env_id])
            )
            stack.callback(pool.close)
            settings = PlaySettings(self.config.max_turns, self.config.system_prompt)
            player = EpisodePlayer(
                settings, self.models, self.specs, policies, self.agents, pool, secrets
            )
            self._play_all(player, on_record or (lambda record: None))

    def summarize(self) -> EvalSummary:
        """Aggregate the records of the planned keys; write ``summary.json`` and
        ``summary.png`` (if matplotlib is installed) to ``out``; return the summary."""
        records = [self.records[key] for key in self.keys if key in self.records]
        per_env = len(self.keys) // len(self.env_ids)
        planned = {key: (model, per_env) for key, model in self.models.items()}
        ks = pass_at_k_values(self.config.samples)
        rows = summarize(records, planned, ks)
        failed = sum(record["status"] == "failed" for record in records)
        kinds = Counter(
            record["infra_error"]["kind"] for record in records if record["status"] == "infra_error"
        )
        infra = sum(kinds.values())
        summary = EvalSummary(
            rows=rows,
            planned=len(self.keys),
            completed=len(records) - failed - infra,
            failed=failed,
            files=[],
            infra_errors=infra,
            infra_errors_by_kind=dict(sorted(kinds.items())),
        )
        self.out_dir.mkdir(parents=True, exist_ok=True)
        payload = {
            "config": self.config.as_json(),
            "versions": report.package_versions(),
            "episodes": {
                "planned": summary.planned,
                "completed": summary.completed,
                "failed": summary.failed,
                "infra_errors": summary.infra_errors,
                "infra_errors_by_kind": summary.infra_errors_by_kind,
            },
            "pass_at_k": ks,
            "rows": [asdict(row) for row in rows],
        }
        summary_path = self.out_dir / "summary.json"
        summary_path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        summary.files.append(summary_path)
        plot_path = self.out_dir / "summary.png"
        if report.plot_summary(rows, plot_path, title=self._plot_title()):
            summary.files.append(plot_path)
        return summary

    # -- setup -----------------------------------------------------------------------
    def _assign_models(self) -> dict[tuple[str, str | None], str]:
        config = self.config
        models: dict[tuple[str, str | None], str] = {}
        for env_id, agents in self.agents.items():
            if agents is None:
                if config.model is None:
                    raise ValueError(f"{env_id!r} is a single-agent env: pass --model SPEC")
                models[env_id, None] = config.model
                continue
            for agent in agents:
                model = config.agent_models.get(agent, config.model)
                if model is None:
                    raise ValueError(
                        f"agent {agent!r} of {env_id!r} has no model: pass "
                        f"--agent-model {agent}=SPEC or --model SPEC"
                    )
                models[env_id, agent] = model
        known = {agent for agents in self.agents.values() for agent in agents or ()}
        unknown = sorted(set(config.agent_models) - known)
        if unknown:
            raise ValueError(
                f"--agent-model names agents {unknown} that no selected multi-agent env has "
                f"(agents: {sorted(known) or 'none'})"
            )
        return models

    def _check_settings(self) -> None:
        if not self.config_path.exists():
            return
        saved = json.loads(self.config_path.read_text(encoding="utf-8"))["config"]
        current = self.config.as_json()
        differences = [
            f"{name}: {saved.get(name)!r} there, {current[name]!r} now"
            for name in _RESULT_SETTINGS
            if saved.get(name) != current[name]
        ]
        if differences:
            raise ValueError(
                f"{self.out_dir} holds a run with other settings ({'; '.join(differences)}); "
                "resume it with the same settings or choose another output directory"
            )

    def _needs_run(self, key: EpisodeKey) -> bool:
        record = self.records.get(key)
        return record is None or (
            self.config.retry_failed and record["status"] in ("failed", "infra_error")
        )

    def _secrets(self) -> list[str]:
        if not any(s.kind == "openai" for s in self.specs.values()):
            return []
        key = os.environ.get(self.config.api_key_env)
        return [key] if key else []

    def _build_policies(self, stack: contextlib.ExitStack) -> dict[str, ConcurrentPolicy]:
        config = self.config
        settings = SamplingSettings(
            temperature=config.temperature,
            top_p=config.top_p,
            max_new_tokens=config.max_new_tokens,
            seed=config.seed,
            concurrency=config.concurrency,
            api_key_env=config.api_key_env,
            timeout=config.timeout,
            max_retries=config.max_retries,
            retry_backoff=config.retry_backoff,
            device=config.device,
        )
        policies: dict[str, ConcurrentPolicy] = {}
        for text, model_spec in self.specs.items():
            if model_spec.kind == "env":
                continue
            logger.info("loading %s", text)
            policy = build_policy(model_spec, settings)
            stack.callback(policy.close)
            policies[text] = policy
        return policies

    def _play_all(self, player: EpisodePlayer, on_record: RecordCallback) -> None:
        executor = ThreadPoolExecutor(self.config.concurrency, thread_name_prefix="xpgym-eval")
        try:
            with RecordWriter(self.episodes_path) as writer:
                futures = [executor.submit(player.play, key) for key in self.pending]
                for future in as_completed(futures):
                    record, line = future.result()
                    writer.write(line)
                    self.records[record_key(record)] = without_transcript(record)
                    on_record(record)
        finally:  # interrupted: start no new episode; those in flight end unrecorded
            executor.shutdown(wait=True, cancel_futures=True)
        self.pending = []

    def _plot_title(self) -> str:
        models = sorted(set(self.models.values()))
        return f"{', '.join(models)}: {self.config.episodes} seeds x {self.config.samples} samples"


def _agents_of(env_id: str) -> list[str] | None:
    """The agent ids of a multi-agent env, `None` for a single-agent one (makes the env)."""
    env = make(env_id)
    try:
        return list(env.possible_agents) if isinstance(env, MultiAgentEnv) else None
    finally:
        env.close()


def run_eval(config: EvalConfig, on_record: RecordCallback | None = None) -> EvalSummary:
    """``Evaluation(config)``, `Evaluation.run`, then `Evaluation.summarize`."""
    evaluation = Evaluation(config)
    evaluation.run(on_record)
    return evaluation.summarize()
