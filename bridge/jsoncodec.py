"""Compact JSON for everything that crosses the guest boundary (the one importer of orjson).

Compact means what ``JSON.stringify`` writes in the guest: no spaces, non-ASCII as UTF-8,
control characters escaped.  Encoding errors are ``JSONEncodeError`` (a ``TypeError``),
decoding errors ``JSONDecodeError`` (a ``ValueError``), whatever the library underneath.

Lone UTF-16 surrogates.  JavaScript strings may hold them; UTF-8 cannot.  ``JSON.stringify``
writes them as ``\\udXXX`` escapes, which ``well_formed`` turns into ``\\ufffd`` (same length,
so byte accounting done on the original text stays exact).  ``loads`` and ``dumps`` repair them
too, but only after the fast path failed, so well-formed data pays nothing.
"""

from __future__ import annotations

import codecs
import copy
import gc
import re
from collections.abc import Callable
from typing import Any

import orjson

# Re-exported: callers catch jsoncodec.JSONEncodeError / JSONDecodeError next to the calls that raise them.
from bridge.errors import JSONDecodeError as JSONDecodeError
from bridge.errors import JSONEncodeError as JSONEncodeError

#: Arrays/objects a value crossing the bridge may nest.  orjson refuses 254 levels when encoding,
#: and frames and envelopes wrap a guest value in a few levels of their own.  The guest prelude
#: enforces the same number (``MAX_NESTING``, generated from guest_runtime/guest_config.py).
MAX_NESTING = 200
#: The deepest nesting the encoder writes (orjson refuses more).
ENCODER_DEPTH = 254

# An escaped backslash is consumed whole, so "\\\\ud800" (a literal backslash, then "ud800")
# is never mistaken for an escape.  A high surrogate escape followed by a low one is a pair.
_ESCAPES = re.compile(
    r"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}(?:\\u[dD][c-fC-F][0-9a-fA-F]{2})?|\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    s = match.group()
    return s if len(s) != 6 else "\\ufffd"


def well_formed(json_text: str) -> str:
    """``json_text`` with every escaped lone surrogate replaced by an escaped U+FFFD."""
    if "\\ud" not in json_text and "\\uD" not in json_text:
        return json_text
    return _ESCAPES.sub(_escape, json_text)


# Looked up now, not on first use: a confined process (guest_runtime/confinement.py) imports nothing later.
codecs.lookup("utf-16-le")


def well_formed_str(text: str) -> str:
    """``text`` with every lone surrogate code point replaced by U+FFFD (a high+low pair is joined)."""
    if text.isascii() or not _LONE_SURROGATE.search(text):
        return text
    # Through UTF-16, a high+low pair becomes its character and a lone half becomes U+FFFD.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _repair(value: Any) -> Any:
    if isinstance(value, str):
        return well_formed_str(value)
    if isinstance(value, dict):
        return {well_formed_str(k) if isinstance(k, str) else k: _repair(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_repair(v) for v in value]
    return value


#: What ``plain_types`` refuses that orjson would otherwise write its own way.
_NOT_PLAIN = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def dumps(
    value: Any,
    *,
    default: Callable[[Any], Any] | None = None,
    sort_keys: bool = False,
    exact_ints: bool = False,
    plain_types: bool = False,
) -> bytes:
    """Compact JSON of ``value`` as UTF-8 bytes; non-finite floats become null, as in JS.

    ``sort_keys``: object keys in sorted order, so equal values give equal bytes (digests).
    ``exact_ints``: an integer a double cannot hold exactly (past 2**53) is refused (JSONEncodeError)
    rather than written with all its digits.
    ``plain_types``: with no ``default``, a subclass of a JSON type, a dataclass, a date or a time is
    refused (JSONEncodeError) rather than written as orjson writes it (UUIDs and enums it still writes).
    """
    option = (orjson.OPT_SORT_KEYS if sort_keys else 0) | (orjson.OPT_STRICT_INTEGER if exact_ints else 0)
    option |= _NOT_PLAIN if plain_types else 0
    try:
        return orjson.dumps(value, default=default, option=option)
    except orjson.JSONEncodeError as exc:
        if "surrogates not allowed" not in str(exc):
            raise JSONEncodeError(str(exc)) from None
    try:
        return orjson.dumps(_repair(value), default=default, option=option)
    except (orjson.JSONEncodeError, RecursionError) as exc:
        raise JSONEncodeError(str(exc)) from None


def dumps_kept(value: Any) -> bytes:
    """``dumps`` for bytes that are kept a while (held for a caller, a parked call, an event log).

    orjson's output keeps the buffer it reserved, which for many small values is tens of times the
    text (1.2 MB of one-digit arrays sat in a 66 MB buffer); a copy holds only the text.
    """
    data = dumps(value)
    return bytes(memoryview(data)) if len(data) > _KEPT_COPY_BYTES else data


#: Below this size a kept encoding is not worth copying.
_KEPT_COPY_BYTES = 4096


def copied(value: Any) -> Any:
    """A deep copy of JSON data: a round trip through the codec, many times faster than ``copy.deepcopy``.

    Integers beyond 64 bits (which the codec refuses) fall back to ``copy.deepcopy``.
    """
    try:
        return loads(orjson.dumps(value))
    except (orjson.JSONEncodeError, RecursionError):
        return copy.deepcopy(value)


def fragment(data: bytes) -> Any:
    """Compact JSON bytes that ``dumps`` embeds as they are, for data kept encoded because its
    parsed form would be many times larger."""
    return orjson.Fragment(data)


def dumps_text(value: Any, *, exact_ints: bool = False) -> str:
    """Compact JSON of ``value`` as text (``exact_ints``: as ``dumps``)."""
    return dumps(value, exact_ints=exact_ints).decode("utf-8")


# JavaScript writes numbers from 2**63 up to 1e21 with all their digits (174680538877714140000); the host
# parses them as floats and writes them in exponent form, up to two bytes longer (1.7468053887771414e+20).
# Only such a run of digits makes the host's text longer than the guest's.
LONG_DIGIT_RUN = 19
#: Every byte to b" " but digits, which become b"0": a run of digits is then a run of zeros, which a byte
#: search finds (a 1 MiB text: ~1 ms, against ~12 ms for the regular expression ``[0-9]{19}``).
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
#: The text is looked at in pieces of this many characters (each overlapping the next by a run less one), so
#: the scan's copies stay small whatever the text's size.
_SCAN_CHARS = 256 * 1024


def has_long_digit_run(text: str) -> bool:
    """Whether ``text`` holds LONG_DIGIT_RUN ASCII digits in a row."""
    run = b"0" * LONG_DIGIT_RUN
    for start in range(0, max(len(text) - LONG_DIGIT_RUN + 1, 1), _SCAN_CHARS):
        piece = text[start : start + _SCAN_CHARS + LONG_DIGIT_RUN - 1]
        if run in piece.encode("utf-8", "surrogatepass").translate(_DIGITS_AS_ZEROS):
            return True
    return False


def as_host_writes(json_text: str) -> str:
    """Guest JSON text as the host will write it into an envelope, so byte budgets measure what is sent.

    Re-encodes only text holding a run of 19 digits (a linear scan otherwise); anything else the host
    writes no longer than the guest did.
    """
    if not has_long_digit_run(json_text):
        return json_text
    try:
        return dumps_text(loads(json_text))
    except (JSONDecodeError, JSONEncodeError):
        return json_text  # not JSON after all: measured as it is, and refused where it is parsed


def dumps_pretty(value: Any) -> str:
    """Indented JSON for people (the CLI)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode("utf-8")
    except orjson.JSONEncodeError as exc:
        raise JSONEncodeError(str(exc)) from None


#: Texts longer than this are parsed with the cyclic garbage collector paused.
_NO_GC_BYTES = 64 * 1024


def loads(data: bytes | str) -> Any:
    """Parse JSON text or UTF-8 bytes; escaped lone surrogates decode as U+FFFD.

    A long text is parsed with the garbage collector paused: parsed JSON holds no cycles, yet every
    few hundred new arrays or objects would start a collection that walks them all again (parsing
    1.8M one-digit arrays took five times as long with it running).
    """
    if len(data) <= _NO_GC_BYTES or not gc.isenabled():
        return _loads(data)
    gc.disable()
    try:
        return _loads(data)
    finally:
        gc.enable()


def _loads(data: bytes | str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "surrogate" not in str(exc):
            raise JSONDecodeError(str(exc)) from None
        first = exc
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
        return orjson.loads(well_formed(text))
    except (orjson.JSONDecodeError, UnicodeDecodeError):
        raise JSONDecodeError(str(first)) from None
