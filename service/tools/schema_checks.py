"""Caller schemas are checked where checking them cannot hold the event loop: in a helper process.

Checking a client tool's schema (the guard's walks, then jsonschema's meta-schema) is pure Python
at ~0.3 ms a subschema, so the most one exec may declare (2,000 objects) costs about a second; in
a thread that second would also be the event loop's (the GIL). So the loop only measures each
schema (``encode_caller_schema``: one native encode, which refuses a megabyte of empty arrays
before any Python walks it) and looks it up among the schemas vetted before; a tiny schema is
checked inline, every other one in one helper process (started with the service, or on first use).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from bridge import jsoncodec
from bridge.messages import SandboxOptions
from service.helper_process import ConfinedHelper
from service.tools.contracts import ToolContract, schema_problem
from service.tools.errors import SchemaRefused
from service.tools.schema_guard import SchemaLimits, check_caller_schema

__all__ = ["INLINE_SCHEMA_BYTES", "SchemaChecker", "schema_problem_of", "vetted_contract"]

#: Schemas up to this size are checked on the event loop: at most a few dozen subschemas, a few
#: milliseconds; agents' usual tool schemas are about this size, and a helper round trip is not free.
INLINE_SCHEMA_BYTES = 256
#: Vetted schemas kept with their compiled contracts (agents declare the same tools on every exec).
_VETTED_KEPT = 64
_vetted: OrderedDict[bytes, ToolContract] = OrderedDict()


def schema_problem_of(encoded: bytes, limits: SchemaLimits) -> str | None:
    """Why the caller schema ``encoded`` (its compact JSON) cannot be used, or None when it can."""
    schema = jsoncodec.loads(encoded)
    try:
        check_caller_schema(schema, limits)
    except SchemaRefused as exc:
        return str(exc)
    return schema_problem(schema)


def _problems_of(encoded: Sequence[bytes], limits: SchemaLimits) -> list[str | None]:
    return [schema_problem_of(e, limits) for e in encoded]


def vetted_contract(encoded: bytes) -> ToolContract | None:
    """The compiled contract of a schema that passed its checks before (None: check it first)."""
    contract = _vetted.get(encoded)
    if contract is not None:
        _vetted.move_to_end(encoded)
    return contract


def remember_vetted(encoded: bytes) -> ToolContract:
    """Compile a schema that passed its checks; it is not checked again while it is kept.

    The contract decodes its own copy, so cells of different callers never share a mutable schema.
    """
    contract = vetted_contract(encoded)
    if contract is None:
        contract = _vetted[encoded] = ToolContract(jsoncodec.loads(encoded), None, vetted=True)
        while len(_vetted) > _VETTED_KEPT:
            _vetted.popitem(last=False)
    return contract


class SchemaChecker:
    """Checks caller schemas: tiny ones inline, the rest in one confined helper process."""

    def __init__(self, limits: SchemaLimits, sandbox: SandboxOptions) -> None:
        self.limits = limits
        self.helper = ConfinedHelper("schema checker", sandbox, [__name__])

    def start(self) -> None:
        """Start the helper process now, in the background, so no request waits for it to boot."""
        self.helper.start()

    async def problems(self, encoded: Sequence[bytes]) -> dict[bytes, str | None]:
        """Each schema's problem (None: usable) by its compact JSON."""
        found = {e: schema_problem_of(e, self.limits) for e in encoded if len(e) <= INLINE_SCHEMA_BYTES}
        rest = list(dict.fromkeys(e for e in encoded if e not in found))
        if rest:
            found.update(zip(rest, await self.helper.run(_problems_of, rest, self.limits)))
        return found

    def close(self) -> None:
        self.helper.close()
