"""Cut long text for observations: keep its start and end with a note of what was cut, or
keep its start with an end marker.

Both middle cuts of xpgym go through `join_cut`, which writes the note:

* `shorten_middle` cuts a whole string to a length budget, counting characters (the Python
  tool's stdout and stderr);
* text already cut elsewhere comes as its kept start, its kept end and the size of what was
  dropped, in the unit that was counted: the terminal env's command output is cut while it
  streams, inside the sandbox, counting bytes (``xpgym/envs/terminal/runner.py`` cannot
  import xpgym), and its host side calls `join_cut` with a bytes marker.

Each caller chooses its marker, so its documented observation format stays as it is.
"""

from __future__ import annotations

__all__ = ["CUT_PLACEHOLDER", "join_cut", "shorten_end", "shorten_middle"]

CUT_PLACEHOLDER = "{cut}"
"""Written in a marker where `join_cut` puts the size of what was cut."""


def join_cut(head: str, tail: str, cut: int, marker: str) -> str:
    """`head` + `marker` + `tail`, every ``{cut}`` of `marker` replaced by `cut`; just
    ``head + tail`` when nothing was cut (``cut <= 0``).

    Args:
        head: The kept start of the text.
        tail: The kept end of the text.
        cut: How much was dropped between them, in the marker's unit.
        marker: The note that stands where the text was cut, e.g.
            ``"\\n[... {cut} bytes cut ...]\\n"``.
    """
    if cut <= 0:
        return head + tail
    return head + marker.replace(CUT_PLACEHOLDER, str(cut)) + tail


def shorten_middle(text: str, max_chars: int, *, marker: str) -> str:
    """`text` if it has at most `max_chars` characters; else its start and its end around
    `marker` (see `join_cut`), the start getting two thirds of the room the marker leaves.

    The result has at most `max_chars` characters whenever the marker (with the number of
    characters cut) fits in `max_chars`; otherwise it is the marker alone.

    Args:
        text: The text.
        max_chars: The longest result, marker included.
        marker: The note standing for the cut characters, with ``{cut}`` where their number
            goes, e.g. ``"\\n...[{cut} characters cut]...\\n"``.
    """
    if len(text) <= max_chars:
        return text
    # Room left by the longest note this text can get (it has the most digits).
    room = max(0, max_chars - len(marker.replace(CUT_PLACEHOLDER, str(len(text)))))
    head = room * 2 // 3
    tail = room - head
    return join_cut(text[:head], text[len(text) - tail :], len(text) - head - tail, marker)


def shorten_end(text: str, max_chars: int, *, marker: str = "...") -> str:
    """`text` if it has at most `max_chars` characters; else its start followed by `marker`,
    exactly `max_chars` characters in all (a marker longer than that is cut too).

    Args:
        text: The text.
        max_chars: The longest result, marker included.
        marker: What ends a cut text.
    """
    if len(text) <= max_chars:
        return text
    return (text[: max(0, max_chars - len(marker))] + marker)[:max_chars]
