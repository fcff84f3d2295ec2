"""MCP tool results checked against their tool's ``outputSchema`` by the service's own validators.

Left to itself the SDK checks every ``tools/call`` result with stock jsonschema (Python's backtracking
``re``) on the event loop: ``"pattern": "^(a+)+$"`` against 25 a's and a ``!`` held the loop for
seconds, each further character doubling it.  ``service.mcp.client`` never lets it; the check is made
here instead, as a native tool's output contract is (``service.tools.contracts``: patterns on RE2, a
step budget), and where it cannot hold the loop: in a helper process of the calling cell's principal
(``service.tools.output_checks``).

* Once per listing (``OutputSchema``, one per tool of a server's view): the schema is encoded and
  measured against the schema guard's limits (bytes, JSON objects, nesting).  A schema over them
  refuses every call of its tool before the call is sent.
* Once per call: a result with ``isError`` is not checked (the MCP contract); one without
  ``structuredContent`` is refused; the value is encoded (one native encode, at most
  ``MAX_CHECKED_BYTES``) and checked once.  A tiny schema and value (``INLINE_BYTES`` each) are
  checked inline on at most ``INLINE_STEPS`` steps, a few milliseconds; everything else, and a tiny
  pair that needs more steps, in the helper, which vets the schema (the guard, the meta-schema) and
  keeps it compiled.

Whatever does not fit is an ``McpProtocolError`` naming the server, the tool and, from the schema side
(the value is withheld), what does not match.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bridge import jsoncodec
from bridge.json_types import JsonObject
from service.tools.contracts import SchemaCheck, ValidationDeferred
from service.tools.errors import SchemaRefused
from service.tools.output_checks import OutputJob, OutputVerdict
from service.tools.schema_checks import INLINE_SCHEMA_BYTES, schema_problem_of
from service.tools.schema_guard import SchemaLimits, encode_caller_schema

from .errors import McpProtocolError

if TYPE_CHECKING:
    from service.helpers.pool import HelperPool

__all__ = ["INLINE_BYTES", "INLINE_STEPS", "MAX_CHECKED_BYTES", "OutputSchema", "ResultChecker"]

#: A schema and a value both this small are checked on the event loop (as the schema checker's own
#: tiny schemas are): a helper round trip costs more than the check.
INLINE_BYTES = INLINE_SCHEMA_BYTES
#: Steps (keyword evaluations, or units of pattern work) an inline check may take, 2-15 us each: a
#: pair that needs more is checked again in the helper, from the start.
INLINE_STEPS = 200
#: Bytes of ``structuredContent`` (compact JSON) a result checked against an ``outputSchema`` may hold.
MAX_CHECKED_BYTES = 16 * 1024 * 1024


class OutputSchema:
    """One tool's ``outputSchema`` as one listing gave it: measured, and (tiny) vetted and compiled, once.

    Everything here is the same for every caller (the limits are the service's), so it is kept on the
    listing's view of the tool and dropped with it.
    """

    def __init__(self, schema: JsonObject) -> None:
        self.schema = schema
        self._measured: bytes | str | None = None  # its compact JSON, or why it is refused
        self._inline: SchemaCheck | str | None = None  # a tiny schema's compiled check, or its problem

    def measured(self, limits: SchemaLimits) -> bytes | str:
        """The schema's compact JSON, or why it is over the guard's limits (native work only)."""
        if self._measured is None:
            try:
                encoded = encode_caller_schema(self.schema, limits)
            except SchemaRefused as exc:
                self._measured = str(exc)
            else:
                objects = encoded.count(b"{")  # an upper bound: a `{` inside a string counts too
                self._measured = (
                    encoded
                    if objects <= limits.max_total_objects
                    else f"{objects} JSON objects, over the cap of {limits.max_total_objects}"
                )
        return self._measured

    def inline(self, encoded: bytes, limits: SchemaLimits) -> SchemaCheck | str:
        """The tiny schema ``encoded`` vetted (the guard, the meta-schema) and compiled here, once."""
        if self._inline is None:
            problem = schema_problem_of(encoded, limits)
            self._inline = problem if problem is not None else SchemaCheck(jsoncodec.loads(encoded))
        return self._inline


@dataclass(frozen=True)
class ResultChecker:
    """Checks one caller's MCP results: inline when tiny, else in a helper process of its principal."""

    helpers: HelperPool
    limits: SchemaLimits
    tenant: str
    principal: str | None  # the cell's (``CellSpec.principal``; None: a helper for the one job)

    def before_call(self, server: str, tool: str, output: OutputSchema | None) -> None:
        """Refuse a call before anything is sent when its tool's ``outputSchema`` is known to be unusable
        (over the limits, or tiny and refused by the checks)."""
        if output is not None:
            self._schema(server, tool, output)

    async def check(self, server: str, tool: str, output: OutputSchema | None, result: JsonObject) -> None:
        """Raise ``McpProtocolError`` unless ``result`` fits the tool's ``outputSchema`` (if it has one).

        ``HelperFailed`` when no helper could check it (the service's trouble, not the server's).  Past the
        tenant's cap on helper jobs the check waits its turn: the call ran, refusing would lose it.
        """
        if output is None or result.get("isError") is True:
            return
        schema = self._schema(server, tool, output)
        if "structuredContent" not in result:
            raise _answer(server, tool, "it sent no structuredContent, though the tool declares an outputSchema")
        value = result["structuredContent"]
        try:
            encoded = jsoncodec.dumps(value)
        except jsoncodec.JSONEncodeError:
            raise _answer(server, tool, "its structuredContent is nested too deeply to check") from None
        if len(encoded) > MAX_CHECKED_BYTES:
            raise _answer(
                server,
                tool,
                f"its structuredContent is {len(encoded)} bytes of JSON, over the {MAX_CHECKED_BYTES} a result "
                "checked against an outputSchema may hold",
            )
        verdict: OutputVerdict | None = None
        check = output.inline(schema, self.limits) if len(schema) <= INLINE_BYTES else None
        if isinstance(check, SchemaCheck) and len(encoded) <= INLINE_BYTES:
            with contextlib.suppress(ValidationDeferred):  # more than a few milliseconds: the helper, from the start
                lines = check.problems(value, max_steps=INLINE_STEPS)
                verdict = ("mismatch", lines) if lines else ("ok", ())
        if verdict is None:
            job = OutputJob(schema, encoded, self.limits)
            verdict = await self.helpers.run_for(job, self.tenant, self.principal, wait=True)
        outcome, lines = verdict
        if outcome == "unusable":
            raise _unusable(server, tool, lines[0])
        if outcome == "mismatch":
            raise _answer(
                server,
                tool,
                "its structuredContent does not match the tool's outputSchema (value withheld): " + "; ".join(lines),
            )

    def _schema(self, server: str, tool: str, output: OutputSchema) -> bytes:
        """The schema's compact JSON; ``McpProtocolError`` when it is over the limits, or tiny and refused."""
        measured = output.measured(self.limits)
        if isinstance(measured, bytes) and len(measured) <= INLINE_BYTES:
            check = output.inline(measured, self.limits)
            measured = check if isinstance(check, str) else measured
        if isinstance(measured, str):
            raise _unusable(server, tool, measured)
        return measured


def _answer(server: str, tool: str, why: str) -> McpProtocolError:
    return McpProtocolError(
        f"MCP server '{server}' sent an unusable answer for tool '{tool}': {why}", server=server, tool=tool
    )


def _unusable(server: str, tool: str, problem: str) -> McpProtocolError:
    return McpProtocolError(
        f"MCP server '{server}' declares an outputSchema for tool '{tool}' that cannot be checked ({problem}); "
        "its results are refused until the server's author fixes the schema",
        server=server,
        tool=tool,
    )
