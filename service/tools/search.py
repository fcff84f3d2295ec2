"""Catalog search: exact callable spelling, then case-insensitive name match, else BM25 ranking."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["SearchDoc", "rank", "tokens"]

_WORD = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_K1 = 1.2
_B = 0.75
# Name words say more about a tool than description words.
_NAME_WEIGHT = 3


@dataclass(frozen=True)
class SearchDoc:
    """The searchable text of one tool."""

    key: str  # callable name; also the tie-breaker
    name: str
    label: str
    description: str


def tokens(text: str) -> list[str]:
    """Lower-case word tokens; snake_case and camelCase split into parts; plurals folded."""
    return [_stem(word.lower()) for word in _WORD.findall(_CAMEL.sub(" ", text))]


def _stem(word: str) -> str:
    # Plural folding only: enough for "parcels" to find "parcel" without a stemmer dependency.
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def rank(docs: Sequence[SearchDoc], query: str) -> list[str]:
    """Keys of matching docs, best first; exact/case-insensitive name hits short-circuit ranking."""
    exact = [d.key for d in docs if d.key == query]
    folded = query.strip().casefold()
    insensitive = sorted(
        d.key
        for d in docs
        if d.key not in exact and folded and folded in (d.key.casefold(), d.name.casefold())
    )
    if exact or insensitive:
        return exact + insensitive
    return _bm25(docs, tokens(query))


def _bm25(docs: Sequence[SearchDoc], query_terms: list[str]) -> list[str]:
    if not query_terms or not docs:
        return []
    bags: list[Counter[str]] = []
    for d in docs:
        name_terms = tokens(d.name) + tokens(d.key) + tokens(d.label)
        bags.append(Counter(name_terms * _NAME_WEIGHT + tokens(d.description)))
    avg_len = sum(sum(b.values()) for b in bags) / len(bags) or 1.0
    doc_freq: Counter[str] = Counter()
    for bag in bags:
        doc_freq.update(set(bag))
    n = len(docs)
    scored: list[tuple[float, str]] = []
    for d, bag in zip(docs, bags, strict=True):
        length = sum(bag.values()) or 1
        score = 0.0
        for term in set(query_terms):
            tf = bag.get(term, 0)
            if not tf:
                continue
            idf = math.log(1 + (n - doc_freq[term] + 0.5) / (doc_freq[term] + 0.5))
            score += idf * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * length / avg_len))
        if score > 0:
            scored.append((-round(score, 9), d.key))
    scored.sort()
    return [key for _, key in scored]
