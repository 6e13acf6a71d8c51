"""xpgym.core.text: the middle cut (a length budget, or pieces cut elsewhere) and the end cut."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xpgym.core.text import join_cut, shorten_end, shorten_middle

NOTE = "<{cut} cut>"


def test_join_cut_writes_the_count_into_the_marker():
    assert join_cut("ab", "yz", 22, NOTE) == "ab<22 cut>yz"
    assert join_cut("a", "", 3, "[{cut} of {cut}]") == "a[3 of 3]"


@pytest.mark.parametrize("cut", [0, -1])
def test_join_cut_without_a_cut_is_the_pieces_alone(cut):
    assert join_cut("head", "tail", cut, NOTE) == "headtail"


def test_short_text_is_unchanged():
    assert shorten_middle("0123456789", 10, marker=NOTE) == "0123456789"
    assert shorten_middle("", 0, marker=NOTE) == ""


def test_middle_cut_hand_checked():
    # 26 letters into 20: the longest note "<26 cut>" has 8 characters, so 12 remain,
    # 8 (two thirds) for the start and 4 for the end; 26 - 12 = 14 are cut.
    text = "abcdefghijklmnopqrstuvwxyz"
    assert shorten_middle(text, 20, marker=NOTE) == "abcdefgh<14 cut>wxyz"


def test_marker_that_does_not_fit_is_all_that_is_left():
    assert shorten_middle("x" * 50, 5, marker=NOTE) == "<50 cut>"


@given(
    st.text(st.characters(blacklist_characters="<>"), max_size=300),
    st.integers(min_value=12, max_value=200),
)
def test_middle_cut_keeps_the_ends_and_counts_what_it_cut(text, max_chars):
    shortened = shorten_middle(text, max_chars, marker=NOTE)
    assert len(shortened) <= max_chars
    if len(text) <= max_chars:
        assert shortened == text
        return
    head, _, rest = shortened.partition("<")
    count, _, tail = rest.partition(" cut>")
    assert text.startswith(head)
    assert text.endswith(tail)
    assert len(head) + int(count) + len(tail) == len(text)
    assert abs(len(head) - 2 * len(tail)) <= 2  # two thirds of the room to the start


def test_python_tool_and_terminal_markers_round_trip_through_the_same_cut():
    # The two callers' formats, as their docstrings give them.
    assert join_cut("a\n", "z\n", 5, "\n...[{cut} characters cut]...\n") == (
        "a\n\n...[5 characters cut]...\nz\n"
    )
    assert join_cut("a\n", "z\n", 5, "\n[... {cut} bytes cut ...]\n") == (
        "a\n\n[... 5 bytes cut ...]\nz\n"
    )


def test_end_cut_hand_checked():
    assert shorten_end("abcdefghij", 10) == "abcdefghij"
    assert shorten_end("abcdefghijk", 10) == "abcdefg..."
    assert shorten_end("abcdefghijk", 6, marker=" [more]") == " [more"
    assert shorten_end("abcdefghijk", 0) == ""


@given(st.text(max_size=200), st.integers(min_value=0, max_value=120), st.text(max_size=8))
def test_end_cut_is_a_prefix_and_the_marker_within_the_budget(text, max_chars, marker):
    shortened = shorten_end(text, max_chars, marker=marker)
    if len(text) <= max_chars:
        assert shortened == text
    else:
        assert len(shortened) == max_chars
        kept = max(0, max_chars - len(marker))  # what the marker leaves of the text
        assert shortened[:kept] == text[:kept]
        assert marker.startswith(shortened[kept:])
