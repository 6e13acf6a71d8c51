"""Vision-language envs: the observation is text with ``<image>`` placeholders, the images
are PNG data URLs in ``info["images"]`` (see `xpgym.envs.vision.images`).

Ids: ``vision:CountShapes-v0[-easy|-hard|-random]`` (generated pictures, offline).
"""

from __future__ import annotations

from xpgym.core.registry import register

__all__ = ["register_envs"]


def register_envs() -> None:
    """Register the vision ids; entry points are imported only by `xpgym.make`."""
    entry_point = "xpgym.envs.vision.count_shapes:CountShapesEnv"
    register(
        "vision:CountShapes-v0",
        entry_point,
        description="Count shapes of one colour and kind in a picture of 5-9 (image in info).",
    )
    register(
        "vision:CountShapes-v0-easy",
        entry_point,
        difficulty="easy",
        description="Count shapes of one colour and kind in a picture of 3-6, 3 colours.",
    )
    register(
        "vision:CountShapes-v0-hard",
        entry_point,
        difficulty="hard",
        description="Count shapes by colour, kind or both in a picture of 8-14, 6 colours.",
    )
    register(
        "vision:CountShapes-v0-random",
        entry_point,
        difficulty="random",
        description="CountShapes; easy or hard drawn at every reset.",
    )
