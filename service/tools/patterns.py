"""Regular expressions from schemas, run by RE2; the only module that imports `re2`.

RE2 matches in time linear in the text, so a pattern like ``^(a+)+$`` cannot hold a thread for
seconds the way a backtracking engine does; patterns it cannot run (lookaround, backreferences)
are refused up front. Its syntax is also closer to ECMA-262 than Python's (`\\d` is ASCII, `$`
only matches at the end), which is what JSON Schema specifies.
"""

from __future__ import annotations

import functools
from typing import Any

import re2

from service.tools.errors import PatternError

__all__ = ["MAX_PATTERN_CHARS", "check_pattern", "is_pattern", "search", "search_work"]

#: Longest pattern accepted; real schema patterns are a few dozen characters.
MAX_PATTERN_CHARS = 2048
#: RE2's memory budget per compiled pattern (program and DFA cache); beyond it RE2 refuses the
#: pattern at compile time or falls back to its slower, still linear, NFA.
_MAX_MEM = 2 * 1024 * 1024
#: Compiled patterns kept across calls (schemas are validated many times with the same patterns).
_CACHED = 512


def _options() -> Any:
    options = re2.Options()
    options.max_mem = _MAX_MEM
    options.log_errors = False  # the error is raised to us; RE2 would also print it to stderr
    return options


_OPTIONS = _options()


@functools.lru_cache(maxsize=_CACHED)
def _compiled(pattern: str) -> Any:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"pattern is {len(pattern)} characters long (cap {MAX_PATTERN_CHARS})")
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", errors="replace")
        raise PatternError(
            f"pattern is not supported ({reason}); use RE2 syntax: no lookaround or backreferences"
        ) from None


def check_pattern(pattern: str) -> None:
    """Raise PatternError unless RE2 can run `pattern`."""
    _compiled(pattern)


def is_pattern(value: object) -> bool:
    """Format checker for ``format: regex``: True when RE2 can run `value` (non-strings pass)."""
    if not isinstance(value, str):
        return True
    check_pattern(value)
    return True


def search_work(pattern: str, text: str) -> int:
    """An upper bound on what searching `text` for `pattern` costs: program instructions × text bytes.

    RE2 runs a search on its DFA when it can, a few ns per byte whatever the pattern; a pattern whose
    DFA grows past the memory budget (``[ab]*a[ab]{999}c``: one state per subset of 1,000
    positions) falls back to the NFA, which steps every live instruction on every byte. That is
    linear too, but its factor is the program size, ~2,000 here: 200k characters cost seconds.
    """
    # RE2 matches UTF-8: an ASCII str (known without a scan) is one byte a character, others at most 4.
    size = len(text) if text.isascii() else 4 * len(text)
    return int(_compiled(pattern).programsize) * size


def search(pattern: str, text: str, flags: int = 0) -> Any:
    """`re.search` with RE2 (unanchored, as JSON Schema's ``pattern`` is)."""
    if flags:
        raise PatternError("regex flags are not supported")
    return _compiled(pattern).search(text)
