"""Find the final answer in a model's text: the last ``<answer>...</answer>`` block.

`last_tagged` is total (any string in, `None` when there is no block) and linear in the
length of the text. The block is the **last complete** ``<tag>...</tag>``: the last closing
tag and the last opening tag before it (so in ``<answer>a <answer>b</answer>`` it is
``b``). Tags are matched exactly (lowercase, no attributes or spaces inside the brackets).
The content is returned stripped of surrounding whitespace; an empty block gives ``""``.

For ``\\boxed{...}`` answers see `xpgym.envs.math.boxed.last_boxed`.
"""

from __future__ import annotations

__all__ = ["last_tagged"]


def last_tagged(text: str, tag: str = "answer") -> str | None:
    """The stripped content of the last complete ``<tag>...</tag>`` block, else `None`."""
    close = text.rfind(f"</{tag}>")
    if close < 0:
        return None
    opening = f"<{tag}>"
    start = text.rfind(opening, 0, close)
    if start < 0:
        return None
    return text[start + len(opening) : close].strip()
