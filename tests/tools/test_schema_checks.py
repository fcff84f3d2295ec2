"""Client tool schemas: measured natively on the loop, checked in a helper process, compiled once."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator

import pytest

from bridge import jsoncodec
from service.helpers.pool import HelperPool
from service.principals import helper_principal
from service.tools import schema_checks, schema_guard
from service.tools.catalog import checked_client_tools, client_entries
from service.tools.errors import ClientToolDeclError, InvalidInputError
from service.tools.schema_checks import INLINE_SCHEMA_BYTES, SchemaChecker, schema_problem_of
from service.tools.schema_guard import SchemaLimits
from tests.support.helper_pools import ALPHA, ALPHA_NARROW, helper_pool

LIMITS = SchemaLimits()
#: ~20 KiB, 1,500 subschemas: checked in the helper, valid.
WIDE = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(1500)}}
#: As large, with one keyword of the wrong type deep inside (the meta-schema refuses it).
WIDE_BAD = {**WIDE, "properties": {**WIDE["properties"], "p7": {"type": "integer", "minimum": "zero"}}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def helpers() -> AsyncIterator[HelperPool]:
    pool = helper_pool()
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture
def checker(helpers: HelperPool) -> SchemaChecker:
    return SchemaChecker(LIMITS, helpers)


@pytest.fixture(autouse=True)
def fresh_vetted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema_checks, "_vetted", OrderedDict())


def test_a_megabyte_of_empty_arrays_is_refused_without_a_python_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """600k empty arrays (1.8 MB) are refused by the size cap, measured by one encode; no guard walk runs."""

    def walked(*args: object) -> None:
        raise AssertionError("a guard walk ran over a schema past the size cap")

    monkeypatch.setattr(schema_guard, "_check_depth", walked)
    monkeypatch.setattr(schema_guard, "_Expansion", walked)
    bomb = {"type": "object", "x": [[] for _ in range(600_000)]}
    with pytest.raises(ClientToolDeclError, match=r"1800023 bytes of JSON, over the cap of 65536 per schema") as info:
        checked_client_tools([{"name": "t", "input_schema": bomb}], LIMITS)
    assert info.value.field == "client_tools[0].input_schema"


def test_schemas_deeper_than_the_codec_encodes_are_refused_naming_the_depth_cap() -> None:
    """A schema nested 300 deep cannot be encoded: the refusal names the depth cap, not an encoder error."""
    deep: dict = {}
    for _ in range(300):
        deep = {"not": deep}
    with pytest.raises(ClientToolDeclError, match=r"nested deeper than 64 levels .*\(cap 64\)"):
        checked_client_tools([{"name": "t", "input_schema": deep}], LIMITS)


@pytest.mark.anyio
async def test_tiny_schemas_are_checked_inline_and_large_ones_in_the_helper(checker: SchemaChecker) -> None:
    """A schema of a few bytes needs no helper process; a large one is checked there, with the same verdicts."""
    tiny = jsoncodec.dumps({"type": "object", "properties": {"a": {"type": "string"}}})
    assert len(tiny) <= INLINE_SCHEMA_BYTES
    assert await checker.problems([tiny], ALPHA) == {tiny: None}
    assert checker.helpers.live == 0  # no helper serves anyone yet
    good, bad = jsoncodec.dumps(WIDE), jsoncodec.dumps(WIDE_BAD)
    found = await checker.problems([good, bad, good], ALPHA)
    assert checker.helpers.live == 1
    assert found == {good: None, bad: schema_problem_of(bad, LIMITS)}
    assert found[bad] is not None and "properties/p7/minimum" in found[bad]


@pytest.mark.anyio
async def test_guard_refusals_come_back_from_the_helper(checker: SchemaChecker) -> None:
    """The guard's walks run in the helper too: a remote $ref in a large schema is named there."""
    remote = {**WIDE, "properties": {**WIDE["properties"], "r": {"$ref": "http://127.0.0.1:9/x.json"}}}
    encoded = jsoncodec.dumps(remote)
    problem = (await checker.problems([encoded], ALPHA))[encoded]
    assert problem is not None and "points outside the schema" in problem


@pytest.mark.anyio
async def test_checked_entries_validate_and_vetted_schemas_are_not_checked_again(checker: SchemaChecker) -> None:
    """Entries built from the helper's verdicts validate calls; a repeat declaration is already vetted."""
    checked = checked_client_tools([{"name": "t", "input_schema": WIDE}], LIMITS)
    [(_, encoded)] = checked
    alpha = helper_principal("key", ALPHA)
    assert schema_checks.vetted_contract(encoded, alpha) is None
    [entry] = client_entries(checked, await checker.problems([encoded], ALPHA), alpha)
    with pytest.raises(InvalidInputError, match=r"\$\.p3: expected integer, got string"):
        entry.contract.check_input({"p3": "x"}, "t")
    assert schema_checks.vetted_contract(encoded, alpha) is entry.contract
    with pytest.raises(ClientToolDeclError, match=r"client_tools\[0\]\.input_schema: schema is invalid at"):
        bad = checked_client_tools([{"name": "t", "input_schema": WIDE_BAD}], LIMITS)
        client_entries(bad, await checker.problems([e for _, e in bad], ALPHA), alpha)


@pytest.mark.anyio
async def test_a_verdict_is_remembered_only_for_the_principal_whose_helper_reached_it(checker: SchemaChecker) -> None:
    """A helper an attacker owns could vouch for a bad schema: its verdict never spares another principal
    (nor, without a principal, anyone) the check."""
    checked = checked_client_tools([{"name": "t", "input_schema": WIDE}], LIMITS)
    [(_, encoded)] = checked
    alpha, narrow = helper_principal("key", ALPHA), helper_principal("key", ALPHA_NARROW)
    [entry] = client_entries(checked, await checker.problems([encoded], ALPHA), alpha)
    assert schema_checks.vetted_contract(encoded, alpha) is entry.contract
    assert schema_checks.vetted_contract(encoded, narrow) is None
    client_entries(checked, {encoded: None}, None)
    assert schema_checks.vetted_contract(encoded, None) is None
