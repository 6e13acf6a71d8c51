"""A curriculum shared by processes through a file (`xpgym.rollout.shared_curriculum`), and
the tasks that name one (`EpisodeTask.curriculum`: every hook that plays tasks)."""

from __future__ import annotations

import asyncio
import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers", reason="the episodes' prompts are built with a tokenizer")

from random_byte_lm import EOS_ID, tiny_tokenizer

import xpgym
from xpgym.core.chat import ChatPromptBuilder
from xpgym.core.trajectory import episode_metrics
from xpgym.rollout.curriculum import (
    CONTINUOUS_KNOBS,
    KnobLadder,
    PresetLadder,
    SuccessRateScheduler,
)
from xpgym.rollout.policies import Generation
from xpgym.rollout.runner import (
    EpisodeTask,
    LiveEpisodes,
    make_tasks,
    run_episode,
    task_env_pool,
)
from xpgym.rollout.shared_curriculum import FORMAT, SharedCurriculum, shared_curriculum

GUESS = "game:GuessTheNumber-v0"
KNOB = KnobLadder(GUESS, CONTINUOUS_KNOBS[GUESS])
TOKENIZER = tiny_tokenizer()


async def guess_one(prompt_ids: list[int], budget: int) -> Generation:
    """Always guesses 1: GuessTheNumber's episode is won exactly when the target is 1."""
    text = "\\boxed{1}"
    return Generation(text=text, token_ids=[*text.encode(), EOS_ID], finish_reason="stop")


def play(task: EpisodeTask, pool: Any) -> Any:
    async def run() -> Any:
        with pool.lease(task) as env:
            return await run_episode(
                env, task, guess_one, ChatPromptBuilder(TOKENIZER), max_new_tokens=16
            )

    return asyncio.run(run())


# --------------------------------------------------------------------------------------
# The file
# --------------------------------------------------------------------------------------


def test_create_then_open_anywhere_gives_the_same_scheduler(tmp_path: Path) -> None:
    path = tmp_path / "run" / "curriculum.json"
    ladders = [KNOB, PresetLadder("game:Sokoban-v0")]
    made = SharedCurriculum.create(path, ladders, target=0.6, window=4, start_level=1)
    opened = SharedCurriculum(path)
    assert opened.ladders == made.ladders == tuple(ladders)
    assert opened.rule["target"] == 0.6
    assert opened.rule["window"] == 4
    assert opened.levels == {GUESS: 1, "game:Sokoban-v0": 1}
    assert opened.results == 0
    assert json.loads(path.read_text())["format"] == FORMAT
    copy = pickle.loads(pickle.dumps(made))  # sent to a worker: its path, reopened there
    assert isinstance(copy, SharedCurriculum)
    assert copy.path == path
    assert copy.levels == made.levels


def test_create_refuses_to_overwrite_a_file_unless_told(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    first = SharedCurriculum.create(path, [KNOB], window=1, start_level=5)
    first.record(GUESS, 5, True)
    with pytest.raises(FileExistsError, match="exist_ok"):
        SharedCurriculum.create(path, [KNOB])
    assert SharedCurriculum(path).levels == {GUESS: 6}  # untouched
    assert SharedCurriculum.create(path, [KNOB], exist_ok=True).levels == {GUESS: 0}


def test_bad_files_and_ladders_raise_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"SharedCurriculum\.create"):
        SharedCurriculum(tmp_path / "missing.json")
    (tmp_path / "text.json").write_text("not json")
    with pytest.raises(ValueError, match="not JSON"):
        SharedCurriculum(tmp_path / "text.json")
    (tmp_path / "other.json").write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="format"):
        SharedCurriculum(tmp_path / "other.json")
    path = tmp_path / "c.json"
    SharedCurriculum.create(path, [KNOB])
    data = json.loads(path.read_text())
    data["state"][GUESS]["level"] = 10_000
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="outside"):
        SharedCurriculum(path)

    class OwnLadder:
        family, num_levels = GUESS, 2

        def env_args(self, level: int) -> tuple[str, dict[str, Any]]:
            return GUESS, {}

    with pytest.raises(TypeError, match="PresetLadder and KnobLadder"):
        SharedCurriculum.create(tmp_path / "own.json", [OwnLadder()])
    with pytest.raises(ValueError, match="target"):
        SharedCurriculum.create(tmp_path / "t.json", [KNOB], target=1.5)
    assert not (tmp_path / "t.json").exists()


def test_results_move_levels_exactly_as_one_in_process_scheduler(tmp_path: Path) -> None:
    rule = dict(target=0.5, tolerance=0.1, window=2, start_level=3)
    shared = SharedCurriculum.create(tmp_path / "c.json", [KNOB], **rule)
    local = SuccessRateScheduler([KNOB], **rule)
    results = [True, True, True, False, False, False, False, True, True, False, True, True]
    for success in results:
        level = shared.levels[GUESS]
        shared.record(GUESS, level, success)
        local.record(GUESS, level, success)
        assert shared.scheduler().state_dict() == local.state_dict()
    assert shared.results == len(results)
    assert shared.metrics() == {**local.metrics(), "curriculum/results": float(len(results))}
    shared.record(GUESS, 99, True)  # another level's result: taken, not counted
    shared.record("game:Other-v0", 0, True)  # an unknown family's
    assert shared.scheduler().state_dict() == local.state_dict()


def test_state_dict_round_trips_and_refuses_what_does_not_fit() -> None:
    scheduler = SuccessRateScheduler([KNOB], window=3, start_level=2)
    scheduler.record(GUESS, 2, True)
    state = scheduler.state_dict()
    assert state == {GUESS: {"level": 2, "window": [True]}}
    other = SuccessRateScheduler([KNOB], window=3)
    other.load_state_dict(state)
    assert other.state_dict() == state
    with pytest.raises(ValueError, match="families"):
        other.load_state_dict({"game:Sokoban-v0": {"level": 0, "window": []}})
    with pytest.raises(ValueError, match="at most 3"):
        other.load_state_dict({GUESS: {"level": 0, "window": [True] * 4}})
    assert other.state_dict() == state  # a refused state changes nothing


RECORD_MANY = """
import sys
from xpgym.rollout.shared_curriculum import SharedCurriculum
curriculum = SharedCurriculum(sys.argv[1])
for _ in range(int(sys.argv[2])):
    curriculum.record("game:GuessTheNumber-v0", 0, sys.argv[3] == "win")
"""


def test_concurrent_processes_lose_no_result(tmp_path: Path) -> None:
    """Four processes record at once; the file ends with every result, in some order."""
    path = tmp_path / "c.json"
    SharedCurriculum.create(path, [KNOB], window=1000)
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", RECORD_MANY, str(path), "25", "win" if i % 2 else "loss"]
        )
        for i in range(4)
    ]
    assert [worker.wait(timeout=120) for worker in workers] == [0, 0, 0, 0]
    curriculum = SharedCurriculum(path)
    assert curriculum.results == 100
    window = curriculum.scheduler().state_dict()[GUESS]["window"]
    assert sorted(window) == [False] * 50 + [True] * 50
    assert not list(tmp_path.glob(".c.json.*"))  # no temporary file left


# --------------------------------------------------------------------------------------
# Tasks that name the file
# --------------------------------------------------------------------------------------


def test_a_task_names_its_curriculum_in_its_json() -> None:
    [plain] = make_tasks(GUESS, 1)
    assert "curriculum" not in json.loads(plain.to_json())  # rows of earlier runs unchanged
    [task] = make_tasks(f"{GUESS}-hard", 1, curriculum=Path("/runs/c.json"))
    assert task.curriculum == "/runs/c.json"
    assert EpisodeTask.from_json(task.to_json()) == task
    with pytest.raises(ValueError, match="set by its ladder"):
        EpisodeTask(GUESS, 0, "g", {"max_number": 5}, "/runs/c.json")
    with pytest.raises(ValueError, match="file path"):
        EpisodeTask(GUESS, 0, "g", {}, "")


def test_each_episode_plays_the_files_level_at_its_reset_and_is_observed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.json"
    SharedCurriculum.create(path, [KNOB], window=1, start_level=40)
    other_process = SharedCurriculum(path)  # stands for another worker of the same run
    pool = task_env_pool()
    tasks = make_tasks(f"{GUESS}-easy", 6, seed=3, curriculum=path)
    played = []
    for i, task in enumerate(tasks):
        before = shared_curriculum(path).levels[GUESS]
        episode = play(task, pool)
        tag = episode.turns[-1].info["curriculum"]
        assert tag == {"family": GUESS, "level": before}
        assert episode_metrics([episode])[f"metrics/curriculum/{GUESS}/level"] == before
        won = bool(episode.turns[-1].info.get("correct"))
        # window 1 and target 0.5: every result moves the level by one
        assert shared_curriculum(path).levels[GUESS] == before + (1 if won else -1)
        played.append(won)
        if i == 2:  # another worker's results move the level between two episodes
            other_process.record(GUESS, before + (1 if won else -1), False)
            other_process.record(GUESS, before + (1 if won else -1) - 1, False)
    assert other_process.results == len(tasks) + 2
    assert pool.num_idle == 1  # one env for the family, rebuilt at each level change


def test_live_episodes_observe_when_the_episode_ends(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    SharedCurriculum.create(path, [KNOB], window=1000, start_level=0)
    episodes = LiveEpisodes(task_env_pool())
    [task] = make_tasks(GUESS, 1, seed=1, curriculum=path)

    async def run() -> int:
        key = await episodes.start(task, ChatPromptBuilder(TOKENIZER))
        turns = 0
        while True:
            turns += 1
            assert shared_curriculum(path).results == 0  # nothing until the end
            if await episodes.play(key, await guess_one([], 16)):
                return turns

    assert asyncio.run(run()) >= 1
    assert shared_curriculum(path).results == 1


def test_a_curriculum_task_on_an_env_without_levels_raises() -> None:
    class Plain:  # a pool that does not build DifficultyEnvs
        def lease(self, task: EpisodeTask) -> Any:
            from xpgym.rollout.env_pool import EnvPool

            return EnvPool(lambda t: xpgym.make(GUESS), key=lambda t: "k").lease(task)

    task = EpisodeTask(GUESS, 0, "g", {}, "/nonexistent/c.json")
    with pytest.raises(TypeError, match="task_env_pool"):
        play(task, Plain())
