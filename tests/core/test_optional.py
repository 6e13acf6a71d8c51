"""`xpgym.core.optional`: optional imports that say how to install what is missing."""

from __future__ import annotations

import sys

import pytest

from xpgym.core.optional import headless_pyplot


def test_headless_pyplot_is_pyplot_on_the_agg_backend() -> None:
    pytest.importorskip("matplotlib")
    plt = headless_pyplot(needed_by="this test", install="pip install matplotlib")
    assert plt.__name__ == "matplotlib.pyplot"
    assert plt.get_backend().lower() == "agg"


def test_headless_pyplot_names_the_caller_and_the_install_when_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import raises ImportError
    with pytest.raises(ImportError, match=r"the plot needs matplotlib; install it with pip x"):
        headless_pyplot(needed_by="the plot", install="pip x")
