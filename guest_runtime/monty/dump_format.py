"""Which engine build a dumped Python cell needs: read without loading Monty (the service names it in a
parked cell's seal, service/runtime/parked_seal.py, and a JavaScript-only service never loads Monty)."""

from __future__ import annotations

import functools
import importlib.metadata

from bridge.jsoncodec import loads

#: What a Python cell's dump starts with (then its header's length, the header, Monty's own bytes).
DUMP_MAGIC = b"codemode-python-cell/2\n"


@functools.cache
def engine_build() -> str:
    """The Monty release installed and the layout of our dump around its bytes: a dump is taken up only by
    the same build (Monty's own format carries no promise across releases)."""
    try:
        version = importlib.metadata.version("pydantic-monty")
    except importlib.metadata.PackageNotFoundError:
        version = "none"
    return f"pydantic-monty {version}; {DUMP_MAGIC.decode().strip()}"


def pack_dump(header: bytes, parked: bytes) -> bytes:
    """A dumped cell: the magic, the length of the engine's JSON ``header``, the header, Monty's bytes."""
    return DUMP_MAGIC + len(header).to_bytes(4, "big") + header + parked


def unpack_dump(state: bytes) -> tuple[dict[str, object], bytes]:
    """The header (a JSON object) and Monty's bytes of a ``pack_dump`` (``ValueError`` if out of shape)."""
    start = len(DUMP_MAGIC) + 4
    if not state.startswith(DUMP_MAGIC) or len(state) < start:
        raise ValueError("no dumped Python cell")
    size = int.from_bytes(state[len(DUMP_MAGIC) : start], "big")
    header = loads(state[start : start + size])
    if not isinstance(header, dict):
        raise ValueError("its header is not an object")
    return header, state[start + size :]
