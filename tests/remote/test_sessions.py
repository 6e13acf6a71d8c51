"""`xpgym.remote.sessions.SessionStore`: the protocol-neutral session store, driven directly."""

from __future__ import annotations

import asyncio
import threading

import pytest
from hang_guard import HANG_GUARD_S

from xpgym.remote.sessions import ServerError, SessionStore

GUESS = "game:GuessTheNumber-v0"


def test_a_cancelled_call_keeps_the_session_busy_until_its_env_call_returns():
    """The caller of a blocking env call is cancelled (its client went away); the next call to
    the same session must not start before the first env call returned."""
    release, order = threading.Event(), []

    def blocking(session):
        order.append("first started")
        assert release.wait(HANG_GUARD_S)
        order.append("first returned")

    def second(session):
        order.append("second ran")
        return "done"

    async def scenario():
        store = SessionStore(["game:*"], threads=4)
        session = await store.open_session(GUESS, {}, "client")
        first = asyncio.create_task(store.call(session, blocking))
        while not order:  # the env call is running on its worker thread
            await asyncio.sleep(0.01)
        first.cancel()
        follower = asyncio.create_task(store.call(session, second))
        await asyncio.sleep(0.1)
        assert order == ["first started"]  # the second call waits behind the cancelled one
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert await follower == "done"
        await store.close_session(session)

    asyncio.run(scenario())
    assert order == ["first started", "first returned", "second ran"]


def test_open_session_holds_the_limits_and_close_gives_the_slot_back():
    async def scenario():
        store = SessionStore(["game:*"], max_sessions=2, max_sessions_per_client=1)
        mine = await store.open_session(GUESS, {}, "a")
        with pytest.raises(ServerError) as per_client:
            await store.open_session(GUESS, {}, "a")
        assert (per_client.value.status, per_client.value.type_name) == (
            429,
            "TooManyClientSessions",
        )
        theirs = await store.open_session(GUESS, {}, "b")
        with pytest.raises(ServerError) as full:
            await store.open_session(GUESS, {}, "c")
        assert (full.value.status, full.value.type_name) == (503, "TooManySessions")
        with pytest.raises(ServerError) as not_allowed:
            await store.open_session("toolgym:EditDistance-v0-easy", {}, "c")
        assert not_allowed.value.status == 403
        assert store.session_for(mine.id, "a") is mine
        assert store.session_for(mine.id, "b") is None  # another client's is unknown to it
        await store.close_session(mine)
        assert store.session_for(mine.id, "a") is None
        again = await store.open_session(GUESS, {}, "a")
        for session in (theirs, again):
            await store.close_session(session)
        assert store.sessions == {}

    asyncio.run(scenario())
