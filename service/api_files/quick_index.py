"""The quick index: one bounded line per callable tool, for the exec description and catalog."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bridge.json_types import JsonObject
from service.api_files.hints import input_hint, output_hint

__all__ = ["QUICK_INDEX_MAX_CHARS", "IndexEntry", "quick_index"]

QUICK_INDEX_MAX_CHARS = 8000

_HEADER = (
    "Enabled async tool globals (descriptions are intentionally deferred):",
    "Each line is `callableName input -> output`; `-> ?` means unknown output.",
)
# Shorter than any "omitted" footer, so the packed path always omits at least one line.
_FOOTER_COMPLETE = "Call these globals directly with await."


@dataclass(frozen=True)
class IndexEntry:
    """What the index needs about one tool; untrusted tools never get hints."""

    callable_name: str
    input_schema: JsonObject | None
    output_schema: JsonObject | None
    trusted_output: bool


def quick_index(entries: Iterable[IndexEntry], max_chars: int = QUICK_INDEX_MAX_CHARS) -> str:
    """Render the index; lines that do not fit are skipped and counted in the footer."""
    lines = sorted(_lines(entries), key=lambda item: (not item[0], item[1]))
    body = [text for _, _, text in lines]
    full = "\n".join([*_HEADER, *body, _FOOTER_COMPLETE])
    if len(full) <= max_chars:
        return full
    # Reserve room for the widest footer this index could need, then pack greedily.
    budget = max_chars - len("\n".join(_HEADER)) - 1 - len(_omitted_footer(len(body)))
    kept: list[str] = []
    for text in body:
        cost = len(text) + 1
        if cost <= budget:
            kept.append(text)
            budget -= cost
    return "\n".join([*_HEADER, *kept, _omitted_footer(len(body) - len(kept))])


def _lines(entries: Iterable[IndexEntry]) -> list[tuple[bool, str, str]]:
    lines: list[tuple[bool, str, str]] = []
    for entry in entries:
        if entry.trusted_output:
            input_text = input_hint(entry.input_schema)
            output_text = output_hint(entry.output_schema)
        else:
            input_text, output_text = "unknown", None
        declared = output_text is not None
        text = f"- {entry.callable_name} {input_text} -> {output_text if declared else '?'}"
        lines.append((declared, entry.callable_name, text))
    return lines


def _omitted_footer(count: int) -> str:
    noun = "tool" if count == 1 else "tools"
    return f"{count} more {noun} omitted to fit this index; find them with catalog.search(query)."
