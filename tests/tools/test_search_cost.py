"""Catalog search cost is bounded: query caps, a per-view index, a per-cell search budget."""

from __future__ import annotations

import time

import pytest

from service.tools.catalog import ClientTool, ToolCatalog
from service.tools.session import CallSession
from service.tools.errors import SearchBudgetError
from service.tools.errors import SearchQueryError
from service.tools.search import MAX_QUERY_CHARS, MAX_QUERY_TERMS, query_terms

WORDS = [f"w{i}x" for i in range(64)]


def _client_view(make_tool, tools: int = 128):
    description = " ".join(WORDS * 16)[:4096]
    client = [ClientTool(f"client{i}", description) for i in range(tools)]
    return ToolCatalog.build([make_tool("native", description="parcel tracking")]).view(client_tools=client)


def _max_query() -> str:
    words = " ".join(WORDS[:MAX_QUERY_TERMS])
    return ((words + " ") * (MAX_QUERY_CHARS // (len(words) + 1))).ljust(MAX_QUERY_CHARS)


def test_query_at_the_caps_is_accepted() -> None:
    """512 characters with 16 distinct words is a valid query."""
    query = _max_query()
    assert len(query) == MAX_QUERY_CHARS
    assert len(query_terms(query)) == MAX_QUERY_TERMS


def test_query_over_the_length_cap_is_refused_before_any_work() -> None:
    """A 6 MB query is refused at once, naming the length and the cap."""
    start = time.perf_counter()
    with pytest.raises(SearchQueryError, match=rf"6000000 characters \(limit {MAX_QUERY_CHARS}\)"):
        query_terms("ab " * 2_000_000)
    assert time.perf_counter() - start < 0.1


def test_query_with_too_many_distinct_words_is_refused() -> None:
    """More than 16 distinct words is refused; repeated words count once."""
    assert query_terms("parcel " * 60) == ["parcel"]
    with pytest.raises(SearchQueryError, match=rf"17 distinct words \(limit {MAX_QUERY_TERMS}\)"):
        query_terms(" ".join(WORDS[:17]))


def test_view_search_raises_the_query_error(make_tool) -> None:
    """CatalogView.search applies the caps too, also when an exact name would match."""
    view = ToolCatalog.build([make_tool("native")]).view()
    with pytest.raises(SearchQueryError):
        view.search("native " + " ".join(WORDS[:20]))


def test_128_client_tools_and_a_maximal_query_take_milliseconds(make_tool) -> None:
    """The index is built once per view; each later search is a few milliseconds."""
    view = _client_view(make_tool)
    query = _max_query()
    start = time.perf_counter()
    first = view.search(query, 50)
    built = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(20):
        assert view.search(query, 50) == first
    per_search = (time.perf_counter() - start) / 20
    assert len(first) == 50
    assert built < 0.5, built
    assert per_search < 0.02, per_search


def test_session_refuses_searches_past_its_budget(make_tool) -> None:
    """The search after max_searches rejects with search_budget_exceeded and is not counted."""
    session = CallSession(ToolCatalog.build([make_tool("native")]).view(), max_calls=5, max_searches=2)
    session.search("native")
    session.search("native")
    with pytest.raises(SearchBudgetError, match="already searched 2 times") as info:
        session.search("native")
    assert info.value.code == "search_budget_exceeded"
    assert session.search_count == 2
