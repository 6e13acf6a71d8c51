"""``python -m xpgym synth``: run the oracle on toolgym tasks and keep those CodeGym's quality
filters pass.

Tasks come from the registered toolgym ids (each id's config drawn with seeds ``0..N-1``, as
``reset(seed=...)`` draws it) or from a JSONL file of task strings. For each task the oracle
(`ToolGymEnv.solve`) plays it with no tool-call cap, and the task is flagged when:

* ``too_few_calls`` / ``too_many_calls``: the oracle made fewer than `Filters.t_min` or more
  than `Filters.t_max` tool calls (CodeGym: 10 and 256);
* ``too_few_tools``: it used fewer than `Filters.min_tools` distinct tools (CodeGym: 4;
  ``Observe`` and ``Done`` count);
* ``duplicate``: the same task string was already seen (e.g. a ``-random`` id drawing an
  easy or hard config).

A task without a flag is kept. An oracle that raises or answers wrong is a bug in the env: it
is reported in `SynthReport.failures` and the command exits non-zero.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from xpgym.core.registry import make
from xpgym.envs.toolgym import from_task_string
from xpgym.envs.toolgym.formats import parse_task_string

__all__ = [
    "Filters",
    "SynthReport",
    "TaskResult",
    "file_tasks",
    "generated_tasks",
    "read_task_file",
    "run_oracle",
    "synthesize",
    "write_report",
]

ORACLE_CALL_LIMIT = 1_000_000
"""The oracle's cap while synth runs it: high enough never to cut an oracle short."""


@dataclasses.dataclass(frozen=True)
class Filters:
    """CodeGym's tool-use complexity filters (defaults from the paper)."""

    t_min: int = 10
    t_max: int = 256
    min_tools: int = 4


@dataclasses.dataclass(frozen=True)
class TaskResult:
    """One task's oracle run.

    Attributes:
        task: The task string. group: The env id it was drawn from, or the env name for
            tasks read from a file. seed: The seed it was drawn with (`None` from a file).
        calls: Oracle tool calls. tools: Distinct tools it used. flags: Why it is dropped
            (empty: kept). error: Why the oracle failed (`None`: it won).
    """

    task: str
    group: str
    seed: int | None
    calls: int = 0
    tools: int = 0
    flags: tuple[str, ...] = ()
    error: str | None = None

    @property
    def kept(self) -> bool:
        """The oracle won and no filter flagged the task."""
        return self.error is None and not self.flags


@dataclasses.dataclass
class SynthReport:
    """What `synthesize` found: every task's result, in order."""

    filters: Filters
    results: list[TaskResult] = dataclasses.field(default_factory=list)

    @property
    def failures(self) -> list[TaskResult]:
        """Tasks whose oracle raised or answered wrong (env bugs)."""
        return [r for r in self.results if r.error is not None]

    @property
    def kept(self) -> list[TaskResult]:
        """Tasks that pass every filter."""
        return [r for r in self.results if r.kept]

    def summary(self) -> dict[str, Any]:
        """Per group: tasks, kept, dropped by flag, failed, oracle calls and distinct tools
        (min / mean / max over the tasks whose oracle won); plus totals and the filters."""
        groups: dict[str, list[TaskResult]] = {}
        for result in self.results:
            groups.setdefault(result.group, []).append(result)
        return {
            "filters": dataclasses.asdict(self.filters),
            "tasks": len(self.results),
            "kept": len(self.kept),
            "failed": len(self.failures),
            "groups": {name: _group_summary(results) for name, results in groups.items()},
            "failures": [{"task": r.task[:500], "error": r.error} for r in self.failures],
        }


def _stats(values: list[int]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": min(values), "mean": round(statistics.mean(values), 2), "max": max(values)}


def _group_summary(results: list[TaskResult]) -> dict[str, Any]:
    won = [r for r in results if r.error is None]
    dropped = Counter(flag for r in won if r.flags for flag in r.flags)
    return {
        "tasks": len(results),
        "kept": sum(r.kept for r in results),
        "dropped": sum(bool(r.flags) for r in won),
        "dropped_by": dict(sorted(dropped.items())),
        "failed": len(results) - len(won),
        "oracle_calls": _stats([r.calls for r in won]),
        "distinct_tools": _stats([r.tools for r in won]),
    }


def generated_tasks(env_ids: Iterable[str], seeds: int) -> Iterator[tuple[str, int, str]]:
    """``(env id, seed, task string)`` for every id and seed ``0..seeds-1``: the task that
    ``reset(seed=seed)`` of that id plays."""
    for env_id in env_ids:
        env = make(env_id)
        for seed in range(seeds):
            _, info = env.reset(seed=seed)
            yield env_id, seed, str(info["task"])
        env.close()


def read_task_file(path: str | Path) -> list[str]:
    """Task strings from a JSONL file: each line a JSON string or an object with "task".

    Raises:
        ValueError: a line that is neither, naming the file and line.
    """
    tasks = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: not JSON ({exc})") from None
        task = value.get("task") if isinstance(value, dict) else value
        if not isinstance(task, str):
            raise ValueError(f'{path}:{number}: expected a task string or {{"task": ...}}')
        tasks.append(task)
    return tasks


def run_oracle(task: str, group: str, seed: int | None, filters: Filters) -> TaskResult:
    """Play `task` with its env's oracle and flag it by `filters` (see the module docstring)."""
    try:
        env = from_task_string(task, max_tool_calls=ORACLE_CALL_LIMIT)
        env.reset()
        actions = env.solve()
    except Exception as exc:  # any oracle failure is an env bug to report, not to crash on
        return TaskResult(task, group, seed, error=f"{type(exc).__name__}: {exc}")
    if env.answer_correct is not True:
        return TaskResult(task, group, seed, len(actions), error="the oracle's answer is wrong")
    calls = len(actions)
    tools = len({json.loads(action)["name"] for action in actions})
    flags = []
    if calls < filters.t_min:
        flags.append("too_few_calls")
    if calls > filters.t_max:
        flags.append("too_many_calls")
    if tools < filters.min_tools:
        flags.append("too_few_tools")
    return TaskResult(task, group, seed, calls, tools, tuple(flags))


def synthesize(
    tasks: Iterable[tuple[str, int | None, str]],
    filters: Filters = Filters(),
    on_result: Callable[[TaskResult], None] | None = None,
) -> SynthReport:
    """Run the oracle on every ``(group, seed, task string)`` and apply the filters.

    Args:
        tasks: What `generated_tasks` yields, or ``(env name, None, task)`` for file tasks.
        filters: The quality filters.
        on_result: Called with each result as it is ready (e.g. a progress bar).
    """
    report = SynthReport(filters)
    seen: set[str] = set()
    for group, seed, task in tasks:
        result = run_oracle(task, group, seed, filters)
        if result.error is None and task in seen:
            result = dataclasses.replace(result, flags=(*result.flags, "duplicate"))
        seen.add(task)
        report.results.append(result)
        if on_result is not None:
            on_result(result)
    return report


def file_tasks(path: str | Path) -> list[tuple[str, None, str]]:
    """`read_task_file` as `synthesize` input, grouped by env name (a malformed task string
    becomes its own group and fails in the oracle run)."""
    rows: list[tuple[str, None, str]] = []
    for task in read_task_file(path):
        try:
            group = parse_task_string(task)[0]
        except ValueError:
            group = "(malformed)"
        rows.append((group, None, task))
    return rows


def write_report(report: SynthReport, out: str | Path) -> tuple[Path, Path]:
    """Write ``tasks.jsonl`` (the kept tasks) and ``summary.json`` into directory `out`.

    Returns:
        The two paths.
    """
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    tasks_path, summary_path = directory / "tasks.jsonl", directory / "summary.json"
    with tasks_path.open("w") as handle:
        for result in report.kept:
            row = {
                "task": result.task,
                "env": result.task.partition("@")[0],
                "source": result.group,
                "seed": result.seed,
                "oracle_calls": result.calls,
                "distinct_tools": result.tools,
            }
            handle.write(json.dumps(row) + "\n")
    summary_path.write_text(json.dumps(report.summary(), indent=2) + "\n")
    return tasks_path, summary_path
