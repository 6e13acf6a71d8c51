"""TRL's rollout_func under a difficulty curriculum (`make_rollout_func(curriculum=...)`): each
call plays the scheduler's current level, and a training call's episodes move it."""

from __future__ import annotations

import types
from collections import defaultdict

import pytest

pytest.importorskip("xpgym.adapters.trl", reason="needs trl", exc_type=ImportError)
pytest.importorskip("transformers", reason="the tiny model needs transformers")

import xpgym
from xpgym.adapters.trl import make_rollout_func
from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
from xpgym.rollout.curriculum import PresetLadder, SuccessRateScheduler
from xpgym.rollout.runner import EpisodeTask, make_tasks
from xpgym.rollout.shared_curriculum import SharedCurriculum

FAMILY = "game:GuessTheNumber-v0"


@pytest.fixture(scope="module")
def tiny() -> tuple[object, object]:
    tokenizer = build_tiny_tokenizer(env_corpus(xpgym.make(FAMILY), episodes=2))
    return tokenizer, build_tiny_model(tokenizer, seed=0)


def stand_in_trainer(tiny, *, training: bool) -> types.SimpleNamespace:
    """What `make_rollout_func` reads of TRL's GRPOTrainer, around the tiny model."""
    tokenizer, model = tiny
    model.train(training)
    return types.SimpleNamespace(
        accelerator=types.SimpleNamespace(unwrap_model=lambda m: m, process_index=0),
        model=model,
        processing_class=tokenizer,
        temperature=1.0,
        max_completion_length=None,
        state=types.SimpleNamespace(global_step=0),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
    )


class Recording(SuccessRateScheduler):
    """Keeps the level of every episode it observes."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.played: list[int] = []

    def observe(self, episodes):
        self.played += [e.turns[-1].info["curriculum"]["level"] for e in episodes]
        super().observe(episodes)


def test_each_training_call_plays_the_current_level_and_moves_it(tiny):
    scheduler = Recording(
        [PresetLadder(FAMILY)], window=2, start_level=2, success=lambda episode: False
    )
    rollout = make_rollout_func(max_new_tokens=2, max_turns=2, curriculum=scheduler)
    trainer = stand_in_trainer(tiny, training=True)
    tasks = [t.to_json() for t in make_tasks(f"{FAMILY}-hard", 2)]  # any id of the family
    for _ in range(3):
        rollout(tasks, trainer)
    # every episode fails: one level down per call, bounded at 0
    assert scheduler.played == [2, 2, 1, 1, 0, 0]
    assert trainer._metrics["train"][f"curriculum/{FAMILY}/level"] == [1.0, 0.0, 0.0]


def test_an_eval_call_plays_the_level_without_moving_it(tiny):
    scheduler = Recording([PresetLadder(FAMILY)], window=1, start_level=1)
    rollout = make_rollout_func(max_new_tokens=2, max_turns=2, curriculum=scheduler)
    trainer = stand_in_trainer(tiny, training=False)
    rollout([t.to_json() for t in make_tasks(FAMILY, 2)], trainer)
    assert scheduler.played == []
    assert scheduler.levels == {FAMILY: 1}
    # the episodes report the level they played (their metrics); the scheduler logs nothing
    assert dict(trainer._metrics["eval"]) == {f"metrics/curriculum/{FAMILY}/level": [1.0]}


def test_a_task_with_env_kwargs_is_refused_under_a_curriculum(tiny):
    scheduler = SuccessRateScheduler([PresetLadder(FAMILY)])
    rollout = make_rollout_func(max_new_tokens=2, max_turns=2, curriculum=scheduler)
    task = EpisodeTask(FAMILY, seed=0, group_id="g", env_kwargs={"max_number": 5})
    with pytest.raises(ValueError, match="set by its ladder"):
        rollout([task.to_json()], stand_in_trainer(tiny, training=True))


def test_tasks_naming_a_shared_curriculum_play_and_feed_it(tiny, tmp_path):
    """Several TRL processes share one curriculum when the tasks name its file: every episode
    plays the file's level and feeds it, whichever call played it."""
    path = tmp_path / "curriculum.json"
    shared = SharedCurriculum.create(path, [PresetLadder(FAMILY)], window=100, start_level=2)
    rollout = make_rollout_func(max_new_tokens=2, max_turns=2)
    tasks = [t.to_json() for t in make_tasks(f"{FAMILY}-easy", 3, curriculum=path)]
    rollout(tasks, stand_in_trainer(tiny, training=True))
    trainer = stand_in_trainer(tiny, training=True)
    rollout(tasks, trainer)
    assert shared.results == 6
    assert trainer._metrics["train"][f"metrics/curriculum/{FAMILY}/level"] == [2.0]
    with pytest.raises(ValueError, match="name a curriculum file"):
        make_rollout_func(max_new_tokens=2, curriculum=shared)(tasks, trainer)
