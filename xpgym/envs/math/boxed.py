r"""Find the final answer of a reply: the content of its last ``\boxed{...}``.

The rule, shared by the math and vision envs:

* ``\boxed{`` (optionally ``\boxed {``) opens a box; the box ends at the ``}`` that balances
  its ``{``. Braces inside count, so ``\boxed{\frac{1}{2}}`` holds ``\frac{1}{2}``; escaped
  braces ``\{`` and ``\}`` do not count, so ``\boxed{\{1, 2\}}`` holds ``\{1, 2\}``.
* The answer is the content of the box that *starts* last among the boxes that are closed;
  a box left open (``\boxed{12`` at the end of a cut-off reply) is ignored. A box nested in
  another starts after it, so ``\boxed{\boxed{5}}`` gives ``5``.
* The content is returned with surrounding whitespace stripped; an empty box gives ``""``.

One pass over the text, so a hostile reply of any length costs linear time.
"""

from __future__ import annotations

import re

__all__ = ["last_boxed"]

# A box opening, an escaped brace (skipped), or a plain brace, in that order of preference.
_TOKENS = re.compile(r"(\\boxed\s*\{)|\\[{}]|([{}])")


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
