"""Process-wide memory settings of the service, applied once after start-up.

Kept out of the request path: the collector's full passes, and the allocator's habit of keeping
freed caller-sized buffers.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc

#: glibc's ``M_MMAP_THRESHOLD`` (malloc.h).
_M_MMAP_THRESHOLD = -3
#: Buffers at least this large get their own mapping, returned to the system when freed.
MMAP_THRESHOLD_BYTES = 1 << 20


def tune_process() -> None:
    """Freeze start-up objects out of the collector; give large buffers back when they are freed."""
    # Everything built at start-up lives as long as the process: frozen, full collections no longer
    # walk it (unfrozen, they stalled requests for tens of ms under load).
    gc.collect()
    gc.freeze()
    # glibc raises its mmap threshold each time a large mapped block is freed, after which
    # caller-sized bodies (MBs) land in the heap and stay resident after they are freed.  A fixed
    # threshold keeps them mapped, so a burst of large answers leaves no resident trace.
    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        ctypes.CDLL(name).mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    except (OSError, AttributeError):
        pass  # not glibc: its allocator keeps its own policy
