"""Values checked against a schema their sender wrote, where the check cannot hold the event loop.

An MCP server declares a tool's ``outputSchema`` and sends its ``structuredContent``: both are the
server's, and checking one against the other is pure Python (jsonschema, 2-15 us a keyword) that a
hostile pair can stretch to seconds, patterns on RE2 or not.  So the check runs in a helper process
of the caller's principal (``OutputJob``), after the schema guard's checks (``schema_problem_of``) and
under the contracts' step budget; the service side only encodes the value (one native encode).

This module is also the helper's (``service.helpers.jobs`` runs ``output_problems`` there).  A helper
keeps the schemas it vetted and compiled (``_kept``), so a schema is vetted once per helper, not once
per call; a helper serves one principal, so what it keeps is that principal's alone.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict
from typing import Literal, cast

from bridge import jsoncodec
from service.helpers.job import Answer, AnswerCaps, HelperJob, is_str, refuse
from service.helpers.protocol import PROBLEM_CHARS
from service.tools.contracts import MAX_DETAIL_BYTES, MAX_DETAILS, SchemaCheck
from service.tools.schema_checks import schema_problem_of
from service.tools.schema_guard import SchemaLimits

__all__ = ["OutputJob", "OutputVerdict", "output_problems"]

#: ``("ok", ())``, ``("mismatch", what does not fit)`` or ``("unusable", (why the schema cannot be used,))``.
OutputVerdict = tuple[Literal["ok", "mismatch", "unusable"], tuple[str, ...]]

#: Schemas a helper keeps vetted and compiled, and their compact JSON together (each is at most
#: ``SchemaLimits.max_schema_bytes``; compiled and used, a schema of 68 KB took 0.5 MB: about 7 times its JSON).
_KEPT = 32
_KEPT_BYTES = 1024 * 1024
#: (limits, schema) -> its compiled check, or why it cannot be used.
_kept: OrderedDict[tuple[SchemaLimits, bytes], SchemaCheck | str] = OrderedDict()


def output_problems(schema: bytes, value: bytes, limits: SchemaLimits) -> OutputVerdict:
    """Whether ``value`` fits ``schema`` (each its compact JSON), the schema vetted under ``limits`` first."""
    check = _compiled(schema, limits)
    if isinstance(check, str):
        return "unusable", (_cut(check),)
    problems = check.problems(jsoncodec.loads(value))
    return ("mismatch", problems) if problems else ("ok", ())


def _compiled(schema: bytes, limits: SchemaLimits) -> SchemaCheck | str:
    key = (limits, schema)
    found = _kept.get(key)
    if found is not None:
        _kept.move_to_end(key)
        return found
    problem = schema_problem_of(schema, limits)
    made = problem if problem is not None else SchemaCheck(jsoncodec.loads(schema))
    _kept[key] = made
    while len(_kept) > _KEPT or sum(len(encoded) for _, encoded in _kept) > _KEPT_BYTES:
        _kept.popitem(last=False)
    return made


def _cut(problem: str) -> str:
    return problem if len(problem) <= PROBLEM_CHARS else problem[: PROBLEM_CHARS - 1] + "…"


def _is_details(value: object) -> bool:
    """At most ``MAX_DETAILS`` lines of at most ``MAX_DETAIL_BYTES`` characters (the contracts' own caps)."""
    return (
        type(value) is list
        and len(value) <= MAX_DETAILS
        and all(type(line) is str and len(line) <= MAX_DETAIL_BYTES for line in value)
    )


class OutputJob(HelperJob[OutputVerdict]):
    """Check one value against one schema in the helper: it answers ``ok``, ``mismatch`` with the lines
    that say what does not fit, or ``unusable`` with why the schema cannot be used."""

    name = "output"
    purpose = "checks MCP tool results against their outputSchema"
    SHAPES = {"ok": {}, "mismatch": {"details": _is_details}, "unusable": {"problem": is_str}}

    def __init__(self, schema: bytes, value: bytes, limits: SchemaLimits) -> None:
        self.schema = schema
        self.value = value
        self.limits = limits

    def request(self) -> tuple[dict[str, object], list[bytes]]:
        return {"limits": asdict(self.limits)}, [self.schema, self.value]

    def caps(self) -> AnswerCaps:
        # The longest lines it may write, each character escaped (6 bytes) at worst.
        lines = max(MAX_DETAILS * (6 * MAX_DETAIL_BYTES + 8), 6 * PROBLEM_CHARS + 8)
        return AnswerCaps(control_bytes=1024 + lines, control_values=8 + MAX_DETAILS, frames=0, frame_bytes=0)

    def finish(self, answer: Answer) -> OutputVerdict:
        outcome = answer.outcome(self.SHAPES, dict.fromkeys(self.SHAPES, range(1)))
        if outcome == "ok":
            return "ok", ()
        if outcome == "unusable":
            problem = cast("str", answer.field("problem"))
            if not 0 < len(problem) <= PROBLEM_CHARS:
                refuse(f"answered a schema problem of {len(problem)} characters")
            return "unusable", (problem,)
        details = tuple(cast("list[str]", answer.field("details")))
        if not details:
            refuse("answered a mismatch without saying what does not fit")
        return "mismatch", details
