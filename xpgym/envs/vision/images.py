"""How vision envs hand images over: ``info["images"]``, a list of PNG data URLs.

A vision env puts the images it shows in ``info["images"]`` (from `reset()`, and from any
`step()` that shows a new one), each as a string ``"data:image/png;base64,<PNG bytes>"``, in
the order of the ``<image>`` placeholders in the observation text. Why strings:

* they survive ``json.dumps``/``json.loads`` unchanged, so `xpgym.core.trajectory.Episode`
  JSON round trips (which accept only JSON types in ``Turn.info``) keep them;
* OpenAI-style chat messages and vLLM take them as they are
  (``{"type": "image_url", "image_url": {"url": data_url}}``);
* trainers that want PIL images (verl's ``multi_modal_data={"image": [...]}``, Hugging Face
  processors) get them with `decode_images(info)`.

`encode_image` and `decode_image` convert one image; Pillow is needed for both
(``pip install "xpgym[vision]"``).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from xpgym.core.optional import import_optional

if TYPE_CHECKING:
    from PIL.Image import Image

__all__ = ["DATA_URL_PREFIX", "IMAGE_PLACEHOLDER", "decode_image", "decode_images", "encode_image"]

DATA_URL_PREFIX = "data:image/png;base64,"
IMAGE_PLACEHOLDER = "<image>"
"""Marks where an image goes in the observation text (one per entry of ``info["images"]``)."""


def _pil_image() -> Any:
    return import_optional(
        "PIL.Image", needed_by="vision envs", install='pip install "xpgym[vision]"'
    )


def encode_image(image: Image) -> str:
    """`image` as a PNG data URL (``"data:image/png;base64,..."``)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return DATA_URL_PREFIX + base64.b64encode(buffer.getvalue()).decode("ascii")


def decode_image(data_url: str) -> Image:
    """The PIL image in a PNG data URL made by `encode_image` (loaded, RGB as stored).

    Raises:
        ValueError: `data_url` is not a ``data:image/png;base64,`` URL.
    """
    if not isinstance(data_url, str) or not data_url.startswith(DATA_URL_PREFIX):
        raise ValueError(f"expected a {DATA_URL_PREFIX!r} URL, got {data_url!r:.60}")
    image = _pil_image().open(io.BytesIO(base64.b64decode(data_url[len(DATA_URL_PREFIX) :])))
    image.load()
    return image


def decode_images(info: Mapping[str, Any]) -> list[Image]:
    """The PIL images in ``info["images"]`` (an empty list if there are none)."""
    return [decode_image(url) for url in info.get("images", ())]
