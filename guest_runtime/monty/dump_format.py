"""Which engine build a dumped Python cell needs: read without loading Monty (the service names it in a
parked cell's seal, service/runtime/parked_seal.py, and a JavaScript-only service never loads Monty)."""

from __future__ import annotations

import functools
import importlib.metadata

#: What a Python cell's dump starts with (then its header's length, the header, Monty's own bytes).
DUMP_MAGIC = b"codemode-python-cell/1\n"


@functools.cache
def engine_build() -> str:
    """The Monty release installed and the layout of our dump around its bytes: a dump is taken up only by
    the same build (Monty's own format carries no promise across releases)."""
    try:
        version = importlib.metadata.version("pydantic-monty")
    except importlib.metadata.PackageNotFoundError:
        version = "none"
    return f"pydantic-monty {version}; {DUMP_MAGIC.decode().strip()}"
