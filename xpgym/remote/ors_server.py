"""ORS (the Open Reward Standard) over a `SessionStore`'s sessions (being written; see issue 26)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.routing import BaseRoute

if TYPE_CHECKING:
    from xpgym.remote.sessions import SessionStore

__all__ = ["ors_routes"]


def ors_routes(store: SessionStore) -> list[BaseRoute]:
    """The routes serving the ORS HTTP API at the root."""
    return []
