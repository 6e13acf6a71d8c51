r"""Find the final answer in a model's text: the last ``<answer>...</answer>`` block, or the
content of the last ``\boxed{...}``.

Both finders are total (any string in, `None` when there is no answer) and linear in the
length of the text, so a hostile reply of any length costs linear time, and both return
the answer stripped of surrounding whitespace (an empty block or box gives ``""``).

`last_tagged`: the block is the **last complete** ``<tag>...</tag>``: the last closing tag
and the last opening tag before it (so in ``<answer>a <answer>b</answer>`` it is ``b``).
Tags are matched exactly (lowercase, no attributes or spaces inside the brackets).

`last_boxed`, the rule shared by the math, vision and ReasoningGym envs:

* ``\boxed{`` (optionally ``\boxed {``) opens a box; the box ends at the ``}`` that balances
  its ``{``. Braces inside count, so ``\boxed{\frac{1}{2}}`` holds ``\frac{1}{2}``; escaped
  braces ``\{`` and ``\}`` do not count, so ``\boxed{\{1, 2\}}`` holds ``\{1, 2\}``.
* The answer is the content of the box that *starts* last among the boxes that are closed;
  a box left open (``\boxed{12`` at the end of a cut-off reply) is ignored. A box nested in
  another starts after it, so ``\boxed{\boxed{5}}`` gives ``5``.
"""

from __future__ import annotations

import re

__all__ = ["last_boxed", "last_tagged"]

# A box opening, an escaped brace (skipped), or a plain brace, in that order of preference.
_TOKENS = re.compile(r"(\\boxed\s*\{)|\\[{}]|([{}])")


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


def last_boxed(text: str) -> str | None:
    r"""The stripped content of the last closed ``\boxed{...}`` in `text`, or `None` if none.

    See the module docstring for the exact rule.
    """
    # One entry per open brace: the index where a box's content starts, or -1 for a plain brace.
    open_braces: list[int] = []
    best_start = -1
    best: str | None = None
    for match in _TOKENS.finditer(text):
        if match.group(1) is not None:
            open_braces.append(match.end())
        elif match.group(2) == "{":
            open_braces.append(-1)
        elif match.group(2) == "}" and open_braces:
            content_start = open_braces.pop()
            if content_start > best_start:
                best_start = content_start
                best = text[content_start : match.start()].strip()
    return best
