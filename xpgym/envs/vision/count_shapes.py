r"""CountShapes: count the shapes of a given colour and kind in a generated picture.

Episode rules:

* `reset()` draws a picture with `np_random`: a white square canvas with coloured circles,
  squares and triangles that never overlap or touch (each shape lies inside its own
  circle, and the circles are placed by rejection sampling at least `_GAP` pixels apart and
  from the border). Shapes are drawn without anti-aliasing, so every pixel is either
  background or exactly one shape's colour.
* The question asks for the number of shapes of one kind and colour ("How many red
  circles are in the image?"); the hard preset also asks for a kind in any colour ("How many
  circles ...") or a colour of any kind ("How many red shapes ..."). The answer is drawn
  first, uniformly from ``0..max_count``, and the picture is built to match it: that many
  shapes that fit the question, the rest of other kinds or colours. So the ground truth is
  exact by construction, and ``0`` is a possible answer.
* The observation is ``<image>`` (`xpgym.envs.vision.images.IMAGE_PLACEHOLDER`), a newline,
  the question and the instruction. The picture is in the reset info: ``info["images"]``,
  a one-element list holding a PNG data URL (see `xpgym.envs.vision.images`; decode with
  `decode_images(info)`).
* The answer is the integer in the last closed ``\boxed{}`` (rule in
  `xpgym.envs.common.answers`): optional spaces and sign, ASCII digits (``\boxed{3}``). It is
  compared exactly with the count; no grader process is involved.

Everything else (attempts, rewards, termination, ``info`` keys) is
`xpgym.envs.common.answer_env.BoxedAnswerEnv`'s: single-turn by default, reward 1.0 for the
right count, 0.0 for a wrong one (also for a box that does not hold an integer), and
``no_answer_reward`` (default 0.0, ``invalid_action=True``) without a box; with
``max_turns > 1`` a wrong count gets feedback and another attempt (no new image).

`reset()` info: ``images``, ``max_turns``, ``difficulty``, ``answer`` (the count), ``target``
(``{"color": str | None, "kind": str | None}``, `None` meaning any), ``size`` (canvas side,
pixels) and ``shapes``: one dict per shape, ``{"kind", "color", "x", "y", "r"}`` (centre and
radius of its circle, in pixels).

Difficulty presets (`DIFFICULTIES`): ``"easy"``: 224 px, 3-6 shapes, 3 colours, counts
0..3; ``"hard"``: 320 px, 8-14 smaller shapes, 6 colours, counts 0..6, all three question
forms. Without a difficulty: 256 px, 5-9 shapes, 4 colours, counts 0..4; ``"random"``
draws easy or hard at every reset.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, NamedTuple

from xpgym.core.optional import import_optional
from xpgym.envs.common.answer_env import BoxedAnswerEnv, GradeResult, Problem
from xpgym.envs.common.answers import last_boxed
from xpgym.envs.common.presets import resolve_presets
from xpgym.envs.vision.images import IMAGE_PLACEHOLDER, encode_image

__all__ = ["COLORS", "DIFFICULTIES", "KINDS", "CountShapesEnv", "Settings", "draw_shapes"]

COLORS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "blue": (30, 80, 220),
    "green": (30, 150, 60),
    "yellow": (235, 190, 0),
    "purple": (130, 50, 170),
    "orange": (245, 120, 0),
}
"""Colour names and their exact RGB values (the canvas is white, 255 255 255)."""

KINDS = ("circle", "square", "triangle")
BACKGROUND = (255, 255, 255)
_GAP = 3  # pixels between two shapes' circles, and between a circle and the border
_MAX_TRIES = 500  # placements tried per shape before the layout starts over
_MAX_LAYOUTS = 100
_INTEGER = re.compile(r"[+-]?\s*[0-9]{1,9}")


class Settings(NamedTuple):
    """One difficulty of `CountShapesEnv`."""

    size: int  # canvas width and height, pixels
    min_shapes: int
    max_shapes: int
    max_count: int  # the answer is drawn from 0..max_count
    num_colors: int  # the first colours of COLORS
    min_radius: int
    max_radius: int
    any_forms: bool  # also ask "how many circles" (any colour) and "how many red shapes"


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(224, 3, 6, 3, 3, 18, 28, any_forms=False),
    "hard": Settings(320, 8, 14, 6, 6, 11, 20, any_forms=True),
}
"""Presets selected by `CountShapesEnv(difficulty=...)`."""

_DEFAULT = Settings(256, 5, 9, 4, 4, 14, 24, any_forms=False)


def _matches(shape: dict[str, Any], target: dict[str, str | None]) -> bool:
    return all(target[key] in (None, shape[key]) for key in ("color", "kind"))


def draw_shapes(size: int, shapes: list[dict[str, Any]]) -> Any:
    """A ``size`` x ``size`` RGB `PIL.Image.Image` of `shapes` (dicts as in the reset info).

    Circles fill their circle; a square has half-side ``0.7 r`` and a triangle is equilateral
    with its corners on the circle, apex up, so every shape stays inside its circle.
    """
    image_module = import_optional(
        "PIL.Image", needed_by="vision envs", install='pip install "xpgym[vision]"'
    )
    draw_module = import_optional(
        "PIL.ImageDraw", needed_by="vision envs", install='pip install "xpgym[vision]"'
    )
    image = image_module.new("RGB", (size, size), BACKGROUND)
    draw = draw_module.Draw(image)
    for shape in shapes:
        x, y, r, fill = shape["x"], shape["y"], shape["r"], COLORS[shape["color"]]
        if shape["kind"] == "circle":
            draw.ellipse([x - r, y - r, x + r, y + r], fill=fill)
        elif shape["kind"] == "square":
            half = round(0.7 * r)
            draw.rectangle([x - half, y - half, x + half, y + half], fill=fill)
        else:
            dx, dy = round(r * 3**0.5 / 2), round(r / 2)
            draw.polygon([(x, y - r), (x + dx, y + dy), (x - dx, y + dy)], fill=fill)
    return image


class CountShapesEnv(BoxedAnswerEnv):
    """Count coloured shapes in a generated picture; see the module docstring.

    Args:
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"`` (see `DIFFICULTIES`).
        max_turns, instruction, no_answer_reward: See `BoxedAnswerEnv`.

    Raises:
        ValueError: unknown difficulty (and `BoxedAnswerEnv`'s errors).
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": "optional", "images": "info"}

    def __init__(self, difficulty: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.difficulty = difficulty
        self._presets = list(resolve_presets(difficulty, DIFFICULTIES, _DEFAULT).items())

    def _draw_problem(self, options: dict[str, Any] | None) -> Problem:
        rng = self.np_random
        name, settings = self._presets[int(rng.integers(len(self._presets)))]
        colors = list(COLORS)[: settings.num_colors]
        form = int(rng.integers(3)) if settings.any_forms else 0
        target: dict[str, str | None] = {
            "color": colors[int(rng.integers(len(colors)))] if form != 1 else None,
            "kind": KINDS[int(rng.integers(len(KINDS)))] if form != 2 else None,
        }
        count = int(rng.integers(settings.max_count + 1))
        total = max(count, int(rng.integers(settings.min_shapes, settings.max_shapes + 1)))
        attributes: list[dict[str, str]] = []
        while len(attributes) < total:
            shape = {
                "kind": KINDS[int(rng.integers(len(KINDS)))],
                "color": colors[int(rng.integers(len(colors)))],
            }
            if len(attributes) < count:
                shape.update({k: v for k, v in target.items() if v is not None})
            elif _matches(shape, target):
                continue  # a distractor must not fit the question
            attributes.append(shape)
        order = rng.permutation(total)
        shapes = [
            {**attributes[int(i)], **circle}
            for i, circle in zip(order, self._layout(settings, total), strict=True)
        ]
        info = {
            "difficulty": name,
            "answer": count,
            "target": dict(target),
            "shapes": shapes,
            "size": settings.size,
        }
        return Problem(f"{IMAGE_PLACEHOLDER}\n{_question(target)}", (str(count),), info)

    def _layout(self, settings: Settings, total: int) -> list[dict[str, int]]:
        """`total` non-overlapping circles in the canvas, by rejection sampling."""
        rng = self.np_random
        for _ in range(_MAX_LAYOUTS):
            circles: list[dict[str, int]] = []
            for _ in range(total):
                for _ in range(_MAX_TRIES):
                    r = int(rng.integers(settings.min_radius, settings.max_radius + 1))
                    low, high = r + _GAP, settings.size - r - _GAP
                    x, y = (int(v) for v in rng.integers(low, high, size=2))
                    if all(
                        (x - c["x"]) ** 2 + (y - c["y"]) ** 2 >= (r + c["r"] + _GAP) ** 2
                        for c in circles
                    ):
                        circles.append({"x": x, "y": y, "r": r})
                        break
                else:
                    break  # no room left: start the layout over
            if len(circles) == total:
                return circles
        raise RuntimeError(
            f"CountShapesEnv: could not place {total} shapes of radius up to "
            f"{settings.max_radius} on a {settings.size} px canvas; the settings are too crowded"
        )

    def _reset_info(self) -> dict[str, Any]:
        info = super()._reset_info()
        image = draw_shapes(info["size"], info["shapes"])
        return {"images": [encode_image(image)], **info}

    def _check(self, action: str) -> GradeResult:
        answer = last_boxed(action)
        if answer is None:
            return GradeResult(False, "no_answer", None)
        correct = bool(_INTEGER.fullmatch(answer)) and int(answer.replace(" ", "")) == int(
            self.problem.answers[0]
        )
        return GradeResult(correct, "graded", answer)

    def sample_random_action(self) -> str:
        r"""``\boxed{k}`` with `k` uniform in 0..6, drawn from `np_random`."""
        return f"\\boxed{{{int(self.np_random.integers(0, 7))}}}"


def _question(target: dict[str, str | None]) -> str:
    color, kind = target["color"], target["kind"]
    if color is None:
        return f"How many {kind}s are in the image, whatever their colour?"
    if kind is None:
        return f"How many {color} shapes are in the image (circles, squares and triangles)?"
    return f"How many {color} {kind}s are in the image?"
