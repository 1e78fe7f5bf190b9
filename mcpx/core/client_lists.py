"""What a client keeps of a server's lists, how it pages them, and how it listens for their changes.

The client's list policy, pure (spec/client.md §5): ``mcpx.client`` performs
the requests, this module decides what they are and what is kept.

* **Paging** (every revision's server/utilities/pagination): a ``*/list``
  is read page by page, each request naming the previous page's
  ``nextCursor`` exactly as received, until a page has none.  ``Paging``
  gives the params of each request and gathers the items; a server that
  never stops paging is an error after ``MAX_PAGES`` pages.
* **How long a list may be kept**: a 2026-07-28 page carries ``ttlMs``
  (``CacheableResult``: "how long the client MAY cache this response before
  re-fetching"; 2026-07-28 server/utilities/caching); the list is kept for
  the shortest of its pages', and a page without one, or with a negative
  one, counts as 0 — "immediately stale".  A legacy server's list has none
  and is kept until the server says it changed.
* **What drops a list** (``ListCache.changed``): ``notifications/*/list_changed``
  drops the lists it names (``resources/list_changed`` both resource
  lists).  A change announced while a list was being read wins: that read
  is answered but not kept (``ListCache.store`` with the generation the read
  began under).
* **Listening** (2026-07-28 basic/patterns/subscriptions): one
  ``subscriptions/listen`` asks for the list changes the server declared
  (``listChanged``) and the resources subscribed, when it declared
  ``subscribe`` (``listen_filter``).  A listen the server ends after it
  lasted is opened again at once; one refused, dropped or ended within
  ``quick`` seconds is opened again after a wait that doubles each time, up
  to ``longest`` (``ListenBackoff``), so a server that ends every listen at
  once is not asked again at once.

Time is whatever monotonic clock the caller passes as ``now``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from .errors import LocalProtocolError

__all__ = ["DROPS", "LIST_KEYS", "MAX_PAGES", "ListCache", "ListenBackoff", "Paging", "listen_filter"]

LIST_KEYS: Final[Mapping[str, str]] = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}
"""The lists a client keeps, and the result key each one's items are under."""

DROPS: Final[Mapping[str, tuple[str, ...]]] = {
    "notifications/tools/list_changed": ("tools/list",),
    "notifications/prompts/list_changed": ("prompts/list",),
    "notifications/resources/list_changed": ("resources/list", "resources/templates/list"),
}
"""Which kept lists each list-change notification drops."""

MAX_PAGES: Final = 10_000
"""Pages of one list read before the server is taken never to stop paging."""

_Kept = tuple[list[Any], float]


class Paging:
    """One ``*/list`` read to its end: each request's params, the items, and how long they may be kept.

    ``next_params()`` gives the params of the next request, ``None`` once a
    page came without ``nextCursor``; ``take(page)`` each result in turn.
    ``items`` and ``keep`` (seconds, ``inf`` for a list kept until it
    changes) are the list's once it is done.  ``modern``: the server speaks
    2026-07-28, where a page without ``ttlMs`` may not be kept.
    """

    __slots__ = ("_cursor", "_pages", "done", "items", "keep", "key", "method", "modern", "params")

    def __init__(
        self, method: str, key: str, *, modern: bool, params: Mapping[str, Any] | None = None
    ) -> None:
        self.method = method
        self.key = key
        self.modern = modern
        self.params = dict(params or {})
        self.items: list[Any] = []
        self.keep = math.inf
        self.done = False
        self._cursor: Any = None
        self._pages = 0

    def next_params(self) -> dict[str, Any] | None:
        """The params of the next page's request; ``None`` when the list is read to its end."""
        if self.done:
            return None
        if self._pages >= MAX_PAGES:
            raise LocalProtocolError(f"{self.method} never stopped paging ({MAX_PAGES} pages read)")
        params = dict(self.params)
        if self._cursor is not None:
            params["cursor"] = self._cursor
        return params

    def take(self, page: Mapping[str, Any]) -> None:
        """The result of the request ``next_params()`` gave."""
        if self.done:
            raise LocalProtocolError(f"{self.method} is read to its end; no page was asked for")
        self._pages += 1
        self.items.extend(page.get(self.key) or [])
        ttl = page.get("ttlMs")
        if isinstance(ttl, int | float) and not isinstance(ttl, bool):
            self.keep = min(self.keep, max(ttl, 0) / 1000)
        elif self.modern:
            self.keep = 0.0
        cursor = page.get("nextCursor")
        if cursor:
            self._cursor = cursor
        else:
            self.done = True


class ListCache:
    """The lists a client keeps, each until its time runs out or the server says it changed.

    Before a read, ``kept(method, now)``: the kept list and until when, or
    ``None`` (read it).  A read begins under ``generation``, and its list is
    offered to ``store`` with that generation: a change announced meanwhile
    makes the answer one not to keep (``-inf``).  ``changed`` takes every
    notification; ``clear`` forgets everything (a renewed session lists
    afresh).
    """

    __slots__ = ("_kept", "generation")

    def __init__(self) -> None:
        self._kept: dict[str, _Kept] = {}
        self.generation = 0

    def kept(self, method: str, now: float) -> _Kept | None:
        """``method``'s kept list and until when it may be used, or ``None`` when it must be read."""
        found = self._kept.get(method)
        return found if found is not None and now < found[1] else None

    def store(self, method: str, items: list[Any], keep: float, generation: int, now: float) -> _Kept:
        """A list read to its end (``Paging``), begun under ``generation``: kept if it may be; until when."""
        if method not in LIST_KEYS:
            raise LocalProtocolError(f"{method} is not a list a client keeps; one of {', '.join(LIST_KEYS)}")
        if generation != self.generation:
            return items, -math.inf  # a change was announced while it was read
        until = now + keep
        if keep > 0:
            self._kept[method] = (items, until)
        return items, until

    def changed(self, notification: str) -> bool:
        """A notification from the server: whether it dropped a list (then reads under way are not kept)."""
        dropped = DROPS.get(notification)
        if not dropped:
            return False
        self.generation += 1
        for method in dropped:
            self._kept.pop(method, None)
        return True

    def clear(self) -> None:
        self._kept.clear()
        self.generation += 1


def listen_filter(capabilities: Mapping[str, Any], subscribed: frozenset[str] | set[str]) -> dict[str, Any]:
    """The ``notifications`` filter of a ``subscriptions/listen``: what the server declared, and the URIs subscribed."""
    wanted: dict[str, Any] = {}
    for cap, flag in (
        ("tools", "toolsListChanged"),
        ("prompts", "promptsListChanged"),
        ("resources", "resourcesListChanged"),
    ):
        declared = capabilities.get(cap)
        if isinstance(declared, Mapping) and declared.get("listChanged") is True:
            wanted[flag] = True
    resources = capabilities.get("resources")
    if subscribed and isinstance(resources, Mapping) and resources.get("subscribe") is True:
        wanted["resourceSubscriptions"] = sorted(subscribed)
    return wanted


class ListenBackoff:
    """How long to wait before opening ``subscriptions/listen`` again, after one ended.

    ``ended(completed=, lasted=)`` after each listen that ended by itself
    (not one closed because its filter changed): the seconds to wait.
    """

    __slots__ = ("delay", "first", "longest", "quick")

    def __init__(self, *, first: float = 1.0, longest: float = 30.0, quick: float = 5.0) -> None:
        if not 0 < first <= longest:
            raise ValueError("the first wait must be positive and no longer than the longest")
        self.first = first
        self.longest = longest
        self.quick = quick  # a listen ended sooner than this counts as a failure
        self.delay = first

    def ended(self, *, completed: bool, lasted: float) -> float:
        """The wait before the next listen: none after one that lasted, else longer each time."""
        if completed and lasted >= self.quick:
            self.delay = self.first
            return 0.0
        wait, self.delay = self.delay, min(self.delay * 2, self.longest)
        return wait
