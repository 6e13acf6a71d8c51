"""The trajectory viewer: ``python -m xpgym view <episodes.jsonl | eval dir | golden file>``.

Writes one self-contained static HTML file (no server, no network) that lists the episodes
(env id, seed, return, turns, status) with filters and search, and shows an opened episode
turn by turn: observation, action, reward, tool calls, truncation reasons, images, and a
token view coloured by the trainer's loss mask. docs/viewer.md describes the page.

* `xpgym.viewer.inputs`: reading the inputs into view episodes;
* `xpgym.viewer.tokens`: the token view (rows of `xpgym.training.layouts.episode_rows`);
* `xpgym.viewer.page`: the HTML (``page.js`` and ``page.css`` are inlined into it).
"""

from xpgym.viewer.inputs import load_view_episodes
from xpgym.viewer.page import ViewerFile, render_html, write_viewer

__all__ = ["ViewerFile", "load_view_episodes", "render_html", "write_viewer"]
