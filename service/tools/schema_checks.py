"""Caller schemas are checked where checking them cannot hold the event loop: in a helper process.

Checking a client tool's schema (the guard's walks, then jsonschema's meta-schema) is pure Python
at ~0.3 ms a subschema, so the most one exec may declare (2,000 objects) costs about a second; in
a thread that second would also be the event loop's (the GIL). So the loop only measures each
schema (``encode_caller_schema``: one native encode, which refuses a megabyte of empty arrays
before any Python walks it) and looks it up among the schemas vetted before; a tiny schema is
checked inline, every other one in a helper process of the caller's principal (``service.helpers``).

A verdict is remembered for the principal it was reached for: a helper an attacker took over could
vouch for a schema that fails its checks, and that must not reach another principal's cells.

This module is also the helper's (``service.helpers.jobs`` runs ``schema_problem_of`` there), so it
imports the pool only for its type.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, cast

from bridge import jsoncodec
from service.helpers.job import Answer, AnswerCaps, HelperJob, refuse
from service.helpers.protocol import PROBLEM_CHARS
from service.tools.contracts import ToolContract, schema_problem
from service.tools.errors import SchemaRefused
from service.tools.schema_guard import SchemaLimits, check_caller_schema

if TYPE_CHECKING:
    from service.helpers.pool import HelperPool
    from service.settings import ApiKey

__all__ = ["INLINE_SCHEMA_BYTES", "SchemaChecker", "schema_problem_of", "vetted_contract"]

#: Schemas up to this size are checked on the event loop: at most a few dozen subschemas, a few
#: milliseconds; agents' usual tool schemas are about this size, and a helper round trip is not free.
INLINE_SCHEMA_BYTES = 256
#: Vetted schemas kept with their compiled contracts (agents declare the same tools on every exec).
_VETTED_KEPT = 64
#: (principal, schema) -> its contract. A principal of None (a helper per job) is never remembered.
_vetted: OrderedDict[tuple[str, bytes], ToolContract] = OrderedDict()


def schema_problem_of(encoded: bytes, limits: SchemaLimits) -> str | None:
    """Why the caller schema ``encoded`` (its compact JSON) cannot be used, or None when it can."""
    schema = jsoncodec.loads(encoded)
    try:
        check_caller_schema(schema, limits)
    except SchemaRefused as exc:
        return str(exc)
    return schema_problem(schema)


def vetted_contract(encoded: bytes, principal: str | None) -> ToolContract | None:
    """The compiled contract of a schema that passed its checks before for ``principal`` (None: check it)."""
    if principal is None:
        return None
    contract = _vetted.get((principal, encoded))
    if contract is not None:
        _vetted.move_to_end((principal, encoded))
    return contract


def remember_vetted(encoded: bytes, principal: str | None) -> ToolContract:
    """Compile a schema that passed its checks; for ``principal`` it is not checked again while it is kept.

    The contract decodes its own copy, so cells of different callers never share a mutable schema.
    """
    contract = vetted_contract(encoded, principal)
    if contract is None:
        contract = ToolContract(jsoncodec.loads(encoded), None, vetted=True)
        if principal is not None:
            _vetted[(principal, encoded)] = contract
            while len(_vetted) > _VETTED_KEPT:
                _vetted.popitem(last=False)
    return contract


class SchemaChecker:
    """Checks caller schemas: tiny ones inline, the rest in a helper process of the caller's principal."""

    def __init__(self, limits: SchemaLimits, helpers: HelperPool) -> None:
        self.limits = limits
        self.helpers = helpers

    async def problems(self, encoded: Sequence[bytes], key: ApiKey) -> dict[bytes, str | None]:
        """Each schema's problem (None: usable) by its compact JSON (``HelperFailed``: the helper
        that checked them answered out of shape)."""
        found = {e: schema_problem_of(e, self.limits) for e in encoded if len(e) <= INLINE_SCHEMA_BYTES}
        rest = list(dict.fromkeys(e for e in encoded if e not in found))
        if rest:
            verdicts = await self.helpers.run(SchemasJob(rest, self.limits), key)
            found.update(zip(rest, verdicts, strict=True))
        return found


class SchemasJob(HelperJob[list[str | None]]):
    """Check schemas in the helper: it answers each one's problem (None: usable), in order."""

    name = "schemas"
    purpose = "checks client tool schemas"

    def __init__(self, encoded: list[bytes], limits: SchemaLimits) -> None:
        self.encoded = encoded
        self.limits = limits

    def request(self) -> tuple[dict[str, object], list[bytes]]:
        return {"limits": asdict(self.limits)}, self.encoded

    def caps(self) -> AnswerCaps:
        # Each problem at most PROBLEM_CHARS characters, each written as 6 bytes at worst (an escape).
        n = len(self.encoded)
        return AnswerCaps(
            control_bytes=1024 + n * (6 * PROBLEM_CHARS + 8), control_values=8 + n, frames=0, frame_bytes=0
        )

    def finish(self, answer: Answer) -> list[str | None]:
        answer.outcome({"problems": {"problems": _is_problem_list}}, {"problems": range(1)})
        problems = cast("list[str | None]", answer.field("problems"))
        if len(problems) != len(self.encoded):
            refuse(f"answered {len(problems)} verdicts for {len(self.encoded)} schemas")
        return problems


def _is_problem_list(value: object) -> bool:
    return type(value) is list and all(p is None or (type(p) is str and len(p) <= PROBLEM_CHARS) for p in value)
