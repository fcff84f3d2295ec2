"""What a call allocates in Python, traced (``tracemalloc``): for tests that pin what something costs."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any


def peak_allocated(fn: Callable[..., Any], *args: Any) -> int:
    """The most bytes ``fn(*args)`` had allocated at once while it ran (traced: without the allocator's rounding)."""
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
