"""Freed heap pages handed back to the kernel (glibc ``malloc_trim``).

A freed engine's memory goes back to malloc, not to the kernel: after many parked runtimes are dropped,
or a large source's syntax tree is freed, the worker would keep hundreds of MiB it no longer uses.
"""

from __future__ import annotations

import ctypes
from typing import Any

try:
    _libc: Any = ctypes.CDLL(None)
    _malloc_trim: Any = _libc.malloc_trim
    _malloc_trim.argtypes = [ctypes.c_size_t]
    _malloc_trim.restype = ctypes.c_int
except (OSError, AttributeError):  # not glibc: freed memory stays with the allocator
    _malloc_trim = None


def give_back_memory() -> bool:
    """Return freed heap pages to the kernel; False where there is no such call."""
    if _malloc_trim is None:
        return False
    _malloc_trim(0)
    return True
