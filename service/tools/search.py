"""Catalog search: exact callable spelling, then case-insensitive name match, else BM25 ranking.

A query is caller text, so its cost is bounded before any work: at most ``MAX_QUERY_CHARS``
characters and ``MAX_QUERY_TERMS`` distinct words, else ``SearchQueryError`` (the guest sees a
RangeError).  The term bags of the tools are built once per view (``SearchIndex``, the first
``_DESCRIPTION_WORDS`` words of each description), so one search costs O(tools x query terms)
dictionary lookups.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from service.tools.errors import SearchQueryError

__all__ = ["MAX_QUERY_CHARS", "MAX_QUERY_TERMS", "SearchDoc", "SearchIndex", "query_terms", "tokens"]

MAX_QUERY_CHARS = 512
MAX_QUERY_TERMS = 16

# Alphanumeric runs, split where a capital follows a lower-case letter or digit (camelCase).
_WORD = re.compile(r"[A-Z]+[a-z0-9]*|[a-z0-9]+")
_K1 = 1.2
_B = 0.75
# Name words say more about a tool than description words.
_NAME_WEIGHT = 3
# Words of a description that are indexed: the lead says what a tool does, and it bounds the
# index a cell builds over 128 client tools of 4 KiB descriptions to a few milliseconds.
_DESCRIPTION_WORDS = 256


@dataclass(frozen=True)
class SearchDoc:
    """The searchable text of one tool."""

    key: str  # callable name; also the tie-breaker
    name: str
    label: str
    description: str


def tokens(text: str) -> list[str]:
    """Lower-case word tokens; snake_case and camelCase split into parts; plurals folded."""
    return [_stem(word.lower()) for word in _WORD.findall(text)]


def _description_counts(text: str) -> Counter[str]:
    """Term counts of the first ``_DESCRIPTION_WORDS`` words, stemming each distinct word once.

    Words are looked for in the first ``8 * _DESCRIPTION_WORDS`` characters only.
    """
    counts: Counter[str] = Counter()
    for word, n in Counter(_WORD.findall(text, 0, 8 * _DESCRIPTION_WORDS)[:_DESCRIPTION_WORDS]).items():
        counts[_stem(word.lower())] += n
    return counts


def _stem(word: str) -> str:
    # Plural folding only: enough for "parcels" to find "parcel" without a stemmer dependency.
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def query_terms(query: str) -> list[str]:
    """Distinct terms of a query, in order; SearchQueryError past the caps."""
    if len(query) > MAX_QUERY_CHARS:
        raise SearchQueryError(
            f"catalog.search query is {len(query)} characters (limit {MAX_QUERY_CHARS}): "
            "search with a few words that name the tool or what it does"
        )
    terms = list(dict.fromkeys(tokens(query)))
    if len(terms) > MAX_QUERY_TERMS:
        raise SearchQueryError(
            f"catalog.search query has {len(terms)} distinct words (limit {MAX_QUERY_TERMS}): "
            "search with fewer, more specific words"
        )
    return terms


class SearchIndex:
    """BM25 term statistics of a fixed set of tools, built once."""

    def __init__(self, docs: Sequence[SearchDoc]) -> None:
        self._docs = list(docs)
        self._bags: list[Counter[str]] = []
        for d in self._docs:
            bag = _description_counts(d.description)
            for term in tokens(d.name) + tokens(d.key) + tokens(d.label):
                bag[term] += _NAME_WEIGHT
            self._bags.append(bag)
        self._lengths = [sum(bag.values()) or 1 for bag in self._bags]
        self._avg_len = (sum(sum(b.values()) for b in self._bags) / len(self._bags) or 1.0) if self._bags else 1.0
        self._doc_freq: Counter[str] = Counter()
        for bag in self._bags:
            self._doc_freq.update(bag.keys())
        self._by_key = {d.key: d for d in self._docs}
        self._by_folded: dict[str, list[str]] = {}
        for d in self._docs:
            for folded in {d.key.casefold(), d.name.casefold()}:
                self._by_folded.setdefault(folded, []).append(d.key)

    def rank(self, query: str) -> list[str]:
        """Keys of matching docs, best first; exact/case-insensitive name hits short-circuit ranking."""
        terms = query_terms(query)
        exact = [query] if query in self._by_key else []
        folded = query.strip().casefold()
        insensitive = sorted(k for k in self._by_folded.get(folded, ()) if k != query) if folded else []
        if exact or insensitive:
            return exact + insensitive
        return self._bm25(terms)

    def _bm25(self, terms: list[str]) -> list[str]:
        if not terms or not self._docs:
            return []
        n = len(self._docs)
        idf = {}
        for term in terms:
            df = self._doc_freq.get(term, 0)
            if df:
                idf[term] = math.log(1 + (n - df + 0.5) / (df + 0.5))
        if not idf:
            return []
        scored: list[tuple[float, str]] = []
        for d, bag, length in zip(self._docs, self._bags, self._lengths, strict=True):
            score = 0.0
            norm = _K1 * (1 - _B + _B * length / self._avg_len)
            for term, weight in idf.items():
                tf = bag.get(term, 0)
                if tf:
                    score += weight * tf * (_K1 + 1) / (tf + norm)
            if score > 0:
                scored.append((-round(score, 9), d.key))
        scored.sort()
        return [key for _, key in scored]
