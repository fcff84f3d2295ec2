"""Warnings a caller can cause are logged at most once per interval per kind, with a count of the rest.

A tenant can make some warnings happen on purpose, once per request: a ``traceparent`` header over
512 characters (OpenTelemetry's propagator warns about each), a new run past the tenant's store
quota.  So each kind of such warning is logged at most once every ``interval_s`` seconds, and the
line that is logged says how many of its kind were left out since the one before.  A kind is a
fixed string (ours, or a library's format string), so the table of kinds stays small.

``LogLimiter`` is the rule (given a clock: tests move their own); ``LimitedWarnings`` applies it to a
library's logger as a ``logging`` filter, by the format string of each warning.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

#: One line per kind per this many seconds.
INTERVAL_S = 60.0


class LogLimiter:
    """Lets one warning of each kind through per ``interval_s`` (by ``clock``), counting the ones it holds back."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, interval_s: float = INTERVAL_S) -> None:
        self._clock = clock
        self.interval_s = interval_s
        self._kinds: dict[str, tuple[float, int]] = {}  # kind -> (when its last line was logged, held back since)

    def allow(self, kind: str) -> int | None:
        """None when a warning of ``kind`` is to be left out (it is counted); else log it now, with the
        count returned: how many of its kind were left out since its last line."""
        now = self._clock()
        last = self._kinds.get(kind)
        if last is not None and now - last[0] < self.interval_s:
            self._kinds[kind] = (last[0], last[1] + 1)
            return None
        self._kinds[kind] = (now, 0)
        return 0 if last is None else last[1]

    def suffix(self, held_back: int) -> str:
        """What a line adds about the warnings of its kind left out before it (nothing when none were)."""
        if not held_back:
            return ""
        return f" [{held_back} more like this in the {self.interval_s:g} s before were not logged]"

    def warning(self, logger: logging.Logger, kind: str, message: str, *args: object) -> None:
        """``logger.warning(message, *args)`` if a warning of ``kind`` may be logged now, with the count it left out."""
        held_back = self.allow(kind)
        if held_back is not None:
            logger.warning(message + self.suffix(held_back).replace("%", "%%"), *args)


class LimitedWarnings(logging.Filter):
    """A filter for a library's logger: its warnings (and worse) pass as ``limiter`` allows, one per format string."""

    def __init__(self, limiter: LogLimiter) -> None:
        super().__init__()
        self.limiter = limiter

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        text = isinstance(record.msg, str)
        # A message that is an object (an exception, say) is of its type's kind: its text may be anyone's.
        held_back = self.limiter.allow(f"{record.name}: {record.msg if text else type(record.msg).__name__}")
        if held_back is None:
            return False
        if held_back and text:
            record.msg = f"{record.msg}{self.limiter.suffix(held_back)}"
        return True


def limit_warnings(logger_names: tuple[str, ...], limiter: LogLimiter) -> None:
    """Put ``limiter`` on the warnings of these loggers, in place of a ``LimitedWarnings`` put there before."""
    for name in logger_names:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, LimitedWarnings)]:
            logger.removeFilter(old)
        logger.addFilter(LimitedWarnings(limiter))
