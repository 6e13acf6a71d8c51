"""CountShapes: the picture matches its ground truth pixel by pixel, images survive JSON,
episodes, seeding and presets."""

from __future__ import annotations

import json
import pickle
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpgym
from xpgym.core.checks import check_env
from xpgym.core.trajectory import Episode, Turn

pytest.importorskip("PIL", reason="vision envs draw with Pillow (xpgym[vision])")

from xpgym.envs.vision.count_shapes import (
    BACKGROUND,
    COLORS,
    DIFFICULTIES,
    CountShapesEnv,
)
from xpgym.envs.vision.images import decode_image, decode_images, encode_image

DIFFS = [None, "easy", "hard", "random"]


def components(pixels: np.ndarray) -> list[tuple[tuple[int, int, int], list[tuple[int, int]]]]:
    """Connected regions (4-neighbour) of equal non-background colour: (colour, pixels)."""
    height, width, _ = pixels.shape
    seen = np.all(pixels == BACKGROUND, axis=2)
    regions = []
    for y0, x0 in zip(*np.nonzero(~seen), strict=True):
        if seen[y0, x0]:
            continue
        color = tuple(int(c) for c in pixels[y0, x0])
        stack, region = [(int(y0), int(x0))], []
        seen[y0, x0] = True
        while stack:
            y, x = stack.pop()
            region.append((y, x))
            for ny, nx in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):
                if (
                    0 <= ny < height
                    and 0 <= nx < width
                    and not seen[ny, nx]
                    and tuple(pixels[ny, nx]) == color
                ):
                    seen[ny, nx] = True
                    stack.append((ny, nx))
        regions.append((color, region))
    return regions


def classify(region: list[tuple[int, int]]) -> str:
    """Circle, square or triangle, from how much of its bounding box a region fills
    (pi/4 = 0.785, 1 and 1/2)."""
    ys, xs = zip(*region, strict=True)
    fill = len(region) / ((max(ys) - min(ys) + 1) * (max(xs) - min(xs) + 1))
    return "triangle" if fill < 0.65 else "circle" if fill < 0.92 else "square"


def shapes_in_picture(info: dict) -> Counter:
    """(colour name, kind) -> count, read from the pixels alone."""
    (image,) = decode_images(info)
    pixels = np.asarray(image.convert("RGB"))
    names = {rgb: name for name, rgb in COLORS.items()}
    return Counter((names[color], classify(region)) for color, region in components(pixels))


@pytest.mark.parametrize("difficulty", DIFFS)
def test_the_answer_matches_the_pixels(difficulty):
    env = CountShapesEnv(difficulty)
    answers = set()
    for seed in range(8):
        obs, info = env.reset(seed=seed)
        found = shapes_in_picture(info)
        target = info["target"]
        count = sum(
            n
            for (color, kind), n in found.items()
            if target["color"] in (None, color) and target["kind"] in (None, kind)
        )
        assert count == info["answer"], f"seed {seed}: {obs!r}"
        assert sum(found.values()) == len(info["shapes"])  # no shape merged or hidden
        assert found == Counter((s["color"], s["kind"]) for s in info["shapes"])
        answers.add(count)
    assert len(answers) > 1


def test_recorded_shapes_never_overlap_and_stay_inside():
    for difficulty in ("easy", "hard"):
        env = CountShapesEnv(difficulty)
        for seed in range(40):
            _, info = env.reset(seed=seed)
            shapes, size = info["shapes"], info["size"]
            for i, a in enumerate(shapes):
                assert a["r"] < a["x"] < size - a["r"]
                assert a["r"] < a["y"] < size - a["r"]
                for b in shapes[i + 1 :]:
                    assert (a["x"] - b["x"]) ** 2 + (a["y"] - b["y"]) ** 2 > (a["r"] + b["r"]) ** 2


def test_question_text_matches_the_target():
    env = CountShapesEnv("hard")
    forms = set()
    for seed in range(40):
        obs, info = env.reset(seed=seed)
        color, kind = info["target"]["color"], info["target"]["kind"]
        assert obs.startswith("<image>\nHow many ")
        if color is None:
            assert f"How many {kind}s are in the image, whatever their colour?" in obs
        elif kind is None:
            assert f"How many {color} shapes are in the image" in obs
        else:
            assert f"How many {color} {kind}s are in the image?" in obs
        forms.add((color is None, kind is None))
    assert forms == {(False, False), (True, False), (False, True)}


def test_correct_wrong_and_missing_answers():
    env = CountShapesEnv()
    _, info = env.reset(seed=1)
    assert info["answer"] == 3  # checked by eye: three blue squares
    assert env.step("I count three: \\boxed{3}")[1:4] == (1.0, True, False)
    env.reset(seed=1)
    _, reward, _, _, step_info = env.step("\\boxed{ +3 }")
    assert (reward, step_info["correct"]) == (1.0, True)
    env.reset(seed=1)
    _, reward, _, _, step_info = env.step("\\boxed{three}")
    assert (reward, step_info["correct"], step_info["invalid_action"]) == (0.0, False, False)
    env.reset(seed=1)
    _, reward, terminated, _, step_info = env.step("3")
    assert (reward, terminated, step_info["invalid_action"]) == (0.0, True, True)
    assert "images" not in step_info  # no new image after reset


def test_multi_turn_gives_feedback_without_a_new_image():
    env = CountShapesEnv(max_turns=2)
    env.reset(seed=1)
    obs, reward, terminated, truncated, step_info = env.step("\\boxed{2}")
    assert obs == "Attempt 1/2: 2 is not correct. 1 attempt left; try again."
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert "images" not in step_info
    assert env.step("\\boxed{3}")[1:3] == (1.0, True)


def test_images_are_png_data_urls_that_survive_json():
    env = xpgym.make("vision:CountShapes-v0")
    obs, info = env.reset(seed=0)
    (url,) = info["images"]
    assert url.startswith("data:image/png;base64,")
    assert obs.count("<image>") == len(info["images"])
    turn = Turn(observation=obs, action="\\boxed{1}", reward=0.0, info=info)
    episode = Episode(env_id="vision:CountShapes-v0", seed=0, turns=[turn])
    restored = Episode.from_json(episode.to_json())
    assert restored == episode
    image = decode_image(restored.turns[0].info["images"][0])
    assert image.size == (256, 256)
    assert decode_image(encode_image(image)).tobytes() == image.tobytes()
    with pytest.raises(ValueError, match="data:image/png"):
        decode_image("http://example.com/x.png")


def test_same_seed_same_picture():
    a, b = CountShapesEnv("random"), CountShapesEnv("random")
    assert a.reset(seed=5) == b.reset(seed=5)
    assert a.reset(seed=6)[1]["images"] != a.reset(seed=5)[1]["images"]
    assert {a.reset(seed=s)[1]["difficulty"] for s in range(20)} == {"easy", "hard"}


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_presets(difficulty):
    preset = DIFFICULTIES[difficulty]
    env = CountShapesEnv(difficulty)
    for seed in range(20):
        _, info = env.reset(seed=seed)
        assert info["size"] == preset.size
        assert preset.min_shapes <= len(info["shapes"]) <= preset.max_shapes
        assert 0 <= info["answer"] <= preset.max_count
        assert {s["color"] for s in info["shapes"]} <= set(list(COLORS)[: preset.num_colors])


@settings(max_examples=200, deadline=None)
@given(st.text() | st.builds(lambda s: f"\\boxed{{{s}}}", st.text()))
def test_any_text_is_a_valid_step(action):
    env = CountShapesEnv("easy")
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs == ""
    assert reward in (0.0, 1.0)
    assert (terminated, truncated) == (True, False)
    assert type(info["correct"]) is bool
    assert info["invalid_action"] is (info["parsed_action"] is None)


@pytest.mark.parametrize("difficulty", DIFFS)
def test_check_env_passes(difficulty):
    check_env(CountShapesEnv(difficulty))


def test_set_state_round_trip():
    env = CountShapesEnv("hard", max_turns=3)
    env.reset(seed=2)
    env.step("\\boxed{-1}")  # a count is never negative
    snapshot = env.get_state()
    frozen = pickle.dumps(snapshot)
    actions = ["no box", env.sample_random_action()]
    first = [env.step(action) for action in actions]
    other = CountShapesEnv("hard", max_turns=3)
    other.set_state(snapshot)
    assert [other.step(action) for action in actions] == first
    assert first[1][4]["turn"] == 3
    assert pickle.dumps(snapshot) == frozen
    json.dumps(snapshot["problem_info"])  # the ground truth is JSON-compatible


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({"difficulty": "medium"}, ValueError), ({"max_turns": 0}, ValueError)],
)
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error, match=r"difficulty|max_turns"):
        CountShapesEnv(**kwargs)
