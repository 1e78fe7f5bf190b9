"""The client's list policy (``mcpx.core.client_lists``): paging, how long a list is kept, what drops it, listening."""

from __future__ import annotations

import math

import pytest

from mcpx.core import LocalProtocolError
from mcpx.core.client_lists import MAX_PAGES, ListCache, ListenBackoff, Paging, listen_filter


def read(paging: Paging, pages: list[dict[str, object]]) -> list[dict[str, object]]:
    """Feed ``pages`` in turn; the params each request was given."""
    asked = []
    for page in pages:
        params = paging.next_params()
        assert params is not None
        asked.append(params)
        paging.take(page)
    return asked


def test_pages_are_read_by_the_cursor_each_gave_until_one_gives_none() -> None:
    paging = Paging("tools/list", "tools", modern=False, params={"_meta": {"k": 1}})
    asked = read(
        paging,
        [
            {"tools": [{"name": "a"}], "nextCursor": "c1"},
            {"tools": [{"name": "b"}], "nextCursor": {"opaque": True}},
            {"tools": [{"name": "c"}]},
        ],
    )
    assert asked == [
        {"_meta": {"k": 1}},
        {"_meta": {"k": 1}, "cursor": "c1"},
        {"_meta": {"k": 1}, "cursor": {"opaque": True}},  # passed back exactly as received
    ]
    assert [t["name"] for t in paging.items] == ["a", "b", "c"]
    assert paging.done and paging.next_params() is None
    assert paging.keep == math.inf  # a legacy server's list: kept until it says it changed
    with pytest.raises(LocalProtocolError):
        paging.take({"tools": []})


def test_a_modern_list_is_kept_for_its_shortest_ttl_and_a_page_without_one_is_stale_at_once() -> None:
    paging = Paging("prompts/list", "prompts", modern=True)
    read(paging, [{"prompts": [], "ttlMs": 30_000, "nextCursor": "x"}, {"prompts": [], "ttlMs": 5_000}])
    assert paging.keep == 5.0
    stale = Paging("prompts/list", "prompts", modern=True)
    read(stale, [{"prompts": [], "ttlMs": 30_000, "nextCursor": "x"}, {"prompts": []}])
    assert stale.keep == 0.0
    negative = Paging("prompts/list", "prompts", modern=True)
    read(negative, [{"prompts": [], "ttlMs": -1}])
    assert negative.keep == 0.0
    boolean = Paging("prompts/list", "prompts", modern=True)
    read(boolean, [{"prompts": [], "ttlMs": True}])  # not a number: as if absent
    assert boolean.keep == 0.0


def test_a_server_that_never_stops_paging_is_an_error() -> None:
    paging = Paging("resources/list", "resources", modern=False)
    for n in range(MAX_PAGES):
        assert paging.next_params() is not None
        paging.take({"resources": [], "nextCursor": str(n)})
    with pytest.raises(LocalProtocolError, match="never stopped paging"):
        paging.next_params()


def test_a_kept_list_serves_until_its_time_runs_out() -> None:
    cache = ListCache()
    items = [{"name": "a"}]
    assert cache.kept("tools/list", now=10.0) is None
    assert cache.store("tools/list", items, 5.0, cache.generation, now=10.0) == (items, 15.0)
    assert cache.kept("tools/list", now=14.9) == (items, 15.0)
    assert cache.kept("tools/list", now=15.0) is None
    zero = cache.store("prompts/list", [], 0.0, cache.generation, now=20.0)
    assert zero == ([], 20.0) and cache.kept("prompts/list", now=20.0) is None  # ttlMs 0: never kept
    with pytest.raises(LocalProtocolError):
        cache.store("tools/call", [], 1.0, cache.generation, now=0.0)


def test_list_changed_drops_what_it_names_and_a_read_under_way_is_not_kept() -> None:
    cache = ListCache()
    for method in ("tools/list", "resources/list", "resources/templates/list"):
        cache.store(method, [method], math.inf, cache.generation, now=0.0)
    assert cache.changed("notifications/message") is False
    assert cache.changed("notifications/resources/list_changed") is True
    assert cache.kept("resources/list", 1.0) is None and cache.kept("resources/templates/list", 1.0) is None
    assert cache.kept("tools/list", 1.0) == (["tools/list"], math.inf)
    began = cache.generation
    cache.changed("notifications/tools/list_changed")  # announced while a read was under way
    assert cache.store("tools/list", ["old"], math.inf, began, now=2.0) == (["old"], -math.inf)
    assert cache.kept("tools/list", 3.0) is None
    cache.store("prompts/list", [], math.inf, cache.generation, now=0.0)
    cache.clear()
    assert cache.kept("prompts/list", 1.0) is None


def test_the_listen_filter_asks_for_what_the_server_declared() -> None:
    caps = {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": False},
        "resources": {"subscribe": True},
    }
    assert listen_filter(caps, set()) == {"toolsListChanged": True}
    assert listen_filter(caps, {"b://2", "a://1"}) == {
        "toolsListChanged": True,
        "resourceSubscriptions": ["a://1", "b://2"],
    }
    unsubscribable = {"resources": {"listChanged": True}}
    assert listen_filter(unsubscribable, {"a://1"}) == {"resourcesListChanged": True}


def test_a_listen_ended_at_once_is_reopened_less_often_each_time_and_at_once_after_one_that_lasted() -> None:
    backoff = ListenBackoff(first=1.0, longest=8.0, quick=5.0)
    waits = [backoff.ended(completed=False, lasted=0.1) for _ in range(5)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert backoff.ended(completed=True, lasted=0.5) == 8.0  # ended within `quick`: a failure too
    assert backoff.ended(completed=True, lasted=60.0) == 0.0  # it lasted: at once, and the wait starts over
    assert backoff.ended(completed=False, lasted=0.0) == 1.0
    with pytest.raises(ValueError):
        ListenBackoff(first=0.0)
