"""Contracts: input validation, output schemas, discriminated outputs, invalid schemas."""

from __future__ import annotations

import pytest

from service.tools.catalog import ToolCatalog
from service.tools.contracts import accepts, schema_problem
from service.tools.errors import (
    InputContractError,
    InvalidContractError,
    InvalidInputError,
    OutputContractError,
)
from service.tools.hooks import Hook
from service.tools.session import CallSession

SECRET = "s3cr3t-value-do-not-show"
OBJECT_IN = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
    "additionalProperties": False,
}
LIST_OUT = {
    "type": "object",
    "properties": {"items": {"type": "array"}},
    "required": ["items"],
    "additionalProperties": False,
}
STATUS_OUT = {
    "type": "object",
    "properties": {"ready": {"type": "boolean"}},
    "required": ["ready"],
    "additionalProperties": False,
}
UNION_OUT = {
    "anyOf": [LIST_OUT, STATUS_OUT],
    "x-openclaw-input-discriminator": {
        "version": 1,
        "inputProperty": "action",
        "mapping": {"list": 0, "status": 1},
    },
}
ACTION_IN = {"type": "object", "properties": {"action": {"enum": ["list", "status"]}}, "required": ["action"]}


def _session(*specs, hooks=()):
    return CallSession(ToolCatalog.build(list(specs), hooks=list(hooks)).view(), max_calls=50)


@pytest.mark.anyio
async def test_invalid_input_names_fields_and_tool_does_not_run(make_tool, ctx) -> None:
    """Bad arguments are invalid_input naming each field; execute() is never entered."""
    spec = make_tool("weather", input_schema=OBJECT_IN, result={})
    with pytest.raises(InvalidInputError) as info:
        await _session(spec).call("weather", {"days": 0, "extra": 1}, ctx)
    err = info.value
    assert err.code == "invalid_input" and not err.effect_started
    assert 'missing required property "city"' in err.message
    assert "$.days: must be >= 1" in err.message
    assert '"extra"' in err.message
    assert spec.execute.calls == []


@pytest.mark.anyio
async def test_output_mismatch_hides_value_and_caps_details(make_tool, ctx) -> None:
    """An output mismatch is output_contract with at most 5 details of at most 256 bytes, no value."""
    out = {
        "type": "object",
        "properties": {f"f{i}": {"type": "integer"} for i in range(8)},
        "required": [f"f{i}" for i in range(8)],
    }
    value = {f"f{i}": SECRET + "x" * 300 for i in range(8)}
    spec = make_tool("leaky", output_schema=out, result=value)
    with pytest.raises(OutputContractError) as info:
        await _session(spec).call("leaky", {}, ctx)
    err = info.value
    assert err.code == "output_contract" and err.effect_started
    assert len(err.details) == 5
    assert all(len(d.encode()) <= 256 for d in err.details)
    assert SECRET not in err.message and all(SECRET not in d for d in err.details)
    assert "(+3 more)" in err.details[-1]
    assert spec.execute.calls == [{}]


@pytest.mark.anyio
async def test_details_are_capped_in_utf8_bytes(make_tool, ctx) -> None:
    """A long non-ASCII path is cut to 256 UTF-8 bytes without splitting a character."""
    key = "ключ" * 100
    out = {"type": "object", "properties": {key: {"type": "integer"}}}
    spec = make_tool("wide", output_schema=out, result={key: "no"})
    with pytest.raises(OutputContractError) as info:
        await _session(spec).call("wide", {}, ctx)
    (detail,) = info.value.details
    assert len(detail.encode("utf-8")) <= 256 and detail.endswith("…")


@pytest.mark.anyio
@pytest.mark.parametrize("field", ["input_schema", "output_schema"])
async def test_invalid_schema_refused_before_running(make_tool, ctx, field) -> None:
    """A schema that does not compile makes every call invalid_contract; the tool never runs."""
    spec = make_tool("broken", **{field: {"type": "objekt"}}, result={})
    view = ToolCatalog.build([spec]).view()
    assert "output" not in view.handle("broken")
    with pytest.raises(InvalidContractError, match="broken cannot run: its .* is invalid"):
        await CallSession(view, max_calls=5).call("broken", {}, ctx)
    assert spec.execute.calls == []


@pytest.mark.anyio
async def test_unresolvable_ref_is_invalid_contract(make_tool, ctx) -> None:
    """A $ref that cannot be resolved is reported as invalid_contract, not a crash."""
    spec = make_tool("refs", input_schema={"$ref": "https://example.invalid/schema.json"}, result={})
    with pytest.raises(InvalidContractError):
        await _session(spec).call("refs", {}, ctx)
    assert spec.execute.calls == []


@pytest.mark.anyio
async def test_discriminated_output_checked_per_branch(make_tool, ctx) -> None:
    """The result must match the branch selected by the input's `action`."""
    spec = make_tool(
        "jobs",
        input_schema=ACTION_IN,
        output_schema=UNION_OUT,
        result=lambda p: {"items": []} if p["action"] == "list" else {"ready": True},
    )
    session = _session(spec)
    assert await session.call("jobs", {"action": "list"}, ctx) == {"items": []}
    assert await session.call("jobs", {"action": "status"}, ctx) == {"ready": True}
    wrong = make_tool("jobs", input_schema=ACTION_IN, output_schema=UNION_OUT, result={"ready": True})
    with pytest.raises(OutputContractError, match='missing required property "items"'):
        await _session(wrong).call("jobs", {"action": "list"}, ctx)


@pytest.mark.anyio
async def test_hook_changing_selector_must_satisfy_callers_branch(make_tool, ctx) -> None:
    """When a before-hook switches `action`, the result must also fit the caller's branch."""
    spec = make_tool(
        "jobs",
        input_schema=ACTION_IN,
        output_schema=UNION_OUT,
        result=lambda p: {"items": []} if p["action"] == "list" else {"ready": True},
    )
    switch = Hook(before=lambda call: {"action": "status"})
    with pytest.raises(OutputContractError):
        await _session(spec, hooks=[switch]).call("jobs", {"action": "list"}, ctx)
    assert spec.execute.calls == [{"action": "status"}]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "annotation",
    [
        {"version": 2, "inputProperty": "action", "mapping": {"list": 0}},
        {"version": 1, "inputProperty": "action", "mapping": {"list": 5}},
        {"version": 1, "inputProperty": "action", "mapping": {}},
    ],
)
async def test_malformed_discriminator_refused_before_side_effects(make_tool, ctx, annotation) -> None:
    """A malformed discriminator annotation is invalid_contract and the tool never runs."""
    schema = {"anyOf": [LIST_OUT, STATUS_OUT], "x-openclaw-input-discriminator": annotation}
    spec = make_tool("jobs", input_schema=ACTION_IN, output_schema=schema, result={"items": []})
    with pytest.raises(InvalidContractError, match="x-openclaw-input-discriminator"):
        await _session(spec).call("jobs", {"action": "list"}, ctx)
    assert spec.execute.calls == []


@pytest.mark.anyio
async def test_hook_prepared_arguments_are_revalidated(make_tool, ctx) -> None:
    """Arguments a before-hook produces must still match the input schema (input_contract)."""
    spec = make_tool("weather", input_schema=OBJECT_IN, result={})
    breaker = Hook(before=lambda call: {"city": 7})
    with pytest.raises(InputContractError) as info:
        await _session(spec, hooks=[breaker]).call("weather", {"city": "Oslo"}, ctx)
    assert info.value.code == "input_contract"
    assert spec.execute.calls == []


def test_accepts_and_schema_problem() -> None:
    """`accepts` runs the validator; `schema_problem` explains an invalid schema."""
    assert accepts({"type": "object"}, {})
    assert not accepts(OBJECT_IN, {})
    assert not accepts({"type": 5}, {})
    assert schema_problem(OBJECT_IN) is None
    assert "invalid" in schema_problem({"type": "objekt"})


@pytest.mark.anyio
async def test_pydantic_input_model(ctx) -> None:
    """A pydantic model class is accepted as input schema and enforced."""
    from pydantic import BaseModel

    from service.tools.plugin import ToolSpec

    class Args(BaseModel):
        n: int

    async def run(call_id, params, ctx):
        return params["n"] * 2

    spec = ToolSpec(name="double", description="x2", execute=run, input_schema=Args)
    session = _session(spec)
    assert await session.call("double", {"n": 4}, ctx) == 8
    with pytest.raises(InvalidInputError, match=r"\$.n: expected integer"):
        await session.call("double", {"n": "4"}, ctx)
