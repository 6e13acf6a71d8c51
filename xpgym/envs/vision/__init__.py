"""Vision-language envs: the observation is text with ``<image>`` placeholders, the images
are PNG data URLs in ``info["images"]`` (see `xpgym.envs.vision.images`).

Ids: ``vision:CountShapes-v0[-easy|-hard|-random]`` (generated pictures, offline).
"""

from __future__ import annotations

from xpgym.envs.common.presets import register_presets

__all__ = ["register_envs"]


def register_envs() -> None:
    """Register the vision ids; entry points are imported only by `xpgym.make`."""
    register_presets(
        "vision",
        "CountShapes",
        "xpgym.envs.vision.count_shapes:CountShapesEnv",
        "Count shapes of one colour and kind in a picture of 5-9, 4 colours (image in info).",
        "Count shapes of one colour and kind in a picture of 3-6, 3 colours.",
        "Count shapes by colour, kind or both in a picture of 8-14, 6 colours.",
    )
