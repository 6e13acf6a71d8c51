"""`ResultCache`: the thread-safe LRU map of search results that `SearchTool` keeps."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from xpgym.core.tools.search.backend import SearchHit

__all__ = ["ResultCache"]


class ResultCache:
    """A thread-safe LRU map from a key to the hits found for it, with hit/miss counters.

    Args:
        capacity: Entries kept; the least recently used one goes beyond it. ``0`` keeps
            nothing (every `get` is a miss).
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._data: OrderedDict[Hashable, tuple[SearchHit, ...]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> tuple[SearchHit, ...] | None:
        """The hits stored for `key` (now the most recently used), or `None`; counted."""
        with self._lock:
            value = self._data.get(key)
            if value is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: Hashable, value: tuple[SearchHit, ...]) -> None:
        """Store `value` for `key`, evicting the least recently used entry beyond capacity."""
        if self.capacity <= 0:
            return
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.capacity:
                self._data.popitem(last=False)

    def stats(self) -> dict[str, int]:
        """``{"hits", "misses", "size", "capacity"}``."""
        with self._lock:
            return {
                "hits": self.hits,
                "misses": self.misses,
                "size": len(self._data),
                "capacity": self.capacity,
            }

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0
