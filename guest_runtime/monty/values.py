"""Python values of a Monty cell to JSON text and back, with the JavaScript guest's bounds.

Monty hands the worker plain Python objects (its conversion of the guest's values).  What crosses the
guest boundary is JSON, exactly as for JavaScript cells: dict with string keys, list (a tuple becomes
a list, as a JS array), str, int, float, bool, None.  Anything else fails the call, naming its type.
Nesting is bounded (``bridge.jsoncodec.MAX_NESTING``) and the values are counted, so a request that
would be too costly for the host to parse is refused here, in the guest, before it exists.
"""

from __future__ import annotations

import math
from typing import Any

from bridge import json_syntax
from bridge.jsoncodec import MAX_NESTING, JSONEncodeError, dumps, dumps_text

from .namespaces import handle_json

#: What Monty puts where a value nests deeper than it converts (its recursion limit, MAX_NESTING here).
DEEP_MARKER = "<deeply nested>"
_DEEP_JSON = f'"{DEEP_MARKER}"'.encode()
#: Integers past 64 bits cross as JSON numbers the way JavaScript writes them: as doubles.
_INT64 = 2**63


def _as_float(v: int) -> float:
    try:
        return float(v)
    except OverflowError:
        raise NotJson("an int this large has no JSON number form (it overflows a double)") from None


class NotJson(TypeError):
    """A guest value that has no JSON form (the guest sees it as a TypeError)."""


def to_json_value(value: Any, *, max_values: int | None = None) -> tuple[Any, int]:
    """``(value as JSON-ready data, number of JSON values)``; NotJson names what does not convert."""
    count = 0

    def convert(v: Any, depth: int) -> Any:
        nonlocal count
        count += 1
        if max_values is not None and count > max_values:
            raise OverflowError("too many values")
        if isinstance(v, str) and depth >= MAX_NESTING and v == DEEP_MARKER:
            # Monty cut a deeper value here: it would cross silently shortened.
            raise NotJson(f"values may nest at most {MAX_NESTING} levels of lists/dicts")
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return v if -_INT64 <= v < _INT64 else _as_float(v)
        if isinstance(v, float):
            # JSON has no NaN or infinity; JSON.stringify writes null for them, and so do we.
            return v if math.isfinite(v) else None
        if depth >= MAX_NESTING:
            raise NotJson(f"values may nest at most {MAX_NESTING} levels of lists/dicts")
        if isinstance(v, (list, tuple)):
            return [convert(item, depth + 1) for item in v]
        if isinstance(v, dict):
            out = {}
            for key, item in v.items():
                if not isinstance(key, str):
                    raise NotJson(f"dict keys must be str to cross as JSON, not {type(key).__name__}")
                out[key] = convert(item, depth + 1)
            return out
        meta = handle_json(v)
        if meta is not None:
            return meta
        raise NotJson(
            f"a value of type {type(v).__name__} cannot cross as JSON (use dict, list, str, int, float, bool, None)"
        )

    return convert(value, 0), count


#: The exact types of values that cross as they are.
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> bool:
    """Whether ``value`` is only str-keyed dicts, lists and tuples of str, int, float, bool and None, nested
    less deep than MAX_NESTING - 1 (so no DEEP_MARKER can be Monty's cut): data the codec writes exactly
    as ``to_json_value``'s copy of it, without the copy.  One pass over the containers, no values built."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        kind = type(v)
        if kind in _SCALARS:
            continue
        if depth >= MAX_NESTING - 1:
            return False
        if kind is dict:
            for key, item in v.items():
                if type(key) is not str:
                    return False
                if type(item) not in _SCALARS:
                    stack.append((item, depth + 1))
        elif kind is list or kind is tuple:
            stack.extend((item, depth + 1) for item in v if type(item) not in _SCALARS)
        else:
            return False  # a handle, a subclass, anything else: the conversion below decides
    return True


def to_json_text(value: Any) -> str:
    """The JSON text of a guest value (NotJson if it has none).

    Plain data is written as it is; anything else, and an integer past 2**53 (written as JavaScript writes
    it, a double), is converted first (``to_json_value``).
    """
    text = _written(value)
    if text is not None:
        return text
    data, _ = to_json_value(value)
    return dumps_text(data)


def _written(value: Any) -> str | None:
    """The JSON text of ``value`` if it is plain data, written without a copy; None: convert it first.

    The codec refuses every type but JSON's own (and Monty hands the worker no UUID or enum, the two
    others it writes); the C scan then bounds the nesting, which Monty hands back whole, in ~1 ms per
    MiB.  Without the scan (an install without the extension) the Python walk decides (``_plain``).  A
    1 MiB list of dicts: ~3 ms, against ~20 ms with the walk and ~45 ms with the converting copy.
    """
    try:
        if not json_syntax.built():
            return dumps_text(value, exact_ints=True) if _plain(value) else None
        data = dumps(value, exact_ints=True, plain_types=True)
    except JSONEncodeError:
        return None  # another type, an integer past 53 bits, nesting past the codec's own limit
    if not json_syntax.surely_json(data, MAX_NESTING) or _DEEP_JSON in data:
        return None  # too deep (the conversion names the bound), or a string that may be Monty's cut
    return data.decode("utf-8")


def child_text(text: str) -> str | None:
    """``text``, the JSON a Monty child's ``json.dumps`` wrote of a cell's value (``cell_source``), if it is
    what ``to_json_text`` writes of that value (but for how a float may be spelled), nested less than
    MAX_NESTING deep; None: convert the value itself.  The strict C scan (~1 ms per MiB)
    refuses the keys ``json.dumps`` makes of ints, floats, bools and None (the host refuses such keys) and
    integers that may be past 64 bits; without the extension every value is converted."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    # Monty's conversion cuts a value at MAX_NESTING levels (DEEP_MARKER), so the converted path takes one
    # level less; and its ``json.dumps`` writes DEEP_MARKER where it stops, as its conversion does.
    if not json_syntax.surely_json(data, MAX_NESTING - 1, strict=True) or _DEEP_JSON in data:
        return None
    return text
