"""Reference descriptors for saved results: a small, bounded summary of a JSON value.

A descriptor is ``{id, bytes, count, shape, preview, previewTruncated}`` plus
``traversalLimited: true`` when a traversal limit was hit.  Its compact JSON is at most
``DESCRIPTOR_MAX_BYTES``; only ``id`` is never shrunk.

* ``bytes``: UTF-8 size of the value's compact JSON.  ``count``: array length, object key count,
  or null for a scalar.
* ``shape``: short text such as ``array[180] of object{a,b,c}``, ``array[180] sampled 3/180
  heterogeneous`` or ``object{rows:array[180] of object{id}}``; prefixed with ``limited traversal;``
  when a limit was hit.
* ``preview``: the whole value when its compact JSON is at most ``PREVIEW_FULL_MAX_BYTES``;
  otherwise a sampled view ``{"sampled": true, "scalars": {path: value}, "arrays": [{"path",
  "length", "at", "samples"}]}`` holding envelope scalars and the largest arrays sampled at their
  first, middle and last element.  Paths read ``$.structuredContent.rows[0]``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

from bridge.errors import DescriptorError
from bridge.json_types import json_type
from bridge.truncation import compact_json, json_size, parse_json, utf8_prefix, utf8_size

DESCRIPTOR_MAX_BYTES = 768
PREVIEW_FULL_MAX_BYTES = 256
MAX_VISITED_NODES = 128
MAX_DEPTH = 5
MAX_KEYS_PER_NODE = 16
MAX_SAMPLED_ARRAYS = 8
MAX_ENVELOPE_SCALARS = 8
SAMPLE_LEVELS = 2
SAMPLE_FIELDS = 6
SAMPLE_STRING_BYTES = 48
KEY_BYTES = 40
SHAPE_MAX_BYTES = 256

_ELLIPSIS = "…"
_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_LIMITED = "limited traversal; "
_INDEX = re.compile(r"\[\d+\]")


def describe_reference(ref_id: str, json_text: str) -> dict[str, Any]:
    """Describe a saved JSON value in at most ``DESCRIPTOR_MAX_BYTES`` of compact JSON."""
    try:
        value = parse_json(json_text)
    except ValueError as exc:
        raise DescriptorError(f"saved result is not JSON: {exc}") from None
    size = utf8_size(json_text)
    walk = _Walk()
    shape = _shape(value, 0, walk)
    if size <= PREVIEW_FULL_MAX_BYTES:
        preview, preview_truncated = value, False
    else:
        preview, preview_truncated = _sampled_preview(value, walk), True
    if walk.limited:
        shape = _LIMITED + shape
    desc: dict[str, Any] = {
        "id": ref_id,
        "bytes": size,
        "count": len(value) if isinstance(value, (dict, list)) else None,
        "shape": _clip_text(shape, SHAPE_MAX_BYTES),
        "preview": preview,
        "previewTruncated": preview_truncated,
    }
    if walk.limited:
        desc["traversalLimited"] = True
    return shrink_descriptor(desc, DESCRIPTOR_MAX_BYTES)


def shrink_descriptor(desc: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """Shrink a descriptor to ``max_bytes``: preview first, then shape, then counts; never the id.

    If even ``{"id": ...}`` is over the limit, that is returned and the caller must refuse it.
    """
    out = dict(desc)
    if json_size(out) <= max_bytes:
        return out
    if "preview" in out:
        for candidate in _preview_candidates(out["preview"]):
            out["preview"] = candidate
            out["previewTruncated"] = True
            if json_size(out) <= max_bytes:
                return out
    if isinstance(out.get("shape"), str):
        out["shape"] = ""
        room = max_bytes - json_size(out)
        shape = desc.get("shape") or ""
        out["shape"] = _clip_text(shape, room) if room > 0 else ""
        if json_size(out) <= max_bytes:
            return out
    for key in ("preview", "previewTruncated", "shape", "traversalLimited", "count", "bytes"):
        out.pop(key, None)
        if json_size(out) <= max_bytes:
            return out
    return {"id": desc["id"]}


class _Walk:
    """Shared node budget and the 'a limit was hit' flag of one description."""

    def __init__(self) -> None:
        self.visited = 0
        self.limited = False

    def visit(self) -> bool:
        self.visited += 1
        if self.visited > MAX_VISITED_NODES:
            self.limited = True
            return False
        return True


def _sample_indices(length: int) -> list[int]:
    return sorted({0, length // 2, length - 1}) if length else []


def _clip_key(key: str, walk: _Walk | None = None) -> str:
    if utf8_size(key) <= KEY_BYTES:
        return key
    if walk is not None:
        walk.limited = True
    return utf8_prefix(key, KEY_BYTES - len(_ELLIPSIS.encode())) + _ELLIPSIS


def _clip_text(text: str, max_bytes: int) -> str:
    if utf8_size(text) <= max_bytes:
        return text
    if max_bytes < len(_ELLIPSIS.encode()):
        return ""
    return utf8_prefix(text, max_bytes - len(_ELLIPSIS.encode())) + _ELLIPSIS


def _head_keys(obj: dict[str, Any], walk: _Walk | None) -> list[str]:
    keys = list(itertools.islice(obj, MAX_KEYS_PER_NODE))
    if len(obj) > len(keys) and walk is not None:
        walk.limited = True
    return keys


def _shape(value: Any, depth: int, walk: _Walk) -> str:
    kind = json_type(value) or "unknown"  # values here are decoded JSON: never "unknown"
    if kind not in ("object", "array"):
        return kind
    if depth >= MAX_DEPTH or not walk.visit():
        walk.limited = True
        return kind
    if isinstance(value, dict):
        keys = _head_keys(value, walk)
        parts = []
        for key in keys:
            child = value[key]
            name = _clip_key(key, walk)
            if isinstance(child, (dict, list)):
                parts.append(f"{name}:{_shape(child, depth + 1, walk)}")
            else:
                parts.append(name)
        if len(value) > len(keys):
            parts.append(f"+{len(value) - len(keys)}")
        return "object{" + ",".join(parts) + "}"
    length = len(value)
    if not length:
        return "array[0]"
    indices = _sample_indices(length)
    samples = [value[i] for i in indices]
    signatures = {_signature(s) for s in samples}
    if len(signatures) > 1:
        return f"array[{length}] sampled {len(samples)}/{length} heterogeneous"
    return f"array[{length}] of {_shape(samples[0], depth + 1, walk)}"


def _signature(value: Any) -> Any:
    if isinstance(value, dict):
        return ("object", tuple(itertools.islice(value, MAX_KEYS_PER_NODE)))
    return json_type(value)


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    clipped = _clip_key(key)
    if _IDENTIFIER.match(clipped):
        return f"{parent}.{clipped}"
    return f"{parent}[{compact_json(clipped)}]"


def _sampled_preview(value: Any, walk: _Walk) -> dict[str, Any]:
    # Breadth first, so envelope fields near the root win the node budget over deep rows.
    arrays: list[tuple[str, list[Any]]] = []
    scalars: dict[str, Any] = {}
    queue: list[tuple[Any, str, int, bool]] = [(value, "$", 0, False)]
    visited = 0
    for node, path, depth, in_array in queue:
        visited += 1
        if visited > MAX_VISITED_NODES:
            walk.limited = True
            break
        if isinstance(node, dict):
            if depth >= MAX_DEPTH:
                walk.limited = True
                continue
            for key in _head_keys(node, walk):
                queue.append((node[key], _path(path, key), depth + 1, in_array))
        elif isinstance(node, list):
            arrays.append((path, node))
            if depth >= MAX_DEPTH:
                walk.limited = True
                continue
            for index in _sample_indices(len(node)):
                queue.append((node[index], _path(path, index), depth + 1, True))
        elif not in_array and len(scalars) < MAX_ENVELOPE_SCALARS:
            scalars[path] = _clip(node, 0, 0, SAMPLE_STRING_BYTES)
    # Arrays inside sampled elements repeat per sample: keep one per path pattern.
    distinct: dict[str, tuple[str, list[Any]]] = {}
    for path, items in arrays:
        distinct.setdefault(_INDEX.sub("[*]", path), (path, items))
    largest = sorted(distinct.values(), key=lambda item: -len(item[1]))[:MAX_SAMPLED_ARRAYS]
    preview: dict[str, Any] = {"sampled": True}
    if scalars:
        preview["scalars"] = scalars
    preview["arrays"] = [
        {
            "path": path,
            "length": len(items),
            "at": _sample_indices(len(items)),
            "samples": [
                _clip(items[i], SAMPLE_LEVELS, SAMPLE_FIELDS, SAMPLE_STRING_BYTES) for i in _sample_indices(len(items))
            ],
        }
        for path, items in largest
    ]
    return preview


def _clip(value: Any, levels: int, fields: int, string_bytes: int) -> Any:
    """Bounded copy of a JSON value: ``levels`` of nesting, ``fields`` per container, short strings."""
    if isinstance(value, str):
        return _clip_text(value, string_bytes)
    if isinstance(value, dict):
        if levels <= 0:
            return "{" + _ELLIPSIS + "}" if value else {}
        keys = list(itertools.islice(value, fields))
        out = {_clip_key(k): _clip(value[k], levels - 1, fields, string_bytes) for k in keys}
        if len(value) > len(keys):
            out[_ELLIPSIS] = f"+{len(value) - len(keys)} keys"
        return out
    if isinstance(value, list):
        if levels <= 0:
            return "[" + _ELLIPSIS + "]" if value else []
        out_list = [_clip(v, levels - 1, fields, string_bytes) for v in value[:fields]]
        if len(value) > fields:
            out_list.append(f"{_ELLIPSIS}+{len(value) - fields} items")
        return out_list
    return value


_FULL_LADDER = ((2, 6, 48), (2, 4, 32), (1, 4, 24), (1, 2, 16), (0, 0, 8))
_SAMPLE_LADDER = ((1, 4, 32), (1, 2, 16), (0, 0, 8))


def _preview_candidates(preview: Any) -> Iterator[Any]:
    """Yield ever smaller replacements for a preview, ending with None (no preview)."""
    if isinstance(preview, dict) and preview.get("sampled") is True:
        arrays = list(preview.get("arrays") or [])
        scalars = list((preview.get("scalars") or {}).items())
        # Smallest arrays go first; then the samples of the rest get coarser.
        for keep in range(len(arrays) - 1, 0, -1):
            yield _sampled(scalars, arrays[:keep])
        arrays = arrays[:1]
        for levels, fields, string_bytes in _SAMPLE_LADDER:
            arrays = [
                {**a, "samples": [_clip(s, levels, fields, string_bytes) for s in a.get("samples", [])]} for a in arrays
            ]
            scalars = [(p, _clip(v, 0, 0, string_bytes)) for p, v in scalars]
            yield _sampled(scalars, arrays)
        yield _sampled(scalars, [])
        for keep in range(len(scalars) - 1, -1, -1):
            yield _sampled(scalars[:keep], [])
    else:
        for levels, fields, string_bytes in _FULL_LADDER:
            yield _clip(preview, levels, fields, string_bytes)
    yield None


def _sampled(scalars: list[tuple[str, Any]], arrays: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"sampled": True}
    if scalars:
        out["scalars"] = dict(scalars)
    out["arrays"] = arrays
    return out
