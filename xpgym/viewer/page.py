"""The viewer's HTML: one self-contained static file with the episodes embedded.

The page needs no server and no network: its script (``page.js``) and style (``page.css``,
both package data) are inlined, the episodes are JSON in a
``<script type="application/json" id="xpgym-data">`` block, and images are data URLs. A
Content-Security-Policy meta tag allows exactly the inlined script and style (by hash) and
``data:`` images: nothing is fetched, and script planted in the data could not run even if it
reached the DOM. Model text is escaped twice over: in the JSON block ``<``, ``>`` and ``&``
are written as ``\\u003c``, ``\\u003e``, ``\\u0026`` (a ``</script>`` in an action cannot
end the block), and the script inserts text with ``textContent`` only.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from xpgym.viewer.inputs import ViewEpisode, load_view_episodes
from xpgym.viewer.tokens import load_decoder, token_view, vocabulary

__all__ = ["ViewerFile", "default_output", "embed_json", "render_html", "write_viewer"]

logger = logging.getLogger(__name__)

_MAX_SAFE_INTEGER = 2**53
_LONG_DIGITS = re.compile(r"\d{16}")


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
<header>
<h1>{title}</h1><span id="source">{source}</span>
<div id="controls">
<label>env <select id="env-filter"><option value="">all</option></select></label>
<label>status <select id="status-filter"><option value="">all</option>\
<option value="success">success</option><option value="failure">failure</option>\
<option value="error">error</option></select></label>
<input id="search" type="search" placeholder="search observations, actions, info" \
aria-label="search">
<span id="count"></span>
</div>
</header>
<main>
<section id="list-pane">
<div class="row head"><span>#</span><span>env</span><span>seed</span><span>return</span>\
<span>turns</span><span>status</span></div>
<div id="list"><div id="list-spacer"></div></div>
</section>
<section id="detail"><p class="hint">Select an episode.</p></section>
</main>
<script type="application/json" id="xpgym-data">{data}</script>
<script>{script}</script>
</body>
</html>
"""


@dataclass(frozen=True)
class ViewerFile:
    """What `write_viewer` wrote: the HTML `path` and the number of `episodes` in it."""

    path: Path
    episodes: int


def embed_json(data: Any) -> str:
    """`data` as JSON that is safe inside a ``<script>`` element: ``<``, ``>`` and ``&``
    appear only as ``\\u003c``, ``\\u003e``, ``\\u0026`` (JSON.parse reads them back).

    Raises:
        ValueError: `data` holds NaN or an infinity (JSON has neither).
    """
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def render_html(
    episodes: Sequence[ViewEpisode],
    *,
    title: str = "xpgym episodes",
    source: str = "",
    decode: Callable[[int], str] | None = None,
) -> str:
    """The viewer page for `episodes` (from `xpgym.viewer.inputs`). Integers beyond
    JavaScript's exact range (``|n| > 2**53``: derived seeds) are embedded as strings, so the
    page shows them digit for digit.

    Args:
        episodes: View episodes; their ``episode`` entries (when not `None`) feed the token
            view and are not embedded themselves.
        title: The page title.
        source: Where the episodes came from (shown under the title).
        decode: Token id -> text (`xpgym.viewer.tokens.load_decoder`); without it the token
            view shows ids.
    """
    tokens = [None if ep.get("episode") is None else token_view(ep["episode"]) for ep in episodes]
    data = {
        "title": title,
        "source": source,
        "episodes": _exact_in_javascript(
            [{k: v for k, v in ep.items() if k != "episode"} for ep in episodes]
        ),
        "tokens": tokens if any(view is not None for view in tokens) else None,
        "vocab": None,
    }
    if decode is not None and data["tokens"] is not None:
        data["vocab"] = vocabulary((view for view in tokens if view is not None), decode)
    assets = resources.files("xpgym.viewer")
    script = assets.joinpath("page.js").read_text(encoding="utf-8")
    css = assets.joinpath("page.css").read_text(encoding="utf-8")
    csp = (
        f"default-src 'none'; script-src '{_sha256(script)}'; style-src '{_sha256(css)}'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    return _TEMPLATE.format(
        csp=csp,
        title=html.escape(title),
        source=html.escape(source),
        css=css,
        data=embed_json(data),
        script=script,
    )


def default_output(source: str | Path) -> Path:
    """``results/viewer/<name>.html``: `source`'s directory name or file stem (an eval
    directory's ``episodes.jsonl`` is named after its directory)."""
    source = Path(source).resolve()
    if source.name == "episodes.jsonl" or source.is_dir():
        name = source.parent.name if source.name == "episodes.jsonl" else source.name
    else:
        name = source.stem
    return Path("results/viewer") / f"{name or 'episodes'}.html"


def write_viewer(
    source: str | Path,
    out: str | Path | None = None,
    *,
    tokenizer: str | None = None,
    title: str | None = None,
) -> ViewerFile:
    """Read `source` (see `xpgym.viewer.inputs.load_view_episodes`) and write the viewer.

    Args:
        source: An episodes JSONL file, an eval output directory (or its
            ``episodes.jsonl``), or a parity golden file.
        out: The HTML file to write (parent directories are created); default
            `default_output(source)`.
        tokenizer: A tokenizer directory or name for the token view's text
            (`xpgym.viewer.tokens.load_decoder`); without it the token view shows ids.
        title: The page title; default ``"xpgym: <source>"``.

    Raises:
        FileNotFoundError, ValueError: see `load_view_episodes`.
        ImportError, OSError: the tokenizer cannot be loaded.
    """
    episodes = load_view_episodes(source)
    decode = load_decoder(tokenizer) if tokenizer is not None else None
    path = Path(out) if out is not None else default_output(source)
    page = render_html(
        episodes, title=title or f"xpgym: {Path(source).name}", source=str(source), decode=decode
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    logger.info("wrote %s (%d episodes)", path, len(episodes))
    return ViewerFile(path=path, episodes=len(episodes))


def _exact_in_javascript(value: Any) -> Any:
    """`value` with every integer beyond 2**53 as a string of its digits (JavaScript would
    round it). Cheap when there is none; otherwise one JSON round trip hooking integers."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    if not _LONG_DIGITS.search(text):
        return value
    return json.loads(text, parse_int=_int_or_digits)


def _int_or_digits(digits: str) -> int | str:
    return digits if abs(int(digits)) > _MAX_SAFE_INTEGER else int(digits)


def _sha256(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")
