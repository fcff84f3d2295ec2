"""MCP tool results checked against their outputSchema by the service's validators (``service.mcp.results``).

A real server (``servers/output_schemas.py``) over stdio, the hub, and real helper processes: the SDK
never validates a result (its stock jsonschema would run ``^(a+)+$`` on Python's backtracking ``re``,
on the event loop); RE2 judges it, inline for a tiny schema and value, else in a helper process of
the caller's principal.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bridge import jsoncodec
from service.errors import HelperFailed
from service.helpers.job import Answer
from service.helpers.pool import HelperPool
from service.mcp.errors import McpError
from service.mcp.hub import McpHub
from service.mcp.results import INLINE_BYTES, MAX_CHECKED_BYTES, OutputSchema, ResultChecker
from service.settings_mcp import McpServerConfig
from service.tools import output_checks
from service.tools.output_checks import OutputJob, output_problems
from service.tools.schema_guard import SchemaLimits
from tests.support.helper_pools import helper_pool

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).parent / "servers" / "output_schemas.py")
LIMITS = SchemaLimits()
D = 20.0
PRINCIPAL = "alpha\x00key\x00test"
#: What the issue measured: 25 a's and a "!" against ^(a+)+$ held the event loop 4.6-5.8 s in the SDK.
REPRODUCTION = {"n": 25}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def hub(anyio_backend: str) -> AsyncIterator[McpHub]:
    config = McpServerConfig(name="out", command=sys.executable, args=(SERVER, "stdio"), timeout_ms=20000)
    hub = McpHub([config])
    await hub.start()
    yield hub
    await hub.close()


@pytest.fixture
async def helpers() -> AsyncIterator[HelperPool]:
    pool = helper_pool(spares=0)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture
def checker(helpers: HelperPool) -> ResultChecker:
    return ResultChecker(helpers, LIMITS, "alpha", PRINCIPAL)


async def call(hub: McpHub, checker: ResultChecker, tool: str, args: dict[str, object] | None = None) -> dict:
    return await hub.call_tool("out", tool, args or {}, tenant="alpha", deadline_s=D, results=checker)


async def calls(hub: McpHub) -> dict:
    return (await hub.call_tool("out", "calls", {}, tenant="alpha", deadline_s=D))["structuredContent"]


async def test_the_reproduction_is_refused_by_re2_inline_without_a_helper(hub: McpHub, checker: ResultChecker) -> None:
    """The issue's schema and answer: tiny both, so checked on the loop within a few ms of steps; RE2
    refuses it at once (no backtracking), with the documented error naming the pattern."""
    with pytest.raises(McpError) as info:
        await call(hub, checker, "evil", REPRODUCTION)
    assert info.value.code == "mcp_protocol"
    assert info.value.message == (
        "MCP server 'out' sent an unusable answer for tool 'evil': its structuredContent does not match the "
        'tool\'s outputSchema (value withheld): $.s: must match pattern "^(a+)+$"'
    )
    assert checker.helpers.started == 0  # no helper process was needed


async def test_a_long_evil_string_is_checked_in_a_helper_of_the_callers_principal(
    hub: McpHub, checker: ResultChecker
) -> None:
    """5,000 a's and a "!" (Python's re would never finish) is over the inline size: a helper of the
    caller's principal checks it, and the call completes with RE2's verdict."""
    with pytest.raises(McpError, match=r"does not match the tool's outputSchema \(value withheld\): \$\.s: must"):
        await call(hub, checker, "evil", {"n": 5000})
    assert list(checker.helpers.seats) == [PRINCIPAL]  # the helper that checked it stays the principal's
    matching = await call(hub, checker, "evil", {"n": 5000, "tail": ""})
    assert matching["structuredContent"] == {"s": "a" * 5000}


async def test_a_wide_schema_is_checked_in_the_helper_even_for_a_tiny_value(
    hub: McpHub, checker: ResultChecker
) -> None:
    """A schema over the inline size goes to the helper whatever the value's size; it passes and fails there."""
    assert (await call(hub, checker, "evil_wide", {"n": 3, "tail": ""}))["structuredContent"] == {"s": "aaa"}
    assert list(checker.helpers.seats) == [PRINCIPAL]
    with pytest.raises(McpError, match=r"tool 'evil_wide': its structuredContent does not match"):
        await call(hub, checker, "evil_wide", REPRODUCTION)


async def test_patterns_are_read_as_json_schema_reads_them_not_as_pythons_re(
    hub: McpHub, checker: ResultChecker
) -> None:
    """``^\\D+$`` fits Arabic-Indic digits in ECMA-262 and RE2 (the SDK's check, on Python's ``re``, would
    refuse the answer): the result comes back."""
    result = await call(hub, checker, "non_digits")
    assert result["structuredContent"] == {"s": "\u0661\u0662\u0663"}


async def test_an_unusable_tiny_schema_refuses_the_call_before_it_is_sent(hub: McpHub, checker: ResultChecker) -> None:
    """A pattern RE2 cannot run makes the tool's outputSchema uncheckable: its calls are refused, unsent."""
    before = (await calls(hub)).get("lookahead", 0)
    with pytest.raises(McpError) as info:
        await call(hub, checker, "lookahead")
    assert info.value.code == "mcp_protocol"
    assert "declares an outputSchema for tool 'lookahead' that cannot be checked (pattern '^(?=a)'" in str(info.value)
    assert "its results are refused until the server's author fixes the schema" in str(info.value)
    assert (await calls(hub)).get("lookahead", 0) == before


async def test_a_schema_over_the_guards_size_cap_refuses_the_call_before_it_is_sent(
    hub: McpHub, checker: ResultChecker
) -> None:
    """A 170 KB outputSchema is over the schema guard's 64 KiB: measured once per listing, never walked."""
    before = (await calls(hub)).get("huge_schema", 0)
    with pytest.raises(McpError, match=r"cannot be checked \(\d+ bytes of JSON, over the cap of 65536 per schema\)"):
        await call(hub, checker, "huge_schema")
    assert (await calls(hub)).get("huge_schema", 0) == before
    assert checker.helpers.started == 0


async def test_a_result_without_structured_content_is_refused_and_an_error_result_is_not_checked(
    hub: McpHub, checker: ResultChecker
) -> None:
    """The MCP contract: a tool with an outputSchema must send structuredContent, unless it reports an error."""
    with pytest.raises(McpError, match=r"it sent no structuredContent, though the tool declares an outputSchema"):
        await call(hub, checker, "no_structured")
    assert await call(hub, checker, "fails") == {"content": [{"type": "text", "text": "it broke"}], "isError": True}


async def test_without_a_checker_the_hub_returns_what_the_server_sent(hub: McpHub) -> None:
    """The hub itself checks nothing (a cell's scope brings its checker), and neither does the SDK: the
    mismatching answer comes back unchanged."""
    result = await hub.call_tool("out", "evil", REPRODUCTION, tenant="alpha", deadline_s=D)
    assert result["structuredContent"] == {"s": "a" * 25 + "!"}


# ---- the helper's side, and the service's check of its answer ------------------------------------


def test_a_helper_vets_and_compiles_each_schema_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper keeps what it compiled: the second value against the same schema is not vetted again."""
    monkeypatch.setattr(output_checks, "_kept", type(output_checks._kept)())
    vetted: list[bytes] = []
    real = output_checks.schema_problem_of
    monkeypatch.setattr(output_checks, "schema_problem_of", lambda s, lim: vetted.append(s) or real(s, lim))
    schema = b'{"properties":{"s":{"type":"string","pattern":"^(a+)+$"}}}'
    assert output_problems(schema, b'{"s":"aaa"}', LIMITS) == ("ok", ())
    assert output_problems(schema, b'{"s":"aa!"}', LIMITS) == ("mismatch", ('$.s: must match pattern "^(a+)+$"',))
    assert vetted == [schema]


def test_a_value_that_needs_too_many_steps_is_refused_not_run_on() -> None:
    """The contracts' step budget bounds the helper's work too: a pattern search costlier than the
    whole budget is refused before it runs."""
    schema = b'{"properties":{"s":{"type":"string","pattern":"[ab]*a[ab]{200}c"}}}'
    verdict, lines = output_problems(schema, b'{"s":"' + b"ab" * 1_000_000 + b'"}', LIMITS)
    assert verdict == "mismatch" and "over the budget" in lines[0], lines


@pytest.mark.parametrize(
    "fields",
    [
        {"outcome": "mismatch", "details": []},
        {"outcome": "mismatch", "details": ["x" * 300]},
        {"outcome": "mismatch", "details": ["a"] * 6},
        {"outcome": "unusable", "problem": ""},
        {"outcome": "ok", "details": ["a"]},
        {"outcome": "fine"},
    ],
)
def test_an_answer_out_of_shape_is_refused(fields: dict[str, object]) -> None:
    """What an owned helper writes is checked field by field: empty, long or too many lines, stray fields."""
    job = OutputJob(b"{}", b"{}", LIMITS)
    with pytest.raises(HelperFailed):
        job.finish(Answer({"t": "answer", "id": 1, "frames": 0, **fields}, []))


# ---- the checker's bounds, on values of our own ----------------------------------------------------


async def test_a_tiny_pair_that_needs_more_steps_than_inline_allows_goes_to_the_helper(
    checker: ResultChecker,
) -> None:
    """A 40-byte schema and a ~250-byte value of 120 numbers take several hundred keyword steps, over the
    inline budget: the check is made again in a helper, from the start, and finds the one bad item."""
    output = OutputSchema({"type": "array", "items": {"type": "integer", "maximum": 9}})
    value = [1] * 119 + [10]
    assert len(jsoncodec.dumps(value)) <= INLINE_BYTES
    with pytest.raises(McpError, match=r"value withheld\): \$\[119\]: must be <= 9$"):
        await checker.check("s", "t", output, {"content": [], "structuredContent": value})
    assert list(checker.helpers.seats) == [PRINCIPAL]


async def test_structured_content_over_the_checked_size_is_refused_before_any_walk(checker: ResultChecker) -> None:
    """Past ``MAX_CHECKED_BYTES`` of JSON the value is refused on its encoded size alone."""
    output = OutputSchema({"type": "object"})
    big = {"s": "x" * MAX_CHECKED_BYTES}
    with pytest.raises(McpError, match=rf"its structuredContent is {MAX_CHECKED_BYTES + 8} bytes of JSON, over"):
        await checker.check("s", "t", output, {"content": [], "structuredContent": big})
    assert checker.helpers.started == 0


async def test_checks_past_the_tenants_helper_job_cap_wait_for_room_instead_of_failing() -> None:
    """The calls ran: a tenant's checks beyond its cap of jobs in the pool wait their turn (a body would be
    refused with 429), and each gets its own verdict."""
    pool = helper_pool(spares=0, max_jobs_per_tenant=1)
    try:
        checker = ResultChecker(pool, LIMITS, "alpha", PRINCIPAL)
        output = OutputSchema({"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}})
        values = [{"s": "a" * (300 + i) + ("!" if i % 2 else "")} for i in range(6)]
        outcomes = await asyncio.gather(
            *(checker.check("s", "t", output, {"content": [], "structuredContent": v}) for v in values),
            return_exceptions=True,
        )
    finally:
        await pool.close()
    assert [type(o).__name__ for o in outcomes] == ["NoneType", "McpProtocolError"] * 3, outcomes
