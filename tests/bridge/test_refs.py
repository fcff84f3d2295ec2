"""Reference descriptors: bounded size, shapes, previews and shrinking."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from bridge.errors import DescriptorError
from bridge.refs import DESCRIPTOR_MAX_BYTES, describe_reference, shrink_descriptor
from bridge.truncation import json_size

RID = "result_0f8fad5b-d9cb-469f-a165-70867728950e"


def describe(value: Any) -> dict[str, Any]:
    """Describe a value given as a Python object."""
    return describe_reference(RID, orjson.dumps(value).decode())


def deep(levels: int) -> Any:
    """A value nested `levels` objects deep."""
    value: Any = "leaf"
    for i in range(levels):
        value = {f"k{i}": value}
    return value


TOOL_RESULT = {
    "content": [{"type": "text", "text": "180 rows"}],
    "structuredContent": {
        "total": 180,
        "rows": [{"id": i, "name": f"row {i}", "tags": ["a", "b"]} for i in range(180)],
    },
    "isError": False,
}


@pytest.mark.parametrize(
    ("value", "count"),
    [({"a": 1, "b": [1, 2]}, 2), ([1, 2, 3], 3), ("short", None), (None, None), ([], 0), ({}, 0)],
)
def test_small_values_get_a_full_preview(value: Any, count: Any) -> None:
    """A value whose JSON is at most 256 bytes is its own preview."""
    desc = describe(value)
    assert desc["preview"] == value and desc["previewTruncated"] is False
    assert desc["count"] == count and desc["id"] == RID
    assert desc["bytes"] == len(orjson.dumps(value))


def test_homogeneous_array_shape() -> None:
    """An array of like objects reads array[N] of object{keys}."""
    desc = describe([{"a": i, "b": "x", "c": None} for i in range(180)])
    assert desc["shape"] == "array[180] of object{a,b,c}"
    assert desc["count"] == 180


def test_heterogeneous_array_shape() -> None:
    """Mixed samples read 'sampled 3/N heterogeneous'."""
    desc = describe([1] + ["s"] * 178 + [{"x": 1}])
    assert "sampled 3/180 heterogeneous" in desc["shape"]


def test_nested_tool_result_descriptor() -> None:
    """Nested array counts, the rows path, sampled marker and envelope scalars are shown."""
    desc = describe(TOOL_RESULT)
    assert "rows:array[180] of object{id,name,tags:array[2] of string}" in desc["shape"]
    preview = desc["preview"]
    assert preview["sampled"] is True and desc["previewTruncated"] is True
    rows = next(a for a in preview["arrays"] if a["path"] == "$.structuredContent.rows")
    assert rows["length"] == 180 and rows["at"] == [0, 90, 179]
    assert [s["id"] for s in rows["samples"]] == [0, 90, 179]
    assert preview["scalars"]["$.isError"] is False
    assert preview["scalars"]["$.structuredContent.total"] == 180
    assert json_size(desc) <= DESCRIPTOR_MAX_BYTES


def test_sampled_strings_and_keys_are_clipped() -> None:
    """Sample strings stay within 48 bytes and keys within 40 bytes."""
    desc = describe([{"k" * 100: "é" * 500}] * 50)
    sample = desc["preview"]["arrays"][0]["samples"][0]
    ((key, text),) = sample.items()
    assert len(key.encode()) <= 40 and len(text.encode()) <= 48


@pytest.mark.parametrize(
    "value",
    [
        deep(200),
        {"k" * 5000: {"j" * 5000: ["v" * 5000]}},
        {f"key{i}": i for i in range(20_000)},
        [[[[[[[[[[1]]]]]]]]]] * 40,
        {"a": [{"b": [{"c": [{"d": [{"e": [{"f": list(range(1000))}]}]}]}]}]},
    ],
    ids=["deep", "long-keys", "many-keys", "nested-arrays", "deep-arrays"],
)
def test_limited_traversal_is_reported_and_bounded(value: Any) -> None:
    """Deep, wide or long-key values report limited traversal and stay within 768 bytes."""
    desc = describe(value)
    assert json_size(desc) <= DESCRIPTOR_MAX_BYTES
    assert desc["traversalLimited"] is True
    assert desc["shape"].startswith("limited traversal")
    assert desc["id"] == RID


@pytest.mark.parametrize(
    "value",
    [
        "é🦞" * 100_000,
        list(range(200_000)),
        [{"t": "x" * 1000, "u": ["y" * 1000] * 10}] * 300,
        {"results": [{"doc": {"body": "z" * 300, "meta": {"a": 1, "b": [1, 2, 3]}}} for _ in range(500)]},
        TOOL_RESULT,
    ],
    ids=["long-string", "long-array", "fat-rows", "search-hits", "tool-result"],
)
def test_large_values_fit_the_descriptor_limit(value: Any) -> None:
    """Huge values get a sampled, bounded descriptor with the exact byte size."""
    text = orjson.dumps(value).decode()
    desc = describe_reference(RID, text)
    assert json_size(desc) <= DESCRIPTOR_MAX_BYTES
    assert desc["bytes"] == len(text.encode()) and desc["previewTruncated"] is True


def test_invalid_json_is_refused() -> None:
    """Describing text that is not JSON raises DescriptorError."""
    with pytest.raises(DescriptorError) as caught:
        describe_reference(RID, "{nope")
    assert caught.value.code == "refs_invalid_json"


@pytest.mark.parametrize("limit", [60, 80, 120, 200, 300, 500, 768])
def test_shrink_descriptor_fits_and_keeps_the_id(limit: int) -> None:
    """Shrinking drops preview, then shape, then counts; the id always stays."""
    desc = describe(TOOL_RESULT)
    small = shrink_descriptor(desc, limit)
    assert small["id"] == RID
    assert json_size(small) <= limit


def test_shrink_descriptor_prefers_dropping_preview_before_shape() -> None:
    """With some room, the shape survives while the preview goes."""
    desc = describe(TOOL_RESULT)
    small = shrink_descriptor(desc, json_size(desc) - len(orjson.dumps(desc["preview"])) + 4)
    assert small["shape"] == desc["shape"] and small["previewTruncated"] is True


def test_shrink_descriptor_returns_the_bare_id_when_nothing_fits() -> None:
    """When even the id is too long, only the id is returned for the caller to refuse."""
    assert shrink_descriptor({"id": "r" * 100, "bytes": 5}, 20) == {"id": "r" * 100}
