"""OpenEnv's protocol over a `SessionStore`'s sessions (being written; see issue 26)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.routing import BaseRoute

if TYPE_CHECKING:
    from xpgym.remote.sessions import SessionStore

__all__ = ["openenv_routes"]


def openenv_routes(store: SessionStore) -> list[BaseRoute]:
    """The routes serving every allowed env id at ``/openenv/<env id>``."""
    return []
