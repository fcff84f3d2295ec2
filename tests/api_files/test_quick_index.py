"""The quick index: ordering, hints, the 8000-char cap and skipping oversized lines."""

from __future__ import annotations

from service.api_files.quick_index import QUICK_INDEX_MAX_CHARS, IndexEntry, quick_index

CLOSED = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}
INPUT = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}


def entry(name: str, inp: dict | None = None, out: dict | None = None, trusted: bool = True) -> IndexEntry:
    """Shorthand for an index entry."""
    return IndexEntry(name, inp, out, trusted)


def body(index: str) -> list[str]:
    """The tool lines of an index."""
    return [line for line in index.splitlines() if line.startswith("- ")]


def test_lines_show_hints_and_unknown_output():
    """Each tool gets `- name input -> output`, with `?` for unknown output."""
    index = quick_index([entry("read", INPUT, CLOSED), entry("write", INPUT, None)])
    assert body(index) == ["- read { path: string } -> { ok: boolean }", "- write { path: string } -> ?"]
    assert index.splitlines()[0].startswith("Enabled async tool globals")


def test_declared_outputs_first_then_alphabetical():
    """Tools with a complete output hint come first; each group is alphabetical."""
    index = quick_index([entry("b"), entry("z", out=CLOSED), entry("a"), entry("m", out=CLOSED)])
    assert [line.split()[1] for line in body(index)] == ["m", "z", "a", "b"]


def test_untrusted_tools_get_unknown_and_question_mark():
    """Client tools never show their schemas."""
    index = quick_index([entry("client_x", INPUT, CLOSED, trusted=False)])
    assert body(index) == ["- client_x unknown -> ?"]


def test_small_index_has_no_omission_footer():
    """When everything fits, the footer does not mention omitted tools."""
    index = quick_index([entry(f"t{n}") for n in range(5)])
    assert "omitted" not in index
    assert len(body(index)) == 5


def test_index_is_capped_at_8000_chars_and_counts_omitted():
    """A large catalog is packed within 8000 chars and the footer counts the omitted tools."""
    entries = [entry(f"tool_{n:04d}_" + "x" * 60) for n in range(400)]
    index = quick_index(entries)
    assert len(index) <= QUICK_INDEX_MAX_CHARS
    kept = len(body(index))
    assert 0 < kept < 400
    assert index.splitlines()[-1].startswith(f"{400 - kept} more tools omitted")
    assert "catalog.search(query)" in index.splitlines()[-1]


def test_oversized_line_is_skipped_not_the_tail():
    """One line too long to fit is skipped; later short lines are still listed."""
    huge_name = "a_" + "y" * 7990
    entries = [entry(huge_name), entry("b_short"), entry("c_short")]
    index = quick_index(entries)
    names = [line.split()[1] for line in body(index)]
    assert names == ["b_short", "c_short"]
    assert index.splitlines()[-1].startswith("1 more tool omitted")
    assert len(index) <= QUICK_INDEX_MAX_CHARS


def test_index_is_deterministic_regardless_of_input_order():
    """The same tools in any order give the same index."""
    entries = [entry(f"t{n}", out=CLOSED if n % 3 == 0 else None) for n in range(30)]
    assert quick_index(entries) == quick_index(list(reversed(entries)))
