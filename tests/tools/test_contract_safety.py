"""Contracts never fetch or read what a schema names, match patterns in linear time, and bound their work."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest
from jsonschema import Draft202012Validator

from service.tools import contracts
from service.tools.catalog import ClientTool, ToolCatalog
from service.tools.contracts import ToolContract, ValidationDeferred
from service.tools.errors import ClientToolCall, InvalidContractError, InvalidInputError
from service.tools.session import CallSession
from tests.support.counters import BACKTRACKING_DEADLINE_S


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback socket that accepts connections but never answers (urllib would wait forever)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.setblocking(False)
        yield sock


def connected(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def url(sock: socket.socket) -> str:
    return f"http://127.0.0.1:{sock.getsockname()[1]}/schema.json"


def test_remote_ref_in_an_operator_schema_is_never_fetched(listener) -> None:
    """A plugin schema's remote $ref fails as invalid_contract; nothing connects to the URL."""
    contract = ToolContract({"type": "object", "properties": {"a": {"$ref": url(listener)}}}, None)
    with pytest.raises(InvalidContractError, match="could not be applied"):
        contract.check_input({"a": 1}, "t")
    assert not connected(listener)


@pytest.mark.anyio
async def test_plugin_contracts_compile_through_the_no_fetch_path(make_tool, ctx, listener) -> None:
    """Through the catalog, a plugin tool whose schema points at a URL never runs and never connects."""
    spec = make_tool("lookup", input_schema={"$ref": url(listener)})
    session = CallSession(ToolCatalog.build([spec]).view(), max_calls=5)
    with pytest.raises(InvalidContractError):
        await session.call("lookup", {}, ctx)
    assert not connected(listener)
    assert spec.execute.calls == []  # type: ignore[attr-defined]


def test_file_ref_is_never_read(tmp_path) -> None:
    """A file: $ref to a real schema file does not apply that schema (the file is not read)."""
    target = tmp_path / "integer.json"
    target.write_text('{"type": "integer"}')
    contract = ToolContract({"$ref": target.as_uri()}, None)
    with pytest.raises(InvalidContractError):
        contract.check_input("not an integer", "t")


REDOS = "^(a+)+$"


def test_redos_pattern_is_fast_and_correct() -> None:
    """`^(a+)+$` against 40 a's and a `!` answers correctly, without backtracking (2**40 steps)."""
    contract = ToolContract({"type": "string", "pattern": REDOS}, None)
    started = time.perf_counter()
    with pytest.raises(InvalidInputError, match="must match pattern"):
        contract.check_input("a" * 40 + "!", "t")
    contract.check_input("a" * 40, "t")
    assert time.perf_counter() - started < BACKTRACKING_DEADLINE_S


def test_pattern_properties_and_additional_properties_use_re2() -> None:
    """patternProperties (also as seen by additionalProperties) matches keys in linear time."""
    schema = {"type": "object", "patternProperties": {REDOS: {"type": "integer"}}, "additionalProperties": False}
    contract = ToolContract(schema, None)
    started = time.perf_counter()
    contract.check_input({"a" * 40: 1}, "t")
    with pytest.raises(InvalidInputError, match="unexpected properties"):
        contract.check_input({"a" * 40 + "!": 1}, "t")
    with pytest.raises(InvalidInputError, match="expected integer"):
        contract.check_input({"aaa": "x"}, "t")
    assert time.perf_counter() - started < BACKTRACKING_DEADLINE_S


def test_regex_syntax_is_ecma_like() -> None:
    """RE2 semantics: `\\d` is ASCII only and `$` does not match before a trailing newline."""
    contract = ToolContract({"type": "string", "pattern": "^\\d+$"}, None)
    contract.check_input("123", "t")
    for bad in ("١٢٣", "123\n"):
        with pytest.raises(InvalidInputError):
            contract.check_input(bad, "t")


#: Each level applies `node` twice to the same child: 2**depth evaluations without a budget.
RECURSIVE_BOMB = {
    "$defs": {
        "node": {
            "type": "object",
            "allOf": [
                {"properties": {"a": {"$ref": "#/$defs/node"}}},
                {"properties": {"a": {"$ref": "#/$defs/node"}}},
            ],
        }
    },
    "$ref": "#/$defs/node",
}


def nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_validation_work_is_bounded(monkeypatch) -> None:
    """A schema/value pair needing more than the step budget fails as invalid_input naming the budget."""
    monkeypatch.setattr(contracts, "MAX_VALIDATION_STEPS", 5000)
    contract = ToolContract(RECURSIVE_BOMB, None)
    started = time.thread_time()  # the check runs on this thread: CPU time, which load does not inflate
    with pytest.raises(InvalidInputError, match="takes more than 5000 steps"):
        contract.check_input(nested(60), "t")
    assert time.thread_time() - started < 2
    contract.check_input(nested(4), "t")  # small values still validate


def test_small_step_budget_defers_instead_of_failing() -> None:
    """With a smaller `max_steps` the check raises ValidationDeferred (to be repeated off the loop)."""
    contract = ToolContract({"type": "array", "items": {"type": "integer"}}, None)
    with pytest.raises(ValidationDeferred):
        contract.check_input(list(range(5000)), "t", max_steps=100)
    contract.check_input(list(range(5000)), "t")


@pytest.mark.anyio
async def test_large_values_are_validated_off_the_event_loop(ctx) -> None:
    """While a big argument is validated, the event loop keeps running other tasks."""
    schema = {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "integer"}}}}
    view = ToolCatalog.build([]).view(client_tools=[ClientTool("ask", input_schema=schema)])
    session = CallSession(view, max_calls=5)
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    with pytest.raises(ClientToolCall):
        await session.call("ask", [{"x": i} for i in range(20000)], ctx)
    during = ticks - before
    done.set()
    await task
    # Inline, the loop could not tick at all while ~40,000 keywords were checked.
    assert during > 10, during


@pytest.mark.anyio
async def test_loop_guard_keeps_a_digest_not_the_arguments(make_tool, ctx) -> None:
    """Calls with a megabyte of arguments leave only fixed-size loop-guard keys behind."""
    session = CallSession(ToolCatalog.build([make_tool("echo", result="ok")]).view(), max_calls=5)
    for i in range(3):
        assert await session.call("echo", {"blob": str(i) * 1_000_000}, ctx) == "ok"
    assert max(len(repr(key)) for key in session._repeats) < 200


def test_operator_patterns_are_checked_by_re2_too() -> None:
    """A plugin pattern RE2 cannot run makes the contract unusable with a clear problem; deep groups are fine."""
    assert ToolContract({"type": "string", "pattern": "(?=a)"}, None).problem == (
        "input schema is invalid at pattern: '(?=a)' is not a 'regex'"
    )
    deep = ToolContract({"type": "string", "pattern": "(" * 999 + "a" + ")" * 999}, None)
    assert deep.problem is None  # Python's parser would hit the recursion limit here
    deep.check_input("a", "t")


# A pattern RE2 can only run on its NFA (its DFA would need a state per subset of ~2,000 positions).
NFA_PATTERN = "[ab]*a[ab]{999}[ab]{999}c"


def ab_text(n: int) -> str:
    return "".join("a" if (i * 7919) % 3 else "b" for i in range(n))


def test_pattern_search_over_the_budget_is_refused_before_it_runs(monkeypatch) -> None:
    """Program size × text bytes beyond the whole budget is invalid_input naming the pattern; RE2 never runs."""
    searches: list[int] = []
    real = contracts.patterns.search
    monkeypatch.setattr(contracts.patterns, "search", lambda p, t, f=0: searches.append(len(t)) or real(p, t, f))
    contract = ToolContract({"type": "object", "properties": {"s": {"type": "string", "pattern": NFA_PATTERN}}}, None)
    with pytest.raises(InvalidInputError, match=r"against a string of 200000 characters would take \d+ steps") as info:
        contract.check_input({"s": ab_text(200_000)}, "t", max_steps=2000)
    assert NFA_PATTERN in str(info.value) and "send shorter strings" in str(info.value)
    assert searches == []
    # A pattern RE2 runs on its DFA is charged by its own (small) program: a megabyte passes.
    ToolContract({"type": "string", "pattern": "^[a-z]+$"}, None).check_input("a" * 1_000_000, "t")
    assert searches == [1_000_000]


def test_pattern_work_beyond_the_inline_budget_is_deferred_then_checked() -> None:
    """A search too costly for the loop's small budget defers; with the full budget it runs and decides."""
    contract = ToolContract({"type": "string", "pattern": NFA_PATTERN}, None)
    with pytest.raises(ValidationDeferred):
        contract.check_input(ab_text(2000), "t", max_steps=2000)
    with pytest.raises(InvalidInputError, match="must match pattern"):
        contract.check_input(ab_text(2000), "t")
    contract.check_input("a" * 2000 + "c", "t")


def test_many_small_searches_add_up_against_the_budget() -> None:
    """Each search is charged, so 100 strings of 2,000 characters cost what one of 200,000 does."""
    contract = ToolContract({"type": "array", "items": {"type": "string", "pattern": NFA_PATTERN}}, None)
    with pytest.raises(InvalidInputError, match="takes more than 250000 steps"):
        contract.check_input([ab_text(2000)] * 100, "t")


@pytest.mark.anyio
async def test_costly_pattern_searches_run_off_the_event_loop(ctx) -> None:
    """A client tool call whose pattern check needs most of the budget leaves the event loop running."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": NFA_PATTERN}}}
    view = ToolCatalog.build([]).view(client_tools=[ClientTool("ask", input_schema=schema)])
    session = CallSession(view, max_calls=5)
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    with pytest.raises(InvalidInputError, match="must match pattern"):
        await session.call("ask", {"s": ab_text(40_000)}, ctx)
    during = ticks - before
    done.set()
    await task
    # On the loop the search (~0.3 s of RE2) would not let the ticker run at all; RE2 lets go of the GIL.
    assert during > 10, during


def test_re2_is_ours_alone_and_jsonschema_keeps_its_own_keywords() -> None:
    """Our contracts match `\\d` as RE2 does (ASCII only) while jsonschema's stock validator (the one the MCP
    SDK would check results with) still matches it as Python's `re` (any Unicode digit): nothing is
    patched process-wide."""
    schema = {"type": "string", "pattern": "^\\d+$"}
    assert Draft202012Validator(schema).is_valid("١٢٣")
    with pytest.raises(InvalidInputError, match="must match pattern"):
        ToolContract(schema, None).check_input("١٢٣", "t")


@pytest.mark.parametrize(
    "items",
    [
        [1, 1.0],
        [{"a": 1, "b": [2, {"c": None}]}, {"b": [2, {"c": None}], "a": 1}],
        ["x", "y", "x"],
        [True, 1],
        [False, 0, None, "", [], {}],
        [[1, 2], [2, 1]],
        [{"a": 1}, {"a": 1.5}, {"a": "1"}],
        [[True], [1]],
    ],
)
def test_unique_items_judges_as_jsonschema_does(items: list) -> None:
    """Our linear `uniqueItems` finds the same duplicates as jsonschema's pairwise one (JSON equality:
    1 equals 1.0, true is not 1, objects without key order)."""
    schema = {"type": "array", "uniqueItems": True}
    stock = Draft202012Validator(schema).is_valid(items)
    if stock:
        ToolContract(schema, None).check_input(items, "t")
    else:
        with pytest.raises(InvalidInputError, match="must have unique items"):
            ToolContract(schema, None).check_input(items, "t")


def test_unique_items_cost_is_linear_and_charged() -> None:
    """20,000 distinct small objects: jsonschema compares every pair (2 * 10**8 comparisons, minutes)
    inside one step; ours is linear and charges each item, so a small inline budget defers the check."""
    contract = ToolContract({"type": "array", "uniqueItems": True}, None)
    items = [{"a": i, "b": [i]} for i in range(20_000)]
    with pytest.raises(ValidationDeferred):
        contract.check_input(items, "t", max_steps=2000)
    started = time.perf_counter()
    contract.check_input(items, "t")
    with pytest.raises(InvalidInputError, match="must have unique items"):
        contract.check_input([*items, {"b": [7], "a": 7}], "t")
    assert time.perf_counter() - started < BACKTRACKING_DEADLINE_S


def test_a_long_enum_is_charged_for_each_entry_it_compares() -> None:
    """A 10,000-entry enum (49 KB of schema) compares each item of a 600-item array with every entry: an
    evaluation is charged for its entries, so the small inline budget defers the check and the full one
    refuses it, instead of 2,000 such evaluations inline (7 s of the event loop)."""
    contract = ToolContract({"type": "array", "items": {"enum": list(range(10_000))}}, None)
    with pytest.raises(ValidationDeferred):
        contract.check_input([9999] * 600, "t", max_steps=2000)
    with pytest.raises(InvalidInputError, match="takes more than 250000 steps"):
        contract.check_input([9999] * 600, "t")
    contract.check_input([9999] * 100, "t")  # 125,000 steps: within the budget
    short = ToolContract({"type": "array", "items": {"enum": ["a", "b", "c"]}}, None)
    short.check_input(["a"] * 2000, "t", max_steps=5000)  # short enums cost what they did: about a step


def test_a_long_required_list_is_charged_per_name_and_its_errors_are_described_once() -> None:
    """`required` yields one error per missing name, all in one evaluation: each error is charged a step,
    so 2,000 missing names defer the inline check, and they are described once, not once per error (that
    was cubic: 2,000 names against `{}` took 67 s of the event loop)."""
    contract = ToolContract({"type": "object", "required": [f"k{i}" for i in range(20_000)]}, None)
    with pytest.raises(ValidationDeferred):
        contract.check_input({}, "t", max_steps=2000)
    started = time.perf_counter()
    with pytest.raises(InvalidInputError) as info:
        contract.check_input({}, "t")
    assert time.perf_counter() - started < BACKTRACKING_DEADLINE_S
    assert info.value.details[0] == '$: missing required property "k0"'
    assert info.value.details[-1].endswith('missing required property "k4" (+19995 more)')


def test_pattern_keywords_match_keys_and_values_on_re2_through_every_draft() -> None:
    """pattern, patternProperties and additionalProperties (beside patternProperties) run the ReDoS
    pattern in linear time under draft 4, 7 and 2019-09 as under 2020-12."""
    for draft in (
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
    ):
        schema = {
            "$schema": draft,
            "type": "object",
            "properties": {"s": {"type": "string", "pattern": REDOS}},
            "patternProperties": {REDOS: {"type": "integer"}},
            "additionalProperties": {"type": "boolean"},
        }
        contract = ToolContract(schema, None)
        assert contract.problem is None, contract.problem
        contract.check_input({"s": "a" * 30, "a" * 30: 1, "x" * 30 + "!": True}, "t")
        for bad, why in (
            ({"s": "a" * 30 + "!"}, "must match pattern"),
            ({"a" * 30: "x"}, "expected integer"),
            ({"a" * 30 + "!": 1}, "expected boolean"),
        ):
            with pytest.raises(InvalidInputError, match=why):
                contract.check_input(bad, "t")


def test_unevaluated_properties_beside_pattern_properties_is_refused_with_the_way_out() -> None:
    """jsonschema's unevaluatedProperties matches patternProperties with Python's `re` internally, so a
    schema using both is unusable, its problem naming additionalProperties instead; either alone is fine."""
    both = {"patternProperties": {REDOS: {}}, "allOf": [{"unevaluatedProperties": False}]}
    problem = ToolContract(both, None).problem
    assert problem is not None and "use additionalProperties next to patternProperties" in problem
    assert ToolContract({"patternProperties": {REDOS: {}}, "unevaluatedProperties": False}, None).problem
    assert ToolContract({"properties": {"a": {}}, "unevaluatedProperties": False}, None).problem is None
    # A property merely named patternProperties is a name, not the keyword.
    named = {"properties": {"patternProperties": {"const": {"patternProperties": 1}}}, "unevaluatedProperties": False}
    assert ToolContract(named, None).problem is None
