"""Tool contracts through cells: input validation, output contracts, discriminated outputs, tool errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api_files.discriminator import DISCRIMINATOR_KEY
from service.app import create_app
from service.assembly import build_components
from service.settings import Settings, ToolSettings
from service.tools import ToolSpec
from tests.conftest import run
from tests.support.tools import TEST_TOOLS

SHIPPING = "service.demo.shipping"
SECRET = "secret-value-7f3a9"
RUNS: dict[str, int] = {}


def _counted(name: str, result: Any) -> Any:
    async def execute(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
        RUNS[name] = RUNS.get(name, 0) + 1
        return result(params) if callable(result) else result

    return execute


def _closed(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


_BRANCH_A = _closed({"a": {"type": "integer"}})
_BRANCH_B = _closed({"b": {"type": "string"}})
_MODE_INPUT = _closed({"mode": {"enum": ["a", "b"]}, "lie": {"type": "boolean"}})


def _branchy_result(params: dict[str, Any]) -> dict[str, Any]:
    # `lie` answers with the other branch: valid for the union, wrong for the selected branch.
    want_a = (params["mode"] == "a") != params["lie"]
    return {"a": 1} if want_a else {"b": "x"}


CONTRACT_TOOLS = [
    ToolSpec(
        name="strict_sum",
        description="Adds two integers.",
        execute=_counted("strict_sum", lambda p: p["x"] + p["y"]),
        input_schema=_closed({"x": {"type": "integer"}, "y": {"type": "integer"}}),
    ),
    ToolSpec(
        name="bad_output",
        description="Returns a value that breaks its output schema.",
        execute=_counted("bad_output", {"n": SECRET}),
        output_schema=_closed({"n": {"type": "integer"}}),
    ),
    ToolSpec(
        name="very_bad_output",
        description="Breaks its output schema in many places.",
        execute=_counted("very_bad_output", {f"k{i}": SECRET for i in range(8)}),
        output_schema=_closed({f"k{i}": {"type": "integer"} for i in range(8)}),
    ),
    ToolSpec(
        name="branchy",
        description="Discriminated output; can lie about its branch.",
        execute=_counted("branchy", _branchy_result),
        input_schema=_MODE_INPUT,
        output_schema={
            "anyOf": [_BRANCH_A, _BRANCH_B],
            DISCRIMINATOR_KEY: {"version": 1, "inputProperty": "mode", "mapping": {"a": 0, "b": 1}},
        },
    ),
    ToolSpec(
        name="bad_annotation",
        description="Malformed discriminator annotation.",
        execute=_counted("bad_annotation", {"a": 1}),
        input_schema=_MODE_INPUT,
        output_schema={
            "anyOf": [_BRANCH_A, _BRANCH_B],
            DISCRIMINATOR_KEY: {"version": 2, "inputProperty": "mode", "mapping": {"a": 0}},
        },
    ),
]


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """Shipping plugin + test tools + the contract tools above."""
    data_dir = str(tmp_path_factory.mktemp("contracts"))
    settings = (
        Settings(workers=2, data_dir=data_dir, kill_grace_ms=500)
        .replace(tools=ToolSettings(plugins=(SHIPPING,)))
        .check()
    )
    services = build_components(settings, extra_tools=[*TEST_TOOLS, *CONTRACT_TOOLS])
    with TestClient(create_app(settings, services)) as c:
        yield c


def caught(client: TestClient, call: str) -> dict[str, Any]:
    """Run `call` in a cell, catch its rejection and return the Error's fields."""
    env = run(
        client,
        f"""
        try {{ const v = await {call}; return {{resolved: v}}; }}
        catch (e) {{ return {{name: e.name, message: e.message, code: e.code, details: e.details,
                             tool: e.tool, effectStatus: e.effectStatus, isError: e instanceof Error}}; }}
    """,
    )
    assert env["status"] == "completed", env
    assert "resolved" not in env["value"], env["value"]
    return env["value"]


def test_valid_input_runs_the_tool(svc):
    """Arguments matching the input schema reach the tool and its details come back."""
    env = run(svc, "return await strict_sum({x: 2, y: 3})")
    assert env["status"] == "completed", env
    assert env["value"] == 5


def test_invalid_input_rejects_with_invalid_input_naming_fields_and_tool_does_not_run(svc):
    """Bad arguments reject with code invalid_input naming each bad field; execute() never runs."""
    before = RUNS.get("strict_sum", 0)
    err = caught(svc, 'strict_sum({x: "two", z: 1})')
    assert err["isError"] is True and err["code"] == "invalid_input"
    assert "strict_sum" in err["message"]
    joined = " ".join(err["details"])
    assert "x" in joined and "y" in joined and "z" in joined, err
    assert err["effectStatus"] == "not_started"
    assert RUNS.get("strict_sum", 0) == before


def test_pydantic_input_model_is_validated_before_the_plugin_runs(svc):
    """The shipping plugin's pydantic input (min_length, gt, enum) is enforced with field names."""
    err = caught(svc, 'quote_shipping({origin: "D", destination: "FR", weight_kg: -1, service: "rocket"})')
    assert err["code"] == "invalid_input"
    for field in ("origin", "weight_kg", "service"):
        assert field in err["message"], err


def test_uncaught_invalid_input_fails_the_cell_in_the_bridge_phase(svc):
    """An uncaught invalid_input rejection ends the cell with code invalid_input, failure_phase bridge."""
    before = RUNS.get("strict_sum", 0)
    env = run(svc, "await strict_sum({x: 1}); return 'unreachable'")
    assert env["status"] == "failed", env
    assert env["code"] == "invalid_input"
    assert env["failure_phase"] == "bridge"
    assert env["error"].startswith("Error: strict_sum: invalid input")
    assert "y" in env["error"]
    assert RUNS.get("strict_sum", 0) == before


def test_output_contract_mismatch_rejects_without_showing_the_value(svc):
    """A value breaking the output schema rejects with output_contract; the value is not revealed."""
    err = caught(svc, "bad_output()")
    assert err["code"] == "output_contract"
    assert "bad_output" in err["message"]
    assert SECRET not in err["message"] and SECRET not in repr(err["details"])
    assert err["effectStatus"] == "unknown"  # the tool ran: side effects may exist


def test_output_contract_shows_at_most_five_short_details(svc):
    """An output breaking eight fields reports at most five details, each at most 256 bytes."""
    err = caught(svc, "very_bad_output()")
    assert err["code"] == "output_contract"
    assert 1 <= len(err["details"]) <= 5
    assert all(len(d.encode()) <= 256 for d in err["details"])
    assert SECRET not in err["message"]


def test_output_contract_failure_never_reaches_the_envelope_value(svc):
    """Uncaught, the output-contract failure fails the cell and the withheld value is nowhere in it."""
    env = run(svc, "return await bad_output()")
    assert env["status"] == "failed", env
    assert env["failure_phase"] == "bridge"
    assert "does not match its output schema" in env["error"]
    assert SECRET not in repr(env)


def test_discriminated_output_accepts_the_selected_branch(svc):
    """Each selector value's own branch passes: shipments list and status, branchy a and b."""
    env = run(
        svc,
        """
        return [await shipments({action: "list"}),
                await shipments({action: "status", shipment_id: "SHP-1003"}),
                await branchy({mode: "a", lie: false}), await branchy({mode: "b", lie: false})];
    """,
    )
    assert env["status"] == "completed", env
    assert env["value"] == [
        {"shipments": ["SHP-1001", "SHP-1002", "SHP-1003"]},
        {"shipment_id": "SHP-1003", "status": "label_created", "destination": "US", "found": True},
        {"a": 1},
        {"b": "x"},
    ]


def test_discriminated_output_is_validated_against_the_selected_branch_only(svc):
    """A value valid for the union but not for the input's branch rejects with output_contract."""
    for mode in ("a", "b"):
        err = caught(svc, f'branchy({{mode: "{mode}", lie: true}})')
        assert err["code"] == "output_contract", (mode, err)


def test_malformed_discriminator_is_refused_before_any_side_effect(svc):
    """A malformed annotation (version 2) rejects with invalid_contract and the tool never runs."""
    err = caught(svc, 'bad_annotation({mode: "a", lie: false})')
    assert err["code"] == "invalid_contract"
    assert "bad_annotation" in err["message"]
    assert RUNS.get("bad_annotation", 0) == 0


def test_tool_errors_reach_the_guest_as_errors_with_code(svc):
    """A tool that raises rejects with an Error carrying code tool_error and its sanitised message."""
    err = caught(svc, 'fail({message: "disk on fire"})')
    assert err["isError"] is True and err["name"] == "Error"
    assert err["code"] == "tool_error"
    assert "disk on fire" in err["message"] and "ValueError" in err["message"]
    assert err["tool"] == "fail"
    assert err["effectStatus"] == "unknown"


def test_unhandled_tool_rejection_fails_a_cell_that_returned(svc):
    """`void fail()` that nobody handles fails the cell even though its main promise resolved."""
    env = run(svc, 'void fail({message: "ignored?"}); await list_carriers(); return "done"')
    assert env["status"] == "failed", env
    assert "ignored?" in env["error"]
