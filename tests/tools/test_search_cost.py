"""Catalog search cost is bounded: query caps, a per-view index, a per-cell search budget."""

from __future__ import annotations

import pytest

from service.tools import search
from service.tools.catalog import ClientTool, ToolCatalog
from service.tools.errors import SearchBudgetError, SearchQueryError
from service.tools.search import MAX_QUERY_CHARS, MAX_QUERY_TERMS, query_terms
from service.tools.session import CallSession
from tests.support.counters import count_calls

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


def test_query_over_the_length_cap_is_refused_before_any_work(monkeypatch) -> None:
    """A 6 MB query is refused before it is split into words, naming the length and the cap."""
    split = count_calls(monkeypatch, search, "tokens")
    with pytest.raises(SearchQueryError, match=rf"6000000 characters \(limit {MAX_QUERY_CHARS}\)"):
        query_terms("ab " * 2_000_000)
    assert split == [], "the over-long query was tokenised before it was refused"
    query_terms("parcel tracking")
    assert split == [("parcel tracking",)], "the counter sees the tokeniser"


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


def test_128_client_tools_and_a_maximal_query_build_the_index_once(make_tool, monkeypatch) -> None:
    """The index is built once per view: 21 maximal searches over 128 client tools build it once and
    agree (how fast a search is belongs to the benchmarks)."""
    built = count_calls(monkeypatch, search.SearchIndex, "__init__")
    view = _client_view(make_tool)
    query = _max_query()
    first = view.search(query, 50)
    for _ in range(20):
        assert view.search(query, 50) == first
    assert len(first) == 50
    assert [len(docs) for _, docs in built] == [129], built


def test_session_refuses_searches_past_its_budget(make_tool) -> None:
    """The search after max_searches rejects with search_budget_exceeded and is not counted."""
    session = CallSession(ToolCatalog.build([make_tool("native")]).view(), max_calls=5, max_searches=2)
    session.search("native")
    session.search("native")
    with pytest.raises(SearchBudgetError, match="already searched 2 times") as info:
        session.search("native")
    assert info.value.code == "search_budget_exceeded"
    assert session.search_count == 2
