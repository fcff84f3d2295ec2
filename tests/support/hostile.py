"""A corpus of hostile requests (the untrusted-input contract) and what a correct service answers to each.

Every case is an async function that sends its requests through a ``Caller``; the caller checks
what every answer must satisfy whatever was sent (never a 5xx except capacity, valid UTF-8 JSON
with no lone surrogate, a cell envelope for 200s on cell routes, the error schema otherwise, and
``transient`` only when retrying helps), and the case asserts its own expectation on top.  The
expectations are the contract's (SPEC §2, §8, §10 and §11), not today's behaviour.

Used by ``tests/service/runtime/test_hostile_corpus.py`` (each case one test id) and by ``bench/soak.py``
(a subset as hostile background traffic).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from service.settings import Settings
from tests.support.polling import apoll_until

MiB = 1024 * 1024
FFFD = "\ufffd"
LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # in a decoded str, any surrogate code point is a lone one
CELL_ROUTE = re.compile(r"^/v1/(exec|cells/[^/]+(/wait|/cancel)?)$")
ENVELOPE_CODES = {
    "invalid_input",
    "runtime_unavailable",
    "aborted",
    "timeout",
    "memory_limit_exceeded",
    "snapshot_limit_exceeded",
    "output_limit_exceeded",
    "uncaught_error",
    "stalled",
    "request_limit_exceeded",
    "internal_error",
}
#: Beyond the cell's output budget (64 KiB by default), an envelope carries only small fixed fields.
BOUNDED_ANSWER_BYTES = 256 * 1024
#: An answer that holds pending client-tool inputs is bounded by the inbox allowance (10 MiB default).
INBOX_BYTES = 10 * MiB


class Violation(AssertionError):
    """An answer the contract does not allow."""


@dataclass
class Answer:
    method: str
    path: str
    status: int
    raw: bytes
    body: Any
    elapsed: float
    headers: httpx.Headers
    cpu: float | None = None  # CPU seconds the service (its process and workers) used meanwhile, when observable

    def __repr__(self) -> str:
        text = self.raw[:400].decode("utf-8", "replace")
        return f"<{self.method} {self.path[:80]} -> {self.status} in {self.elapsed:.2f}s: {text}>"


def _lone_surrogate(value: Any) -> str | None:
    """The first string (key or value) holding a lone UTF-16 surrogate, if any."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if LONE_SURROGATE.search(v):
                return v[:80]
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return None


def check_answer(ans: Answer, *, capacity_ok: bool = False) -> None:
    """What every answer must be, whatever the request was."""
    if ans.status >= 500 and not (capacity_ok and ans.status == 503):
        raise Violation(f"5xx answer: {ans!r}")
    if ans.status == 429 and not capacity_ok:
        raise Violation(f"429 for a request that asks for no capacity: {ans!r}")
    try:
        text = ans.raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Violation(f"body is not valid UTF-8 ({exc}): {ans!r}") from None
    try:
        body = json.loads(text)
    except RecursionError:
        raise Violation(f"body nests deeper than a JSON client can read: {ans!r}") from None
    except ValueError as exc:
        raise Violation(f"body is not JSON ({exc}): {ans!r}") from None
    bad = _lone_surrogate(body)
    if bad is not None:
        raise Violation(f"body carries a lone surrogate (must be U+FFFD) in {bad!r}: {ans!r}")
    ans.body = body
    if ans.status == 200:
        if CELL_ROUTE.match(ans.path.split("?", 1)[0]):
            check_envelope(body, ans)
        return
    err = body.get("error") if isinstance(body, dict) else None
    if not (
        isinstance(err, dict)
        and isinstance(err.get("code"), str)
        and isinstance(err.get("message"), str)
        and err.get("error_type") in ("recoverable", "config", "transient")
    ):
        raise Violation(f"non-200 body is not {{'error': {{code, message, error_type}}}}: {ans!r}")
    if err["error_type"] == "transient" and ans.status not in (429, 503):
        raise Violation(f"error_type 'transient' tells the caller to retry a request that fails again: {ans!r}")


def check_envelope(env: Any, ans: Answer) -> None:
    if not isinstance(env, dict):
        raise Violation(f"200 body is not a cell envelope: {ans!r}")
    problems = []
    if env.get("status") not in ("completed", "waiting", "failed", "running"):
        problems.append("status")
    if not (isinstance(env.get("cell_id"), str) and env["cell_id"].startswith("cell_")):
        problems.append("cell_id")
    for name, kind in (("bridge_dispatch_started", bool), ("replay_safe", bool), ("telemetry", dict)):
        if not isinstance(env.get(name), kind):
            problems.append(name)
    if not isinstance(env.get("output", []), list):
        problems.append("output")
    if env.get("status") == "failed":
        if not isinstance(env.get("error"), str) or env.get("code") not in ENVELOPE_CODES:
            problems.append("error/code")
        if env.get("failure_phase") not in ("input", "guest", "bridge", "host"):
            problems.append("failure_phase")
    if env.get("status") == "waiting" and not isinstance(env.get("pending_tool_calls"), list):
        problems.append("pending_tool_calls")
    if problems:
        raise Violation(f"cell envelope lacks or mistypes {problems}: {ans!r}")


class NeverAnswers:
    """A loopback socket that listens and never accepts: a remote ``$ref`` target that must stay untouched."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def connections(self) -> int:
        """Connections the service made (the kernel completed them into the backlog)."""
        self.sock.setblocking(False)
        n = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return n
            conn.close()
            n += 1

    def close(self) -> None:
        self.sock.close()


@dataclass
class Caller:
    """Sends requests as a tenant (``key``) and checks every answer with ``check_answer``."""

    http: httpx.AsyncClient
    keys: dict[str, str]
    tenant: str = "alpha"
    answers: list[Answer] = field(default_factory=list)
    open_cells: dict[str, str] = field(default_factory=dict)  # waiting cell id -> tenant, for clean-up
    server_rss: Callable[[], int] | None = None  # service process RSS in bytes, when observable
    server_cpu: Callable[[], float] | None = None  # CPU seconds of the service and its workers, when observable
    metrics: Callable[[], Awaitable[dict[str, float]]] | None = None

    def auth(self, tenant: str | None = None) -> dict[str, str]:
        return {"authorization": "Bearer " + self.keys[tenant or self.tenant]}

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        content: Any = None,
        headers: dict[str, str] | None = None,
        tenant: str | None = None,
        auth: bool = True,
        timeout: float = 10.0,
        capacity_ok: bool = False,
    ) -> Answer:
        hdrs = {**(self.auth(tenant) if auth else {}), **(headers or {})}
        if json_body is not None:
            content = json.dumps(json_body).encode()
            hdrs.setdefault("content-type", "application/json")
        started, cpu_before = time.monotonic(), self.server_cpu() if self.server_cpu else None
        r = await self.http.request(method, path, content=content, headers=hdrs, timeout=timeout)
        elapsed = time.monotonic() - started
        cpu = None if cpu_before is None or self.server_cpu is None else self.server_cpu() - cpu_before
        ans = Answer(method, path, r.status_code, r.content, None, elapsed, r.headers, cpu)
        self.answers.append(ans)
        check_answer(ans, capacity_ok=capacity_ok)
        if ans.status == 200 and isinstance(ans.body, dict) and "cell_id" in ans.body:
            if ans.body.get("status") == "waiting":
                self.open_cells[ans.body["cell_id"]] = tenant or self.tenant
            else:
                self.open_cells.pop(ans.body["cell_id"], None)
        return ans

    async def exec(
        self, code: str, *, tenant: str | None = None, timeout: float = 10.0, capacity_ok: bool = False, **fields: Any
    ) -> Answer:
        return await self.request(
            "POST",
            "/v1/exec",
            json_body={"code": code, **fields},
            tenant=tenant,
            timeout=timeout,
            capacity_ok=capacity_ok,
        )

    async def cell(self, code: str, **fields: Any) -> dict[str, Any]:
        """Exec a cell that must get a cell envelope (HTTP 200)."""
        ans = await self.exec(code, **fields)
        expect_status(ans, 200)
        return ans.body  # type: ignore[no-any-return]

    async def close_open_cells(self) -> None:
        """Cancel the cells a case left waiting, so they hold no worker or memory for the next case."""
        for cell_id, tenant in list(self.open_cells.items()):
            try:
                await self.http.post(f"/v1/cells/{cell_id}/cancel", headers=self.auth(tenant), timeout=10.0)
            except httpx.HTTPError:
                pass
            self.open_cells.pop(cell_id, None)

    async def cancel(self, env: dict[str, Any]) -> None:
        if env.get("status") == "waiting":
            ans = await self.request("POST", f"/v1/cells/{env['cell_id']}/cancel")
            expect_status(ans, 200)
            assert ans.body["status"] == "failed" and ans.body["code"] == "aborted", ans


def expect_status(ans: Answer, *allowed: int) -> None:
    if ans.status not in allowed:
        raise Violation(f"expected HTTP {' or '.join(map(str, allowed))}: {ans!r}")


def expect_fast(ans: Answer, seconds: float) -> None:
    """The answer came within ``seconds`` of wall time: only for a bound that a loaded machine does not reach,
    sized as a fraction of the alternative's much longer time (a timeout the answer must not wait out)."""
    if ans.elapsed > seconds:
        raise Violation(f"answer took {ans.elapsed:.2f}s, over {seconds}s: {ans!r}")


def expect_cheap(ans: Answer, seconds: float) -> None:
    """The service (its process and workers) spent at most ``seconds`` of CPU while the answer was made:
    bounded work, measured in CPU time, which a loaded machine does not stretch as it does wall time.
    (Without a CPU reading, the answer's wall time stands in.)"""
    spent = ans.elapsed if ans.cpu is None else ans.cpu
    if spent > seconds:
        raise Violation(f"the service spent {spent:.2f}s of CPU on the answer, over {seconds}s: {ans!r}")


def brief(env: dict[str, Any]) -> str:
    """The telling part of an envelope for a failure message."""
    parts = [f"status={env.get('status')}"]
    if env.get("status") == "failed":
        parts.append(f"code={env.get('code')} phase={env.get('failure_phase')} error={str(env.get('error'))[:300]!r}")
    elif env.get("status") == "waiting":
        parts.append(f"reason={env.get('reason')} pending={str(env.get('pending_tool_calls'))[:200]}")
    else:
        parts.append(f"value={str(env.get('value'))[:300]}")
    return " ".join(parts)


def completed(env: dict[str, Any]) -> Any:
    assert env["status"] == "completed", f"expected completed: {brief(env)}"
    return env["value"]


def failed(env: dict[str, Any], *codes: str) -> dict[str, Any]:
    assert env["status"] == "failed", f"expected failed: {brief(env)}"
    if codes:
        assert env["code"] in codes, f"expected code {codes}: {brief(env)}"
    return env


def sound(env: dict[str, Any]) -> None:
    """A guest-only condition: whatever the outcome, the worker was not lost for it."""
    assert env.get("code") != "runtime_unavailable", f"guest-only condition killed the worker: {brief(env)}"


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@contextmanager
def sink() -> Iterator[NeverAnswers]:
    s = NeverAnswers()
    try:
        yield s
    finally:
        s.close()


# ---- the corpus ---------------------------------------------------------------------------------

CaseFn = Callable[[Caller], Awaitable[None]]


@dataclass(frozen=True)
class Case:
    id: str
    run: CaseFn
    guest_only: bool = False  # a guest condition: the worker must survive (no respawn)
    soak: bool = False  # part of the soak's hostile mix (cheap, repeatable, single tenant)
    note: str = ""


CASES: list[Case] = []


def case(id: str, *, guest_only: bool = False, soak: bool = False) -> Callable[[CaseFn], CaseFn]:
    def register(fn: CaseFn) -> CaseFn:
        assert all(c.id != id for c in CASES), id
        CASES.append(Case(id, fn, guest_only=guest_only, soak=soak, note=(fn.__doc__ or "").strip()))
        return fn

    return register


def deep_js(depth: int, leaf: str = "1") -> str:
    """JS that builds an array nested ``depth`` deep into ``v``."""
    return f"let v = {leaf}; for (let i = 0; i < {depth}; i++) v = [v];"


# -- pre-checks on cell source must be linear: the answer comes at once -------------------------------


def _source_case(id: str, code: str, expect: str, seconds: float = 2.0) -> None:
    async def run(c: Caller) -> None:
        ans = await c.exec(code, timeout=max(8.0, seconds * 4))
        expect_status(ans, 200)
        expect_cheap(ans, seconds)
        env = ans.body
        if expect == "invalid_input":
            failed(env, "invalid_input")
            assert env["failure_phase"] == "input", brief(env)
        elif expect == "completed":
            assert completed(env) == 2, brief(env)
        else:
            sound(env)

    run.__doc__ = f"{len(code):,}-char source answered at once ({expect})"
    case(id, soak=len(code) < 100_000)(run)


_source_case("precheck_shell_27_words", "ls " + "a " * 27 + ";", "invalid_input")
_source_case("precheck_shell_40_words", "ls " + "a " * 40 + ";", "invalid_input")
_source_case("precheck_shell_5000_flags", "ls " + "-a b " * 5000 + ";", "invalid_input")
_source_case("precheck_shell_near_code_cap", "ls " + "a " * 500_000, "invalid_input")
_source_case("precheck_shell_pipeline_long", "cat x " + "| grep a " * 20_000, "invalid_input")
_source_case("precheck_bash_c_long", "bash -c " + "'x' " * 100_000, "invalid_input")
_source_case("precheck_shell_100k_lines", "ls -la\n" * 100_000, "any")
_source_case("precheck_newlines_20k", "x=1" + "\n" * 20_000 + ";return 2", "completed")
_source_case("precheck_newlines_900k", "x=1" + "\n" * 900_000 + ";return 2", "completed")
_source_case("precheck_unclosed_regex_8k", "x=1;" + "[/" * 8000, "invalid_input")
_source_case("precheck_unclosed_regex_400k", "x=1;" + "[/" * 400_000, "invalid_input")
_source_case("precheck_unclosed_comments", "x=1;" + "/*/" * 300_001, "any")
_source_case("precheck_unclosed_strings", "x=1;" + "'\\u0041" * 100_000, "invalid_input")
_source_case("precheck_template_nesting", "return `${" * 100_000, "any")
_source_case("precheck_paren_nesting", "return " + "(" * 300_000, "any")
_source_case("precheck_require_lookalikes", "x=1;" + "require /* */ (" * 50_000, "invalid_input")


# -- caller schemas resolve nothing outside themselves -------------------------------------------------


def _ref_case(id: str, schema_for: Callable[[str], dict[str, Any]], doc: str) -> None:
    async def run(c: Caller) -> None:
        with sink() as target:
            schema = schema_for(target.url)
            ans = await c.exec(
                'try { return await t({a: 1}) } catch (e) { return "refused: " + e.message }',
                client_tools=[{"name": "t", "input_schema": schema}],
                timeout=5.0,
            )
            seen = target.connections()
        assert seen == 0, f"the service connected {seen}x to a URL named in a caller schema: {ans!r}"
        expect_status(ans, 422)
        expect_cheap(ans, 1.0)
        assert "ref" in ans.body["error"]["message"].lower(), f"422 does not name the $ref: {ans!r}"
        assert "root:" not in ans.raw.decode(), "the answer leaks file content"

    run.__doc__ = doc
    case(id)(run)


_ref_case(
    "schema_remote_ref_http",
    lambda url: {"$ref": url + "/x.json"},
    "input_schema {$ref: http://...} is refused with 422 before anything runs; nothing is fetched",
)
_ref_case(
    "schema_remote_ref_nested_https",
    lambda url: {"type": "object", "properties": {"a": {"$ref": url.replace("http", "https") + "/y"}}},
    "a remote $ref under properties is refused; nothing is fetched",
)
_ref_case(
    "schema_remote_ref_in_defs",
    lambda url: {"$defs": {"a": {"$ref": url + "/z.json"}}, "$ref": "#/$defs/a"},
    "a local $ref leading to a remote one is refused",
)
_ref_case(
    "schema_remote_ref_unused",
    lambda url: {"type": "object", "$defs": {"never": {"$ref": url + "/unused.json"}}},
    "a remote $ref nobody uses is still refused (the schema names a URL)",
)
_ref_case(
    "schema_relative_ref_against_remote_id",
    lambda url: {"$id": url + "/root.json", "$ref": "other.json"},
    "a relative $ref resolved against a remote $id is refused",
)
_ref_case(
    "schema_file_ref_passwd",
    lambda url: {"$ref": "file:///etc/passwd"},
    "file: $ref is refused without reading the file (no oracle on what exists)",
)
_ref_case(
    "schema_file_ref_dev_zero",
    lambda url: {"$ref": "file:///dev/zero"},
    "file:///dev/zero is refused at once (it used to grow memory ~530 MB/s)",
)
_ref_case(
    "schema_relative_path_ref",
    lambda url: {"$ref": "../../../../etc/passwd"},
    "a relative path $ref (not #/...) is refused",
)
_ref_case(
    "schema_remote_dynamic_ref",
    lambda url: {"$dynamicRef": url + "/d.json#meta"},
    "$dynamicRef to a remote URL is refused",
)


@case("schema_file_ref_missing_file_same_answer")
async def _file_ref_no_oracle(c: Caller) -> None:
    """file: refs to an existing and to a missing file get the same refusal (no existence oracle)."""
    code = 'try { return await t({a: 1}) } catch (e) { return "refused: " + e.message }'
    answers = []
    for path in ("file:///etc/hostname", "file:///nonexistent/" + uuid.uuid4().hex):
        ans = await c.exec(code, client_tools=[{"name": "t", "input_schema": {"$ref": path}}], timeout=5.0)
        expect_status(ans, 422)
        answers.append(ans.body["error"]["message"].replace(path, "<ref>"))
    assert answers[0] == answers[1], answers


async def _call_schema_tool(
    c: Caller, schema: dict[str, Any], arg_js: str, *, seconds: float = 2.0, allow_422: bool = True
) -> Answer:
    code = f'try {{ await t({arg_js}); return "accepted" }} catch (e) {{ return "refused: " + e.message }}'
    ans = await c.exec(code, client_tools=[{"name": "t", "input_schema": schema}], timeout=20.0)
    if allow_422:
        expect_status(ans, 200, 422)
    else:
        expect_status(ans, 200)
    expect_cheap(ans, seconds)
    if ans.status == 200:
        sound(ans.body)
        await c.cancel(ans.body)
    return ans


@case("schema_redos_pattern_26", soak=True)
async def _redos_26(c: Caller) -> None:
    """pattern ^(a+)+$ against "a"*26+"!" is validated in linear time."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
    await _call_schema_tool(c, schema, '{s: "a".repeat(26) + "!"}', allow_422=False)


@case("schema_redos_pattern_64")
async def _redos_64(c: Caller) -> None:
    """pattern ^(a|aa)+$ against 64 a's and "!" (exponential for a backtracking engine)."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a|aa)+$"}}}
    await _call_schema_tool(c, schema, '{s: "a".repeat(64) + "!"}', allow_422=False)


@case("schema_redos_pattern_properties")
async def _redos_pattern_props(c: Caller) -> None:
    """patternProperties with a backtracking regex against a long key."""
    schema = {"type": "object", "patternProperties": {"^(a+)+$": {"type": "string"}}}
    await _call_schema_tool(c, schema, '{["a".repeat(40) + "!"]: 1}', allow_422=False)


@case("schema_redos_property_names")
async def _redos_property_names(c: Caller) -> None:
    """propertyNames.pattern with nested quantifiers against a long key."""
    schema = {"type": "object", "propertyNames": {"pattern": "^([a-z]+)*$"}}
    await _call_schema_tool(c, schema, '{["abc".repeat(20) + "!"]: 1}', allow_422=False)


@case("schema_pattern_2000_parens")
async def _pattern_parens(c: Caller) -> None:
    """pattern "(" * 2000 + ")" * 2000 is refused (422) or handled, never a 500 "Recursion limit"."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "(" * 2000 + ")" * 2000}}}
    await _call_schema_tool(c, schema, '{s: "x"}')


def _allof_bomb(levels: int) -> dict[str, Any]:
    defs: dict[str, Any] = {"d0": {"type": "string"}}
    for i in range(1, levels + 1):
        defs[f"d{i}"] = {"allOf": [{"$ref": f"#/$defs/d{i - 1}"}, {"$ref": f"#/$defs/d{i - 1}"}]}
    return {"$defs": defs, "type": "object", "properties": {"s": {"$ref": f"#/$defs/d{levels}"}}}


@case("schema_allof_ref_bomb_16")
async def _allof_16(c: Caller) -> None:
    """allOf [$ref prev, $ref prev] 16 levels deep (2^16 validations) is bounded."""
    await _call_schema_tool(c, _allof_bomb(16), '{s: "x"}')


@case("schema_allof_ref_bomb_40")
async def _allof_40(c: Caller) -> None:
    """The same bomb 40 levels deep (2^40) is refused or bounded."""
    await _call_schema_tool(c, _allof_bomb(40), '{s: "x"}')


@case("schema_50k_properties")
async def _schema_huge(c: Caller) -> None:
    """A 1.6 MB schema of 50,000 properties (under the 2 MiB body cap) is capped (422) or checked once, fast."""
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(50_000)}}
    code = 'try { await t({p1: "x"}); return "accepted" } catch (e) { return "refused: " + e.message }'
    ans = await c.exec(code, client_tools=[{"name": "t", "input_schema": schema}], timeout=60.0)
    expect_status(ans, 200, 413, 422)
    expect_cheap(ans, 3.0)
    if ans.status == 200:
        await c.cancel(ans.body)


def _nested_schema(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@case("schema_nested_200")
async def _schema_deep_200(c: Caller) -> None:
    """An input_schema nested 200 levels: 422 or works, never 500 "Recursion limit reached"."""
    await _call_schema_tool(c, _nested_schema(200), "{a: {a: 1}}")


@case("schema_nested_2000")
async def _schema_deep_2000(c: Caller) -> None:
    """An input_schema nested 2,000 levels (a 4,000-deep JSON body) is refused as a bad request."""
    # Built as text: the JSON encoder of the test itself would hit Python's recursion limit.
    schema = '{"type":"object","properties":{"a":' * 2000 + '{"type":"string"}' + "}}" * 2000
    body = '{"code":"return 1","client_tools":[{"name":"t","input_schema":' + schema + "}]}"
    ans = await c.request("POST", "/v1/exec", content=body.encode(), headers={"content-type": "application/json"})
    expect_status(ans, 400, 413, 422)


@case("schema_128_tools_with_long_descriptions")
async def _many_client_tools(c: Caller) -> None:
    """128 client tools with 4 KiB descriptions and a 6 MB catalog.search: bounded."""
    tools = [
        {
            "name": f"tool_{i}",
            "description": ("lorem ipsum dolor " * 240)[:4096],
            "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}},
        }
        for i in range(128)
    ]
    code = 'try { return (await catalog.search("dolor ".repeat(1e6))).length } catch (e) { return e.message }'
    ans = await c.exec(code, client_tools=tools, timeout=60.0)
    expect_status(ans, 200)
    expect_cheap(ans, 3.0)
    sound(ans.body)


# -- catalog search, output entries -----------------------------------------------------------------


async def _cell_fast(c: Caller, code: str, seconds: float, **fields: Any) -> dict[str, Any]:
    ans = await c.exec(code, timeout=60.0, **fields)
    expect_status(ans, 200)
    expect_cheap(ans, seconds)
    assert len(ans.raw) <= BOUNDED_ANSWER_BYTES, f"{len(ans.raw):,}-byte answer over the output budget"
    sound(ans.body)
    return ans.body  # type: ignore[no-any-return]


@case("search_6mb_query", soak=True)
async def _search_6mb(c: Caller) -> None:
    """catalog.search with a 6 MB query is bounded (was 4.7 s on the event loop)."""
    await _cell_fast(
        c,
        'try { return (await catalog.search("a ".repeat(3e6))).length } catch (e) { return "refused: " + e.message }',
        3.0,
    )


@case("search_5000_times")
async def _search_many(c: Caller) -> None:
    """5,000 sequential searches stay bounded (budgeted or cheap)."""
    await _cell_fast(
        c,
        'let n = 0; try { for (let i = 0; i < 5000; i++) { await catalog.search("quote ship " + i);'
        " n++ } } catch (e) { return [n, e.name] } return [n, null]",
        10.0,
    )


@case("search_odd_arguments")
async def _search_odd(c: Caller) -> None:
    """Odd search arguments (huge limit, lone surrogate, objects) answer, never 500."""
    env = await _cell_fast(
        c,
        r"""
        const out = [];
        for (const args of [["ship", {limit: 1e9}], ["\ud800"], [{toString() { return "x".repeat(1e6) }}],
                            [null], ["ship", {limit: -1}], ["ship", {limit: "many"}]]) {
          try { const r = await catalog.search(...args); out.push(Array.isArray(r) ? r.length : typeof r) }
          catch (e) { out.push(e.name) }
        }
        return out""",
        3.0,
    )
    assert len(completed(env)) == 6, brief(env)


@case("output_400k_empty_texts", soak=True)
async def _text_empty(c: Caller) -> None:
    """400,000 × text("") is bounded (was 2.3 s of event loop)."""
    await _cell_fast(c, 'for (let i = 0; i < 400000; i++) text(""); return 1', 5.0)


@case("output_200k_console_json")
async def _console_flood(c: Caller) -> None:
    """200,000 console.log and json entries: bounded answer."""
    await _cell_fast(c, 'for (let i = 0; i < 100000; i++) { console.log("x", i); json({i}) } return 1', 8.0)


@case("output_8mb_text")
async def _text_huge(c: Caller) -> None:
    """text("x" * 8 MB) is truncated to the output budget; the cell still completes."""
    env = await _cell_fast(c, 'text("x".repeat(8e6)); return 1', 5.0)
    assert completed(env) == 1


@case("output_8mb_return_value")
async def _value_huge(c: Caller) -> None:
    """return "x" * 8 MB: a truncation marker within the budget, never the whole value."""
    env = await _cell_fast(c, 'return "x".repeat(8e6)', 5.0, headless=True)
    value = completed(env)
    assert isinstance(value, dict) and value.get("truncated") is True, str(value)[:300]


# -- pending client tools, errors: every byte held is charged -----------------------------------------


@case("client_tool_pending_huge_arguments")
async def _pending_huge(c: Caller) -> None:
    """4 client-tool calls of 4 MB each: pending inputs held stay within the inbox allowance."""
    code = """
        const big = "x".repeat(4e6);
        const r = await Promise.all([0, 1, 2, 3].map(i => t({i, big}).then(() => "ok", e => "refused: " + e.message)));
        return r"""
    ans = await c.exec(code, client_tools=[{"name": "t"}], timeout=30.0)
    expect_status(ans, 200)
    env = ans.body
    sound(env)
    try:
        assert len(ans.raw) <= INBOX_BYTES + MiB, f"exec answer is {len(ans.raw):,} bytes"
        if env["status"] == "waiting":
            status = await c.request("GET", f"/v1/cells/{env['cell_id']}", timeout=30.0)
            expect_status(status, 200)
            assert len(status.raw) <= INBOX_BYTES + MiB, f"status answer is {len(status.raw):,} bytes"
    finally:
        await c.cancel(env)


@case("client_tool_pending_huge_arguments_x3_parallel")
async def _pending_huge_parallel(c: Caller) -> None:
    """3 cells in parallel each parking ~16 MB of client-tool arguments: each bounded, cancel frees them."""
    code = """
        const big = "y".repeat(4e6);
        return await Promise.all([0, 1, 2, 3].map(i => t({i, big}).catch(e => "refused: " + e.message)))"""
    answers = await asyncio.gather(*(c.exec(code, client_tools=[{"name": "t"}], timeout=30.0) for _ in range(3)))
    try:
        for ans in answers:
            expect_status(ans, 200)
            sound(ans.body)
            assert len(ans.raw) <= INBOX_BYTES + MiB, f"exec answer is {len(ans.raw):,} bytes"
    finally:
        for ans in answers:
            if ans.status == 200:
                await c.cancel(ans.body)


@case("error_8mb_message", guest_only=True, soak=True)
async def _error_huge(c: Caller) -> None:
    """throw new Error("e" * 8 MB): bounded error ending "[error truncated]"; the summary is bounded too."""
    env = await _cell_fast(c, 'throw new Error("e".repeat(8e6))', 5.0)
    failed(env)
    assert env["error"].startswith("Error: eee") and env["error"].endswith("[error truncated]"), env["error"][-80:]
    status = await c.request("GET", f"/v1/cells/{env['cell_id']}")
    expect_status(status, 200, 404)
    assert len(status.raw) <= BOUNDED_ANSWER_BYTES, f"finished-cell summary is {len(status.raw):,} bytes"


@case("error_8mb_summary_with_10mib_budget", guest_only=True)
async def _error_summary(c: Caller) -> None:
    """With max_output_bytes 10 MiB an 8 MB error may be answered once, but the kept summary is bounded."""
    ans = await c.exec('throw new Error("s".repeat(8e6))', max_output_bytes=10 * MiB, timeout=30.0)
    expect_status(ans, 200)
    failed(ans.body)
    status = await c.request("GET", f"/v1/cells/{ans.body['cell_id']}")
    expect_status(status, 200, 404)
    assert len(status.raw) <= BOUNDED_ANSWER_BYTES, f"finished-cell summary is {len(status.raw):,} bytes"


@case("error_8mb_x12_held_memory", guest_only=True)
async def _error_huge_memory(c: Caller) -> None:
    """Finished cells with 8 MB errors (10 MiB budget): every kept summary is bounded, and the service does
    not grow with their number.

    RSS alone cannot tell one round of 12 such cells from allocator noise: four of them in flight at once
    peak at ~100 MiB, which the allocator may or may not give back (measured: 202, 202, 294, 294, 187 MiB
    after successive rounds).  Keeping every error would add ~92 MiB per round, so after a warm-up round,
    four more rounds must add less than half of what keeping them would (4 x 92 / 2 = 184 MiB)."""

    async def round_of_12() -> list[str]:
        cell_ids = []
        for _ in range(3):  # a few at a time: a transient peak the allocator may keep stays small
            answers = await asyncio.gather(
                *(
                    c.exec('throw new Error("f".repeat(8e6) + Math.random())', max_output_bytes=10 * MiB, timeout=30.0)
                    for _ in range(4)
                )
            )
            for ans in answers:
                expect_status(ans, 200)
                cell_ids.append(failed(ans.body)["cell_id"])
        return cell_ids

    cell_ids = await round_of_12()
    warmed = c.server_rss() if c.server_rss else 0
    for _ in range(4):
        cell_ids += await round_of_12()
    held = 0
    for cell_id in cell_ids:
        status = await c.request("GET", f"/v1/cells/{cell_id}")
        expect_status(status, 200, 404)
        held += len(status.raw)
    assert held <= len(cell_ids) * BOUNDED_ANSWER_BYTES, f"60 finished-cell summaries hold {held:,} bytes"
    if c.server_rss:
        grown = c.server_rss() - warmed
        assert grown < 184 * MiB, f"service RSS grew {grown / MiB:.0f} MiB over 48 more finished cells' errors"


@case("error_huge_own_fields", guest_only=True)
async def _error_fields(c: Caller) -> None:
    """An Error with an 8 MB own field and a 1e5-deep cause chain: a bounded failed envelope."""
    env = await _cell_fast(
        c,
        """
        const e = new Error("x"); e.data = "y".repeat(8e6);
        let cause = e; for (let i = 0; i < 1e5; i++) { const n = new Error("c" + i); n.cause = cause; cause = n }
        e.chain = cause; throw e""",
        5.0,
    )
    failed(env)


# -- the host hook is unreachable --------------------------------------------------------------------

HUNT_JS = r"""
// The cell's own source: a function whose source text is part of it is the cell's, not the prelude's.
// (Prelude functions print as "[native code]" but sit in non-native frames.)
const SELF = (() => { try { return String(arguments.callee) } catch (e) { return "" } })();
const fnSource = Function.prototype.toString;
// Prelude functions the cell can name anyway (text, results.save, ...) expose nothing new.
const PUBLIC = new Set();
for (const n of Object.getOwnPropertyNames(globalThis)) {
  try {
    const v = globalThis[n];
    if (typeof v === "function") PUBLIC.add(v);
    else if (v && typeof v === "object") for (const k of Object.getOwnPropertyNames(v)) {
      try { if (typeof v[k] === "function") PUBLIC.add(v[k]) } catch (e) {} }
  } catch (e) {}
}
const found = [], foundFns = [], seen = new Set();
function foreign(f, site) {
  if (typeof f === "function") {
    if (PUBLIC.has(f)) return false;
    let native = false;
    try { native = typeof site.isNative === "function" && site.isNative() === true } catch (e) {}
    if (native) return false;  // a built-in of the engine (Reflect.apply, Array.prototype.map, ...)
    let src = "";
    try { src = fnSource.call(f) } catch (e) { return true }
    return /^[^{]*\{\s*\[native code\]\s*\}$/.test(src) || !SELF.includes(src);
  }
  // Objects: the prelude's containers have no prototype; the cell's objects here all do.
  return typeof f === "object" && f !== null && Object.getPrototypeOf(f) === null;
}
function hunt(cs) {
  if (!Array.isArray(cs)) return;
  for (const c of cs) {
    for (const m of ["getFunction", "getThis"]) {
      let f;
      try { f = c && typeof c[m] === "function" ? c[m]() : undefined } catch (e) { continue }
      if (f == null || seen.has(f) || !foreign(f, c)) continue;
      seen.add(f);
      let src = "";
      try { src = typeof f === "function" ? fnSource.call(f).slice(0, 40) : "" } catch (e) {}
      found.push(m + ":" + (typeof f === "function" ? (f.name || "<anonymous>") + " " + src : "null-prototype object"));
      if (typeof f === "function") foundFns.push(f);
    }
  }
}
function probe() { try { return new Error("probe").stack } catch (e) { return null } }
Error.prepareStackTrace = function (e, cs) { hunt(cs); return "hunted" };
"""

HUNT_TAIL = r"""
let saved;
try { const r = await results.save("x".repeat(9000002)); saved = "saved " + r.bytes } catch (e) { saved = "refused: " + String(e.message).slice(0, 120) }
return {found, saved, typeofHook: typeof codemodeHostHook};
"""


def _hook_case(id: str, trigger: str, doc: str) -> None:
    async def run(c: Caller) -> None:
        env = await c.cell(HUNT_JS + trigger + HUNT_TAIL, session_id=new_id("hook"), run_id="r1", timeout=15.0)
        sound(env)
        v = completed(env)
        assert v["found"] == [], f"stack-frame API exposed functions/objects of the prelude: {v['found']}"
        assert v["typeofHook"] == "undefined", v
        assert v["saved"].startswith("refused"), f"a 9,000,002-byte results.save went through: {v}"

    run.__doc__ = doc
    case(id, guest_only=True, soak=True)(run)


_hook_case(
    "hook_hunt_top_level",
    "probe(); await null; probe();",
    "prepareStackTrace call sites at the cell's top level expose no prelude function",
)
_hook_case(
    "hook_hunt_serialisation_getter",
    "text({get a() { probe(); return 1 }}); json({get b() { probe(); return 2 }}); console.log({get c() { probe(); return 3 }});",
    "a getter run while the prelude serialises output sees no prelude frame function",
)
_hook_case(
    "hook_hunt_timer_callback",
    "await new Promise(r => setTimeout(() => { probe(); r() }, 1)); await new Promise(r => setTimeout(r, 0)).then(probe);",
    "a timer callback called by the prelude sees no prelude frame function",
)
_hook_case(
    "hook_hunt_tool_argument_tojson",
    'try { await quote_shipping({origin: {toJSON() { probe(); return "DE" }}, destination: "FR", weight_kg: 1}) } catch (e) {}\n'
    "try { await results.save({get v() { probe(); return 1 }}) } catch (e) {}",
    "toJSON/getters run while the prelude encodes tool arguments see no prelude frame function",
)
_hook_case(
    "hook_hunt_capture_stack_trace",
    "const o = {}; Error.captureStackTrace && Error.captureStackTrace(o); void o.stack;\n"
    "try { await store('k', {get v() { const p = {}; Error.captureStackTrace && Error.captureStackTrace(p); return String(p.stack) }}) } catch (e) {}",
    "Error.captureStackTrace inside prelude-driven getters exposes nothing",
)
_hook_case(
    "hook_hunt_bridge_error_stack",
    "try { await results.save({get v() { throw new Error('x') }}) } catch (e) { void e.stack }\n"
    "try { await results.save(10n) } catch (e) { void e.stack }\n"
    "try { await quote_shipping(null) } catch (e) { void e.stack }",
    "stacks of errors the prelude creates expose nothing",
)


@case("hook_configure_cannot_lift_caps", guest_only=True)
async def _hook_configure(c: Caller) -> None:
    """Whatever the stack-frame APIs give, calling it with "configure" cannot lift the 8 MiB request cap."""
    env = await c.cell(
        HUNT_JS
        + r"""
        probe(); text({get a() { probe(); return 1 }});
        const bypass = [];
        for (const f of foundFns) { try { f("configure", '{"maxRequestBytes":1e12,"maxQueuedRequests":1e9}');
                                          bypass.push(f.name) } catch (e) {} }
        let saved;
        try { await results.save("x".repeat(9000002)); saved = "saved" } catch (e) { saved = "refused" }
        return {bypass, saved}""",
        session_id=new_id("hook"),
        run_id="r1",
        timeout_ms=3000,
    )
    sound(env)
    assert completed(env) == {"bypass": [], "saved": "refused"}, brief(env)


@case("hook_internal_names_undefined", guest_only=True)
async def _hook_names(c: Caller) -> None:
    """typeof every plausible internal bridge name is "undefined"; no non-standard function global leaks it."""
    env = await c.cell(r"""
        const names = ["codemodeHostHook", "hostHook", "__host", "__bridge", "__codemode", "_send", "sendRequest",
                       "settle", "take", "pending", "config", "request", "finish", "serialise"];
        const defined = names.filter(n => typeof globalThis[n] !== "undefined");
        const hooks = Object.getOwnPropertyNames(globalThis).filter(n => {
          try { return typeof globalThis[n] === "function" && /HostHook|configure/.test(String(globalThis[n])) }
          catch (e) { return false } });
        return {defined, hooks}""")
    assert completed(env) == {"defined": [], "hooks": []}, brief(env)


# -- lone surrogates become U+FFFD everywhere ---------------------------------------------------------


def _surrogate_value_case(id: str, code: str, want: Any, where: str = "value") -> None:
    async def run(c: Caller) -> None:
        env = await c.cell(code)
        sound(env)
        got = completed(env) if where == "value" else env["output"]
        assert got == want, f"got {got!r}, want {want!r}"

    run.__doc__ = f"{code!r} answers U+FFFD for each lone surrogate"
    case(id, guest_only=True, soak=id == "surrogate_return_high")(run)


_surrogate_value_case("surrogate_return_high", r'return "\ud800"', FFFD)
_surrogate_value_case("surrogate_return_low_inside", r'return "a\udfffb"', f"a{FFFD}b")
_surrogate_value_case("surrogate_return_reversed_pair", r'return "\ude00\ud83d"', FFFD + FFFD)
_surrogate_value_case("surrogate_valid_pair_kept", r'return "\ud83d\ude00"', "\U0001f600")
_surrogate_value_case("surrogate_in_key", r'return {["k\ud800"]: 1}', {f"k{FFFD}": 1})
_surrogate_value_case(
    "surrogate_in_text", r"text('a\ud800b'); return 1", [{"type": "text", "text": f"a{FFFD}b"}], where="output"
)
_surrogate_value_case(
    "surrogate_in_json_output",
    r'json({"\udc00": "x\ud83d"}); return 1',
    [{"type": "json", "value": {FFFD: f"x{FFFD}"}}],
    where="output",
)
_surrogate_value_case(
    "surrogate_in_console", r'console.log("\ud800"); return 1', [{"type": "text", "text": FFFD}], where="output"
)


def _surrogate_error_case(id: str, code: str) -> None:
    async def run(c: Caller) -> None:
        env = await c.cell(code)
        sound(env)
        failed(env)
        assert FFFD in env["error"], env["error"]

    run.__doc__ = f"{code!r}: a failed envelope whose error carries U+FFFD, worker kept"
    case(id, guest_only=True, soak=id == "surrogate_error_message")(run)


_surrogate_error_case("surrogate_error_message", r'throw new Error("bad \ud800 here")')
_surrogate_error_case("surrogate_error_name", r'const e = new Error("x"); e.name = "N\udfff"; throw e')
_surrogate_error_case("surrogate_thrown_string", r'throw "\udfff"')
_surrogate_error_case("surrogate_unhandled_rejection", r'void Promise.reject(new Error("\ud800")); return 1')


@case("surrogate_in_request_title_and_code")
async def _surrogate_request(c: Caller) -> None:
    """JSON escapes of lone surrogates in the request body: 200 (with U+FFFD) or 422, never 500."""
    for body in (
        b'{"code": "return 1", "title": "t\\ud800"}',
        b'{"code": "return \\"\\ud800\\""}',
        b'{"code": "return 1", "session_id": "s\\udc00"}',
    ):
        ans = await c.request("POST", "/v1/exec", content=body, headers={"content-type": "application/json"})
        expect_status(ans, 200, 400, 422)


@case("body_invalid_utf8")
async def _invalid_utf8(c: Caller) -> None:
    """A body that is not UTF-8 is a 400/422 bad request."""
    ans = await c.request(
        "POST", "/v1/exec", content=b'{"code": "return \xff\xfe 1"}', headers={"content-type": "application/json"}
    )
    expect_status(ans, 400, 422)


@case("surrogate_store_key_and_value", guest_only=True)
async def _surrogate_store(c: Caller) -> None:
    """store("k\\ud800", "\\udfff") commits as U+FFFD or is refused catchably; the store listing stays valid."""
    sid = new_id("surr")
    env = await c.cell(
        r'try { await store("k\ud800", "v\udfff") } catch (e) { return e.name } return load("k\ud800")', session_id=sid
    )
    sound(env)
    assert completed(env) in (f"v{FFFD}", "TypeError", "RangeError"), brief(env)
    listing = await c.request("GET", f"/v1/sessions/{sid}/store")
    expect_status(listing, 200, 404)


@case("surrogate_client_tool_input")
async def _surrogate_pending(c: Caller) -> None:
    """A client-tool call with a lone surrogate comes back as pending input with U+FFFD."""
    env = await c.cell(r'return await t({s: "a\ud800b"})', client_tools=[{"name": "t"}])
    sound(env)
    try:
        assert env["status"] == "waiting", brief(env)
        assert env["pending_tool_calls"][0]["input"] == {"s": f"a{FFFD}b"}, brief(env)
    finally:
        await c.cancel(env)


@case("surrogate_native_tool_argument", guest_only=True)
async def _surrogate_native(c: Caller) -> None:
    """A native tool call with a lone surrogate argument resolves or rejects catchably."""
    env = await c.cell(
        r'try { return await quote_shipping({origin: "D\ud800", destination: "FR", weight_kg: 1}) }'
        r' catch (e) { return "refused: " + e.message }'
    )
    sound(env)
    completed(env)


@case("surrogate_in_wait_tool_result")
async def _surrogate_wait(c: Caller) -> None:
    """A tool result with a lone-surrogate escape reaches the guest as U+FFFD (or the wait is refused with 422)."""
    env = await c.cell("return await t({})", client_tools=[{"name": "t"}])
    try:
        assert env["status"] == "waiting", brief(env)
        call_id = env["pending_tool_calls"][0]["id"]
        body = ('{"tool_results": [{"id": "%s", "ok": true, "value": "r\\ud800"}]}' % call_id).encode()
        ans = await c.request(
            "POST", f"/v1/cells/{env['cell_id']}/wait", content=body, headers={"content-type": "application/json"}
        )
        expect_status(ans, 200, 422)
        if ans.status == 200:
            env = ans.body
            assert completed(env) == f"r{FFFD}", brief(env)
    finally:
        await c.cancel(env)


# -- values nested too deep: a failed envelope or a value, never 500 -------------------------------------


def _deep_case(id: str, code: str, doc: str) -> None:
    async def run(c: Caller) -> None:
        await _cell_fast(c, code, 5.0)

    run.__doc__ = doc
    case(id, guest_only=True, soak=id == "deep_return_254")(run)


_deep_case("deep_return_254", deep_js(254) + " return v", "a value nested 254 deep: envelope, never 500")
_deep_case("deep_return_1000", deep_js(1000) + " return v", "a value nested 1,000 deep: envelope, never 500")
_deep_case("deep_return_100k", deep_js(100_000) + " return v", "a value nested 100,000 deep: envelope")
_deep_case(
    "deep_object_keys_5000",
    'let v = {}; for (let i = 0; i < 5000; i++) v = {["k" + i]: v}; return v',
    "objects nested 5,000 deep: envelope",
)
_deep_case(
    "deep_json_output_300",
    deep_js(300) + " json(v); text(v); console.log(v); return 1",
    "output entries nested 300 deep: envelope",
)
_deep_case(
    "deep_results_save_300",
    deep_js(300) + " try { const r = await results.save(v); return r.id.slice(0, 7) } catch (e) { return e.name }",
    "results.save of a value nested 300 deep resolves or rejects catchably",
)
_deep_case(
    "deep_store_300",
    deep_js(300) + ' try { await store("deep", v); return "stored" } catch (e) { return e.name }',
    "store of a value nested 300 deep resolves or rejects catchably",
)
_deep_case(
    "deep_native_tool_arguments_300",
    deep_js(300) + ' try { await quote_shipping({origin: "DE", destination: "FR", weight_kg: 1, x: v}) }'
    ' catch (e) { return "refused: " + e.message.slice(0, 60) } return "called"',
    "native tool arguments nested 300 deep reject catchably (they killed the worker)",
)
_deep_case(
    "deep_json_parse_in_guest",
    'try { JSON.parse("[".repeat(1e6) + "]".repeat(1e6)); return "parsed" } catch (e) { return e.name }',
    "the guest's own JSON.parse of a 1e6-deep text fails catchably",
)


@case("deep_client_tool_arguments_300")
async def _deep_client_args(c: Caller) -> None:
    """Client-tool arguments nested 300 deep park the cell or reject catchably; never 500, worker kept."""
    env = await c.cell(
        deep_js(300) + ' try { return await t({v}) } catch (e) { return "refused: " + e.message }',
        client_tools=[{"name": "t"}],
    )
    sound(env)
    await c.cancel(env)


@case("deep_wait_tool_result_5000")
async def _deep_wait(c: Caller) -> None:
    """A wait body whose tool result nests 5,000 deep: 400/413/422, or the guest gets a catchable error."""
    env = await c.cell("try { return await t({}) } catch (e) { return e.name }", client_tools=[{"name": "t"}])
    try:
        assert env["status"] == "waiting", brief(env)
        call_id = env["pending_tool_calls"][0]["id"]
        body = (
            '{"tool_results": [{"id": "%s", "ok": true, "value": %s}]}' % (call_id, "[" * 5000 + "]" * 5000)
        ).encode()
        ans = await c.request(
            "POST", f"/v1/cells/{env['cell_id']}/wait", content=body, headers={"content-type": "application/json"}
        )
        expect_status(ans, 200, 400, 413, 422)
        if ans.status == 200:
            env = ans.body
            sound(env)
    finally:
        await c.cancel(env)


# -- store writes commit only with a sent final envelope ---------------------------------------------


def _store_then_case(id: str, tail: str, doc: str) -> None:
    async def run(c: Caller) -> None:
        sid = new_id("paid")
        ans = await c.exec(f'await store("paid", true); {tail}', session_id=sid, timeout=15.0)
        listing = await c.request("GET", f"/v1/sessions/{sid}/store")
        expect_status(listing, 200, 404)
        keys = [k["key"] for k in listing.body.get("keys", [])] if listing.status == 200 else []
        cell_completed = ans.status == 200 and ans.body["status"] == "completed"
        if cell_completed:
            assert keys == ["paid"], f"completed cell but store has {keys}: {ans!r}"
        else:
            assert keys == [], f"cell did not complete ({ans!r}) but its store write was committed"
        if ans.status != 200:
            assert ans.body["error"].get("error_type") != "transient", "retrying would repeat the side effect"

    run.__doc__ = doc
    case(id, guest_only=True)(run)


_store_then_case(
    "store_then_surrogate_return",
    r'return "\ud800"',
    'store("paid") then return "\\ud800": completed with U+FFFD and committed, or failed and not',
)
_store_then_case(
    "store_then_deep_return",
    deep_js(100_000) + " return v",
    "store then a 100,000-deep return: committed only if the envelope says completed",
)
_store_then_case(
    "store_then_throwing_getter",
    'return {get x() { throw new Error("late") }}',
    "store then a value whose getter throws: committed only if completed",
)
_store_then_case(
    "store_then_bigint_return", "return {n: 10n}", "store then a BigInt in the value: committed only if completed"
)


# -- timers and request bursts: over a cap rejects catchably, nothing is dropped silently ------------


def _timer_case(id: str, count: int, delay: int) -> None:
    async def run(c: Caller) -> None:
        env = await _cell_fast(
            c,
            f"""
            let fired = 0, refused = 0, other = null;
            const waits = [];
            for (let i = 0; i < {count}; i++) {{
              let resolve; const p = new Promise(r => {{ resolve = r }});
              try {{ setTimeout(() => {{ fired++; resolve() }}, {delay}); waits.push(p) }}
              catch (e) {{ if (e instanceof RangeError) refused++; else other = String(e) }}
            }}
            await Promise.all(waits);
            return {{fired, refused, other, scheduled: waits.length}}""",
            8.0,
        )
        v = completed(env)
        assert v["other"] is None, v
        assert v["fired"] == v["scheduled"] and v["fired"] + v["refused"] == count, f"timers dropped silently: {v}"

    run.__doc__ = f"{count} × setTimeout(f, {delay}): each fires or is refused with a RangeError"
    case(id, guest_only=True, soak=count == 200)(run)


_timer_case("timers_200_at_10ms", 200, 10)
_timer_case("timers_2000_at_1ms", 2000, 1)
_timer_case("timers_5000_at_0ms", 5000, 0)


@case("timer_awaited_among_burst", guest_only=True)
async def _timer_awaited(c: Caller) -> None:
    """An awaited timer among 300 fire-and-forget ones never turns into "pending without host work":
    timers over the pending cap throw a catchable RangeError naming the cap (the awaited one too,
    while the cap is full)."""
    env = await _cell_fast(
        c,
        """
        let accepted = 0, refused = 0;
        for (let i = 0; i < 300; i++) { try { setTimeout(() => {}, 10); accepted++ } catch (e) { refused++ } }
        let woke;
        try { await new Promise(r => setTimeout(r, 20)); woke = "woke" } catch (e) { woke = e.name + ": " + e.message }
        return {accepted, refused, woke}""",
        5.0,
    )
    v = completed(env)
    assert v["accepted"] + v["refused"] == 300 and v["refused"] > 0, v
    assert v["woke"] == "woke" or (v["woke"].startswith("RangeError") and "limit" in v["woke"]), v


@case("results_save_burst_40x1mb", guest_only=True, soak=True)
async def _save_burst(c: Caller) -> None:
    """40 × 1 MB results.save at once: each saved or refused catchably, the worker survives."""
    env = await _cell_fast(
        c,
        """
        const s = "x".repeat(1 << 20);
        return await Promise.all(Array.from({length: 40}, (_, i) =>
          results.save(s + i).then(r => "saved", e => e.name + ": " + e.message.slice(0, 60))))""",
        10.0,
        session_id=new_id("save"),
        run_id="r1",
        memory_limit_bytes=256 * MiB,
    )
    v = completed(env)
    assert len(v) == 40 and all(isinstance(x, str) for x in v), v


@case("results_save_burst_200_small", guest_only=True)
async def _save_burst_small(c: Caller) -> None:
    """200 small saves in one run: at most 64 kept, the rest refused catchably."""
    env = await _cell_fast(
        c,
        """
        const r = await Promise.all(Array.from({length: 200}, (_, i) =>
          results.save({i}).then(() => 1, () => 0)));
        return r.reduce((a, b) => a + b, 0)""",
        5.0,
        session_id=new_id("save"),
        run_id="r1",
    )
    assert 0 < completed(env) <= 64, brief(env)


@case("results_save_over_request_cap", guest_only=True)
async def _save_oversize(c: Caller) -> None:
    """A 9,000,002-byte results.save is refused catchably (max_request_bytes 8 MiB)."""
    env = await _cell_fast(
        c,
        'try { await results.save("x".repeat(9000002)); return "saved" } catch (e) { return e.name }',
        5.0,
        session_id=new_id("save"),
        run_id="r1",
    )
    assert completed(env) in ("RangeError", "Error", "TypeError"), brief(env)


@case("store_burst_over_session_quota", guest_only=True)
async def _store_burst(c: Caller) -> None:
    """300 × 4 KiB store writes pass the 1 MiB session total: RangeError, store unchanged."""
    env = await _cell_fast(
        c,
        """
        let n = 0;
        try { for (let i = 0; i < 300; i++) { await store("k" + i, "x".repeat(4096)); n++ } }
        catch (e) { return [n, e.name] }
        return [n, null]""",
        8.0,
        session_id=new_id("quota"),
    )
    n, err = completed(env)
    assert err == "RangeError" and n < 300, brief(env)


@case("tool_call_burst", guest_only=True)
async def _tool_burst(c: Caller) -> None:
    """2,000 tool calls at once: the call budget and loop guard refuse catchably."""
    env = await _cell_fast(
        c,
        """
        const r = await Promise.allSettled(Array.from({length: 2000}, (_, i) =>
          quote_shipping({origin: "DE", destination: "FR", weight_kg: 1 + (i % 7)})));
        return r.filter(x => x.status === "fulfilled").length""",
        10.0,
    )
    assert completed(env) <= 200, brief(env)


@case("request_burst_20000_timers", guest_only=True)
async def _timer_flood(c: Caller) -> None:
    """20,000 synchronous setTimeout calls are cut at the queue cap with a catchable RangeError."""
    env = await _cell_fast(
        c,
        """
        let made = 0, refused = null;
        try { for (let i = 0; i < 20000; i++) { setTimeout(() => {}, 5); made++ } } catch (e) { refused = e.name }
        return [made, refused]""",
        5.0,
    )
    made, refused = completed(env)
    assert refused == "RangeError" and made < 20000, brief(env)


# -- built-ins patched by the cell: the cell can only confuse itself ---------------------------------

FOLLOW_UP = """return [JSON.stringify({a: [1, 2]}), typeof Promise.prototype.then, ({}).status,
                     [1, 2, 3][1], typeof Function.prototype.call, Object.keys({x: 1})]"""
CLEAN = ['{"a":[1,2]}', "function", None, 2, "function", ["x"]]


def _patch_case(id: str, patch: str, doc: str) -> None:
    async def run(c: Caller) -> None:
        env = await c.cell(
            patch
            + """
            text([1, 2, 3]); json({a: 1}); console.log([4, 5]);
            try { await quote_shipping({origin: "DE", destination: "FR", weight_kg: 1}) } catch (e) {}
            try { await new Promise(r => setTimeout(r, 1)) } catch (e) {}
            try { await results.save([1, 2, 3]) } catch (e) {}
            return [1, 2, 3]""",
            session_id=new_id("patch"),
            run_id="r1",
        )
        sound(env)
        # Later cells get fresh runtimes: nothing of the patch survives, on any worker.
        for ans in await asyncio.gather(*(c.exec(FOLLOW_UP) for _ in range(3))):
            expect_status(ans, 200)
            assert completed(ans.body) == CLEAN, ans

    run.__doc__ = doc
    case(id, guest_only=True, soak=id == "patch_array_prototype_index_setter")(run)


_patch_case(
    "patch_array_prototype_index_setter",
    'Object.defineProperty(Array.prototype, "1", {set(v) { throw new Error("gotcha") }, get() { return 7 },'
    " configurable: true});",
    'an Array.prototype["1"] setter fails only the cell, if anything (it killed the worker)',
)
_patch_case(
    "patch_array_prototype_index_0_and_length",
    'for (const k of ["0", "2", "length"]) try { Object.defineProperty(Array.prototype, k, {set() {'
    " throw new Error(k) }, get() { return 3 }, configurable: true}) } catch (e) {}",
    "setters on Array.prototype 0/2/length: the worker survives",
)
_patch_case(
    "patch_json_methods",
    'JSON.stringify = () => "hacked"; JSON.parse = () => ({forged: true});',
    "replaced JSON.stringify/parse do not change what the host reads or forge settlements",
)
_patch_case(
    "patch_promise",
    "Promise.prototype.then = function () { return this }; globalThis.Promise = function () {};",
    "a replaced Promise/then: the worker survives; later cells are clean",
)
_patch_case(
    "patch_object_prototype",
    'for (const k of ["status", "ok", "value", "id", "then", "toJSON", "error"]) '
    "Object.defineProperty(Object.prototype, k, {get() { throw new Error(k) }, set() { throw new Error(k) },"
    " configurable: true});",
    "throwing getters on Object.prototype (then, toJSON, ok, id, ...) cannot reach the host",
)
_patch_case(
    "patch_function_prototype",
    "Function.prototype.call = Function.prototype.apply = Function.prototype.bind = () => { throw 1 };"
    " Reflect.apply = () => { throw 2 };",
    "a broken Function.prototype.call/apply/bind and Reflect.apply",
)
_patch_case(
    "patch_iterators_and_symbols",
    "Array.prototype[Symbol.iterator] = function* () { yield 666 }; Array.prototype.push = () => { throw 3 };"
    " Object.keys = () => { throw 4 }; String.prototype.slice = () => 'x';",
    "patched iterators, push, Object.keys, String.prototype.slice",
)
_patch_case(
    "patch_delete_globals",
    "for (const n of Object.getOwnPropertyNames(globalThis)) { try { delete globalThis[n] } catch (e) {} }",
    "deleting every global the cell can delete",
)


# -- runaway guests: stopped within their limits, the service keeps serving --------------------------


def _runaway_case(id: str, code: str, codes: tuple[str, ...], seconds: float, doc: str, **fields: Any) -> None:
    async def run(c: Caller) -> None:
        ans = await c.exec(code, timeout=seconds * 4, **fields)
        expect_status(ans, 200)
        expect_cheap(ans, seconds)
        env = failed(ans.body, *codes)
        if "timeout" in codes and env["code"] == "timeout":
            assert "timeout" in env["error"], brief(env)

    run.__doc__ = doc
    soak = id in ("runaway_infinite_loop", "runaway_memory_bomb", "runaway_deep_recursion")
    # The engine's heap cap is a clean failure: the worker process stays (a timeout or a kill retires it).
    guest_only = "memory_limit_exceeded" in codes and "timeout" not in codes
    case(id, soak=soak, guest_only=guest_only)(run)


_runaway_case(
    "runaway_infinite_loop",
    "while (true) {}",
    ("timeout",),
    3.0,
    "while(true){} fails with timeout near timeout_ms",
    timeout_ms=300,
)
_runaway_case(
    "runaway_microtask_loop",
    "for (;;) await null",
    ("timeout",),
    3.0,
    "an endless microtask chain fails with timeout",
    timeout_ms=300,
)
_runaway_case(
    "runaway_loop_in_serialisation_getter",
    "return {get x() { for (;;) {} }}",
    ("timeout",),
    3.0,
    "a getter looping while the value is serialised still times out",
    timeout_ms=300,
)
_runaway_case(
    "runaway_loop_in_timer",
    "setTimeout(() => { for (;;) {} }, 0); await new Promise(r => setTimeout(r, 50))",
    ("timeout",),
    3.0,
    "a looping timer callback times out",
    timeout_ms=300,
)
_runaway_case(
    "runaway_memory_bomb",
    'const a = []; while (true) a.push("x".repeat(1e5) + a.length)',
    ("memory_limit_exceeded",),
    5.0,
    "an unbounded array under an 8 MiB heap",
    memory_limit_bytes=8 * MiB,
    timeout_ms=3000,
)
_runaway_case(
    "runaway_string_doubling",
    'let s = "x"; for (;;) s += s',
    ("memory_limit_exceeded", "uncaught_error"),
    5.0,
    "string doubling: memory limit or RangeError",
    memory_limit_bytes=8 * MiB,
    timeout_ms=3000,
)
_runaway_case(
    "runaway_deep_recursion",
    "function f(n) { return f(n + 1) + 1 }\nreturn f(0)",
    ("uncaught_error",),
    3.0,
    "unbounded recursion is a RangeError",
    timeout_ms=2000,
)
_runaway_case(
    "runaway_huge_string",
    'return "x".repeat(2 ** 30).length',
    ("memory_limit_exceeded", "uncaught_error"),
    5.0,
    "a 1 GiB string fails cleanly",
    timeout_ms=3000,
)
_runaway_case(
    "runaway_bigint_native_op",
    "for (;;) (10n ** 300000n).toString()",
    ("timeout",),
    3.0,
    "(10n ** 300000n).toString() ignores the interrupt: the worker is killed at the deadline",
    timeout_ms=200,
)
_runaway_case(
    "runaway_guest_regex_backtracking",
    'return /^(a+)+$/.test("a".repeat(40) + "!")',
    ("timeout",),
    3.0,
    "a backtracking regex in the guest is stopped at the deadline",
    timeout_ms=300,
)
_runaway_case(
    "runaway_huge_array_sort",
    "const a = Array.from({length: 3e6}, (_, i) => -i); a.sort(); return 1",
    ("timeout", "memory_limit_exceeded"),
    5.0,
    "a huge sort is bounded",
    timeout_ms=300,
    memory_limit_bytes=32 * MiB,
)


# -- HTTP bodies: authenticated before parsed, capped, 413 for every oversized body ------------------


@case("body_3mib_with_length")
async def _body_big(c: Caller) -> None:
    """A 3 MiB exec body (over the 2 MiB cap) is 413."""
    ans = await c.request(
        "POST",
        "/v1/exec",
        content=b'{"code": "' + b"x" * (3 * MiB) + b'"}',
        headers={"content-type": "application/json"},
    )
    expect_status(ans, 413)
    expect_cheap(ans, 2.0)


@case("body_3mb_chunked")
async def _body_chunked(c: Caller) -> None:
    """A 3 MB chunked exec body (no Content-Length) is 413, not 400 "transient"."""

    async def chunks() -> Any:
        yield b'{"code": "'
        for _ in range(48):
            yield b"x" * 65536
        yield b'"}'

    ans = await c.request("POST", "/v1/exec", content=chunks(), headers={"content-type": "application/json"})
    expect_status(ans, 413)


@case("body_json_5000_deep")
async def _body_deep(c: Caller) -> None:
    """A 5,000-deep JSON body is a 400/422 bad request (not 400 "transient")."""
    body = b'{"code": "return 1", "title": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    ans = await c.request("POST", "/v1/exec", content=body, headers={"content-type": "application/json"})
    expect_status(ans, 400, 422)


@case("body_json_100k_deep_wait")
async def _body_deep_wait(c: Caller) -> None:
    """A 100,000-deep wait body: 400/404/413/422, fast."""
    body = b'{"tool_results": [{"id": "x", "ok": true, "value": ' + b"[" * 100_000 + b"]" * 100_000 + b"}]}"
    ans = await c.request(
        "POST",
        "/v1/cells/cell_00000000-0000-0000-0000-000000000000/wait",
        content=body,
        headers={"content-type": "application/json"},
    )
    expect_status(ans, 400, 404, 413, 422)
    expect_cheap(ans, 2.0)


@case("body_malformed_json")
async def _body_malformed(c: Caller) -> None:
    """Truncated and non-object bodies: 400/422 with error_type recoverable."""
    for body in (b'{"code": ', b"[]", b'"return 1"', b"null", b'{"code": "return 1",}', b"\x00" * 100):
        ans = await c.request("POST", "/v1/exec", content=body, headers={"content-type": "application/json"})
        expect_status(ans, 400, 422)
        assert ans.body["error"]["error_type"] == "recoverable", ans


@case("body_request_fields_out_of_range")
async def _body_fields(c: Caller) -> None:
    """Fields out of range (title 10k chars, blank code, 1 MiB+1 code, timeout_ms 0, 129 client tools): 4xx."""
    bad = [
        {"code": "return 1", "title": "t" * 10_000},
        {"code": "   \n\t "},
        {"code": "x" * (MiB + 1)},
        {"code": "return 1", "timeout_ms": 0},
        {"code": "return 1", "memory_limit_bytes": 1 << 40},
        {"code": "return 1", "client_tools": [{"name": f"t{i}"} for i in range(129)]},
        {"code": "return 1", "session_id": "a" * 129},
        {"code": "return 1", "session_id": "a\nb"},
    ]
    for body in bad:
        ans = await c.request("POST", "/v1/exec", json_body=body)
        if ans.status == 200:  # blank code may be a failed envelope (invalid_input) instead
            failed(ans.body, "invalid_input")
        else:
            expect_status(ans, 413, 422)


@case("unauthenticated_10mb_bodies_x12")
async def _unauth_big(c: Caller) -> None:
    """12 parallel unauthenticated 10 MB wait bodies: 401 (or 413) without parsing them, fast, no RSS spike."""
    body = b'{"tool_results": [{"id": "x", "ok": true, "value": "' + b"v" * (10 * MiB) + b'"}]}'
    before = c.server_rss() if c.server_rss else 0
    answers = await asyncio.gather(
        *(
            c.request(
                "POST",
                "/v1/cells/cell_00000000-0000-0000-0000-000000000000/wait",
                content=body,
                auth=False,
                headers={"content-type": "application/json"},
                timeout=30.0,
            )
            for _ in range(12)
        )
    )
    grown = (c.server_rss() - before) if c.server_rss else 0
    for ans in answers:
        expect_status(ans, 401, 413)
    for ans in answers:  # each answer's reading spans the others' work too: 12 bodies' worth in all
        expect_cheap(ans, 3.0)
    assert grown < 64 * MiB, f"service RSS grew {grown / MiB:.0f} MiB for unauthenticated bodies"


@case("unauthenticated_big_exec_body")
async def _unauth_exec(c: Caller) -> None:
    """A 1.9 MB exec body with no key, and one with a wrong key: 401."""
    body = b'{"code": "return 1", "title": "' + b"t" * (1900 * 1024) + b'"}'
    for headers in ({}, {"authorization": "Bearer ck_wrong_key"}, {"authorization": "Basic Zm9vOmJhcg=="}):
        ans = await c.request(
            "POST", "/v1/exec", content=body, auth=False, headers={"content-type": "application/json", **headers}
        )
        expect_status(ans, 401)


@case("authenticated_30mb_wait_body")
async def _auth_huge_wait(c: Caller) -> None:
    """An authenticated 30 MB wait body for an unknown cell: 404 or 413, fast."""
    body = b'{"tool_results": [{"id": "x", "ok": true, "value": "' + b"v" * (30 * MiB) + b'"}]}'
    ans = await c.request(
        "POST",
        "/v1/cells/cell_00000000-0000-0000-0000-000000000000/wait",
        content=body,
        headers={"content-type": "application/json"},
        timeout=30.0,
    )
    expect_status(ans, 404, 413)
    expect_cheap(ans, 3.0)


# -- path ids are checked like body ids --------------------------------------------------------------


@case("path_session_id_newline", soak=True)
async def _path_newline(c: Caller) -> None:
    """/v1/sessions/abc%0A/store and friends refuse the id "abc\\n" like an exec body does (422)."""
    for method, path in (
        ("GET", "/v1/sessions/abc%0A/store"),
        ("DELETE", "/v1/sessions/abc%0A"),
        ("DELETE", "/v1/sessions/s1/runs/r%0A"),
        ("GET", "/v1/catalog?session_id=abc%0A"),
        ("GET", "/v1/sessions/abc%00/store"),
        ("GET", "/v1/sessions/" + "a" * 300 + "/store"),
        ("GET", "/v1/sessions/%F0%9F%98%80/store"),
    ):
        ans = await c.request(method, path)
        expect_status(ans, 422)


@case("path_cell_id_odd")
async def _path_cell(c: Caller) -> None:
    """Odd cell ids in paths: 404 or 422, never 500."""
    for path in (
        "/v1/cells/cell_x%0A",
        "/v1/cells/" + "c" * 5000,
        "/v1/cells/%ED%A0%80",
        "/v1/cells/..%2F..%2Fmetrics",
    ):
        ans = await c.request("GET", path)
        expect_status(ans, 404, 422)


@case("path_api_file_traversal")
async def _path_api(c: Caller) -> None:
    """API file paths with .. / %00 / absolute parts: 4xx without file content."""
    for path in (
        "/v1/api/files/..%2F..%2F..%2Fetc%2Fpasswd",
        "/v1/api/files/tools/..%2F..%2Fpyproject.toml",
        "/v1/api/files/%2Fetc%2Fpasswd",
        "/v1/api/files/tools%00.d.ts",
        "/v1/api/files/" + "a/" * 3000,
    ):
        ans = await c.request("GET", path)
        expect_status(ans, 400, 404, 422)
        assert b"root:" not in ans.raw and b"[project]" not in ans.raw, ans


# -- tenants and capacity -----------------------------------------------------------------------------


@case("flood_one_tenant_other_served")
async def _flood(c: Caller) -> None:
    """200 parallel cells from one tenant: 200/429/503 only; another tenant's cell meanwhile completes."""
    flood = [c.exec("return 1", capacity_ok=True, timeout=30.0) for _ in range(200)]
    victim = c.exec("return 40 + 2", tenant="beta", timeout=30.0)
    *answers, mine = await asyncio.gather(*flood, victim)
    expect_status(mine, 200)
    assert completed(mine.body) == 42, mine
    assert all(a.status in (200, 429, 503) for a in answers)


@case("cross_tenant_wait_and_status")
async def _cross_tenant(c: Caller) -> None:
    """Another tenant's wait, status and cancel on a parked cell are 404; a second wait is 409 or waits."""
    env = await c.cell("return await t({})", client_tools=[{"name": "t"}])
    try:
        assert env["status"] == "waiting", brief(env)
        cid = env["cell_id"]
        for method, path in (
            ("POST", f"/v1/cells/{cid}/wait"),
            ("GET", f"/v1/cells/{cid}"),
            ("POST", f"/v1/cells/{cid}/cancel"),
        ):
            ans = await c.request(method, path, tenant="beta", json_body={} if method == "POST" else None)
            expect_status(ans, 404)
    finally:
        await c.cancel(env)


#: The server's header read timeout (the corpus's server keeps the default).
HEADER_TIMEOUT_S = Settings().header_read_timeout_seconds


@case("slow_headers_do_not_hold_the_service")
async def _slowloris(c: Caller) -> None:
    """100 sockets sending half a request header: other requests are served, and the server times them out."""
    host, port = c.http.base_url.host, c.http.base_url.port
    socks = []
    try:
        for _ in range(100):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(b"POST /v1/exec HTTP/1.1\r\nHost: x\r\nContent-Le")
            await writer.drain()
            socks.append((reader, writer))
        ans = await c.exec("return 1")
        expect_status(ans, 200)
        # Half the header timeout: a request served only once the server gave up on the sockets waits it out.
        expect_fast(ans, HEADER_TIMEOUT_S / 2)

        async def closed_by_server(reader: asyncio.StreamReader) -> bool:
            try:
                await asyncio.wait_for(reader.read(), 15.0)  # EOF (or a 408) once the server gives up
                return True
            except TimeoutError:
                return False

        closed = await asyncio.gather(*(closed_by_server(r) for r, _ in socks))
        assert all(closed), f"{closed.count(False)} half-header sockets still open after 15 s (no header timeout)"
    finally:
        for _, w in socks:
            w.close()


# ---- this stop's endpoints: event streams, approvals, the MCP facade ---------------------------------


@case("event_streams_flood_one_tenant")
async def _event_stream_flood(c: Caller) -> None:
    """40 event streams of one tenant at once: at most its cap (16) open, the rest 429 naming the setting;
    another tenant's cell is served meanwhile and the streams' cell still ends when cancelled."""
    env = await c.cell("await new Promise(r => setTimeout(r, 20000)); return 1", background=True)
    cell_id = env["cell_id"]
    statuses: list[int] = []
    refusals: list[Any] = []

    async def open_stream() -> httpx.Response:
        request = c.http.build_request("GET", f"/v1/cells/{cell_id}/events", headers=c.auth(), timeout=10.0)
        response = await c.http.send(request, stream=True)
        statuses.append(response.status_code)
        if response.status_code != 200:
            await response.aread()
            refusals.append(response.json())
        return response

    streams = await asyncio.gather(*(open_stream() for _ in range(40)))
    try:
        assert statuses.count(200) <= 16 and set(statuses) <= {200, 429}, statuses
        assert refusals and all("tenant_max_event_streams" in r["error"]["message"] for r in refusals), refusals[:1]
        # The streams stay open until the end of the case: a cell queued behind them would never answer,
        # so half the request's 10 s timeout is a bound only that reaches.
        other = await c.exec("return 40 + 2", tenant="beta")
        expect_status(other, 200)
        expect_fast(other, 5.0)
    finally:
        for response in streams:
            await response.aclose()
        ans = await c.request("POST", f"/v1/cells/{cell_id}/cancel")
        expect_status(ans, 200)


@case("event_stream_bad_last_event_ids")
async def _bad_last_event_ids(c: Caller) -> None:
    """Last-Event-ID that is huge, negative, not a number or 10,000 digits: a fast 422 naming the header."""
    env = await c.cell("text('x'); await new Promise(r => setTimeout(r, 20000)); return 1", background=True)
    try:
        for value in ("99999999999999999999999999", "-1", "abc", "1" * 10_000, "1 2"):
            ans = await c.request("GET", f"/v1/cells/{env['cell_id']}/events", headers={"last-event-id": value})
            expect_status(ans, 422)
            assert ans.body["error"]["need_param"] == "Last-Event-ID", ans
            expect_cheap(ans, 1.0)
    finally:
        expect_status(await c.request("POST", f"/v1/cells/{env['cell_id']}/cancel"), 200)


@case("approval_answer_bombs")
async def _approval_bombs(c: Caller) -> None:
    """A wait carrying 5,000 approvals, or one with a 100 KiB reason or id, is 422 naming `approvals`; the
    cell stays waiting and its call never ran."""
    env = await c.cell("return await t({})", client_tools=[{"name": "t"}], require_approval=["t"])
    try:
        assert env["status"] == "waiting", brief(env)
        cid = env["cell_id"]
        bodies = [
            {"approvals": [{"id": f"req_{i}", "approve": True} for i in range(5000)]},
            {"approvals": [{"id": "req_1", "approve": False, "reason": "r" * 100_000}]},
            {"approvals": [{"id": "req_" + "9" * 100_000, "approve": True}]},
        ]
        for body in bodies:
            ans = await c.request("POST", f"/v1/cells/{cid}/wait", json_body=body)
            expect_status(ans, 422)
            assert ans.body["error"].get("need_param", "").startswith("approvals"), ans
        status = await c.request("GET", f"/v1/cells/{cid}")
        assert status.body["status"] == "waiting", status
    finally:
        await c.cancel(env)


@case("mcp_body_of_many_small_values")
async def _mcp_value_bomb(c: Caller) -> None:
    """A 1.9 MB MCP request of 60,000 small objects is refused (413) before the SDK parses it on the loop."""
    params = {"name": "exec", "arguments": {"code": "return 1", "pad": [{"a": 1}] * 60_000}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    ans = await c.request("POST", "/mcp", json_body=body, headers={"accept": "application/json, text/event-stream"})
    expect_status(ans, 413)
    expect_cheap(ans, 2.0)


# ---- Host and Origin (DNS rebinding) ------------------------------------------------------------------

#: Host and Origin values a rebound page, a confused proxy or an attacker's client sends.
ODD_HOSTS = ("evil.example:8000", "a" * MiB, "[::1", "localhost:99999", "local host", "LOCALHOST.:8000", "[::1]:0")
ODD_ORIGINS = ("http://evil.example:8000", "null", "http://" + "a" * MiB, "chrome-extension://abc", "http://[::1")


@case("rebinding_hosts_and_origins_with_keys")
async def _rebinding_with_keys(c: Caller) -> None:
    """The DNS-rebinding request (foreign Host and Origin) and malformed or 1 MiB Host/Origin values, on a
    server with API keys: without a key every one is 401 (a page cannot know the key), with the key the
    answer is the route's own (the key is the protection; Host is never parsed at all). Each answer is
    fast, JSON, and carries no part of a 1 MiB header back."""
    for host in ODD_HOSTS:
        for origin in (None, *ODD_ORIGINS):
            headers = {"host": host, **({"origin": origin} if origin else {})}
            refused = await c.request("POST", "/v1/exec", json_body={"code": "return 1"}, headers=headers, auth=False)
            expect_status(refused, 401)
            expect_cheap(refused, 1.0)
            assert len(refused.raw) < 4096, refused
        served = await c.request("GET", "/v1/catalog", headers={"host": host, "origin": ODD_ORIGINS[0]})
        expect_status(served, 200)
        assert len(served.raw) < BOUNDED_ANSWER_BYTES, served


# -- held data is charged at its real cost; values are counted before anything is parsed ---------------

# One small array repeated: the guest builds it at once; its JSON holds a copy per element.
PAD = "const pad = new Array({n}).fill([7]);"
SETTLED = '.then(() => "sent", e => e.name + ": " + e.message)'


@case("tool_args_of_1_8m_tiny_arrays", guest_only=True)
async def _tool_args_tiny(c: Caller) -> None:
    """2 cells each calling a tool with 1.8M one-digit arrays (~7 MB, 3.6M values, under max_request_bytes):
    the call rejects in the guest naming max_request_values, before anything crosses to the host (before:
    4 such calls from each cell were decoded and copied on the event loop, /healthz up to 4 s)."""
    code = PAD.format(n="1.8e6") + (
        f'return [await quote_shipping({{origin: "DE", destination: "FR", weight_kg: 1, pad}}){SETTLED}]'
    )
    envs = await asyncio.gather(
        *(c.cell(code, timeout_ms=60000, memory_limit_bytes=256 * MiB, timeout=70.0) for _ in range(2))
    )
    for env in envs:
        for outcome in completed(env):
            assert outcome.startswith("RangeError: request arguments hold more than"), outcome


@case("exec_bodies_of_600k_empty_arrays")
async def _exec_values_bomb(c: Caller) -> None:
    """8 exec bodies of 1.8 MB whose client-tool schema holds 600k empty arrays are 413 naming
    max_request_values, counted before any parse (before: ~1.2 s of Python each before a 422)."""
    schema = {"type": "object", "properties": {"x": {"enum": [[]] * 600_000}}}
    body = json.dumps(
        {"code": "return 1", "client_tools": [{"name": "t", "input_schema": schema}]}, separators=(",", ":")
    )
    answers = await asyncio.gather(
        *(
            c.request("POST", "/v1/exec", content=body.encode(), headers={"content-type": "application/json"})
            for _ in range(8)
        )
    )
    for ans in answers:
        expect_status(ans, 413)
        assert "max_request_values" in ans.body["error"]["message"], ans
        expect_cheap(ans, 5.0)


# -- capacity: a tenant cannot take another's running slots -------------------------------------------


async def _running_slots(c: Caller) -> float:
    """The service's held running slots (``codemode_running_slots``); -1 when /metrics is not readable."""
    r = await c.http.get("/metrics", headers=c.auth(), timeout=5.0)
    found = re.search(r"^codemode_running_slots (\S+)$", r.text, re.M) if r.status_code == 200 else None
    return float(found.group(1)) if found else -1.0


async def _victim_served_beside(c: Caller, hog: list[Awaitable[Answer]], holding: float) -> None:
    """While ``hog`` (alpha's requests) runs, once ``holding`` slots are held, beta's trivial cells complete,
    the first while the hogging cells still run (an order, not a time: a loaded machine stretches both)."""
    hogs = [asyncio.ensure_future(h) for h in hog]
    try:
        deadline = time.monotonic() + 10.0
        while 0 <= await _running_slots(c) < holding and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        for i in range(10):
            ans = await c.exec(f"return {i}", tenant="beta")
            expect_status(ans, 200)
            assert completed(ans.body) == i, ans
            if i == 0:  # the first was served beside them (the later ones may outlast short hogs)
                assert not all(h.done() for h in hogs), "the other tenant was served only after the hogging cells ended"
    finally:
        for ans in await asyncio.gather(*hogs):
            expect_status(ans, 200, 503)


@case("capacity_busy_loops_hold_every_slot")
async def _busy_loops_every_slot(c: Caller) -> None:
    """Four `while(true){}` cells from one tenant (every running slot and more): another tenant's `return i`
    cells complete at once, never 503 (a burst slot), while the loops still run."""
    hog = [c.exec("while (true) {}", timeout_ms=4000, timeout=30.0, capacity_ok=True) for _ in range(4)]
    await _victim_served_beside(c, hog, 2)


@case("capacity_memory_bombs_keep_their_process", guest_only=True)
async def _memory_bombs(c: Caller) -> None:
    """Cells that hit the engine's heap cap fail `memory_limit_exceeded` without retiring their worker process."""
    for code in (
        "const a = []; while (true) a.push([a.length, {x: a.length}])",
        "const m = new Map(); for (let i = 0;; i++) m.set(i, {i, s: 'y' + i})",
        "const a = []; for (;;) a.push(new ArrayBuffer(1 << 20))",
    ):
        failed(await c.cell(code, memory_limit_bytes=8 * MiB, timeout_ms=5000), "memory_limit_exceeded")


@case("capacity_search_heavy_cells")
async def _search_heavy(c: Caller) -> None:
    """Eight cells that each run 200 `catalog.search` calls: another tenant's trivial cells still complete fast."""
    code = "for (let i = 0; i < 200; i++) await catalog.search('ship quote ' + i); return 1"
    hog = [c.exec(code, timeout_ms=20000, timeout=60.0, capacity_ok=True) for _ in range(8)]
    await _victim_served_beside(c, hog, 0)  # they hold slots only between searches: no wait


def soak_cases() -> list[Case]:
    return [c for c in CASES if c.soak]


# ---- caller-sized work never runs on the event loop: schemas, patterns, tool_results, unread answers ----


def _empty_arrays_schema_body(n: int) -> bytes:
    """An exec body (compact JSON) whose client tool's input_schema holds ``n`` empty arrays."""
    schema = {"type": "object", "x": [[]] * n}
    tools = [{"name": "t", "input_schema": schema}]
    return json.dumps({"code": "return 1", "client_tools": tools}, separators=(",", ":")).encode()


@case("client_schema_empty_arrays_x8")
async def _schema_empty_arrays(c: Caller) -> None:
    """8 execs at once whose input_schema is 90 KB of 30,000 empty arrays: each a 422 naming the size cap,
    decided by one encode (no Python walk or copy of the schema on the event loop)."""
    body = _empty_arrays_schema_body(30_000)
    answers = await asyncio.gather(
        *(c.request("POST", "/v1/exec", content=body, headers={"content-type": "application/json"}) for _ in range(8))
    )
    for ans in answers:
        expect_status(ans, 422)
        assert "over the cap of 65536 per schema" in ans.body["error"]["message"], ans


def _costly_schema(tag: str) -> dict[str, Any]:
    """A valid schema of 990 subschemas (the most two may have under the 2,000-object cap): ~0.3 s of
    meta-schema checking in pure Python; ``tag`` makes it one the service has not seen."""
    return {"title": tag, "type": "object", "properties": {f"p{i}": {} for i in range(990)}}


@case("client_schemas_costly_to_check_x8")
async def _schemas_costly(c: Caller) -> None:
    """8 execs at once, each declaring 2 distinct valid schemas of 990 subschemas (never seen before): they are
    checked in the schema helper process, so /healthz stays fast, and each cell runs."""
    run = uuid.uuid4().hex[:6]

    async def one(i: int) -> Answer:
        tools = [{"name": f"t{j}", "input_schema": _costly_schema(f"{run}-{i}-{j}")} for j in range(2)]
        return await c.exec("return 1", client_tools=tools, timeout=120.0)

    for ans in await asyncio.gather(*(one(i) for i in range(8))):
        expect_status(ans, 200)
        assert completed(ans.body) == 1, ans


NFA_PATTERN = "[ab]*a[ab]{999}[ab]{999}c"  # RE2 cannot build its DFA: ~2,000 instructions a byte on its NFA


@case("client_tool_pattern_without_dfa_200k")
async def _pattern_nfa(c: Caller) -> None:
    """A client tool whose pattern defeats RE2's DFA, called by 2 cells with a 200k-character a/b string:
    invalid_input naming the pattern's cost, before the search runs; /healthz stays fast."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": NFA_PATTERN}}}
    code = "try { await t({s: 'ab'.repeat(100000)}); return 'accepted' } catch (e) { return e.code + ': ' + e.message }"
    answers = await asyncio.gather(
        *(c.cell(code, client_tools=[{"name": "t", "input_schema": schema}]) for _ in range(2))
    )
    for env in answers:
        value = completed(env)
        assert value.startswith("invalid_input: ") and "against a string of 200000 characters" in value, value


@case("wait_40k_tool_results_x8")
async def _many_tool_results(c: Caller) -> None:
    """8 waits at once with 40,000 tool_results each: 422 naming tool_results (counted before any entry is
    validated); the cell still waits for its one call."""
    env = await c.cell("return await t({})", client_tools=[{"name": "t"}])
    try:
        assert env["status"] == "waiting", brief(env)
        # 840 KB: under the body decoder's 1 MiB for what is not a value, so the count is what refuses it.
        body = json.dumps({"tool_results": [{"id": "x", "ok": True}] * 40_000}, separators=(",", ":"))
        path = f"/v1/cells/{env['cell_id']}/wait"
        answers = await asyncio.gather(
            *(c.request("POST", path, content=body, headers={"content-type": "application/json"}) for _ in range(8))
        )
        for ans in answers:
            expect_status(ans, 422)
            assert ans.body["error"]["need_param"] == "tool_results", ans
        status = await c.request("GET", f"/v1/cells/{env['cell_id']}")
        assert status.body["status"] == "waiting", status
    finally:
        await c.cancel(env)


@case("unread_9mb_status_x64")
async def _unread_answers(c: Caller) -> None:
    """64 connections ask for a 9.6 MB cell status and never read it: after the write timeout (15 s by
    default) the service aborts every one of them and gives the memory back (RSS within 64 MiB of before)."""
    code = "const s = 'x'.repeat(4_800_000); return await Promise.all([t({s}), t({s})])"
    env = await c.cell(code, client_tools=[{"name": "t"}], timeout=30.0)
    host, port = c.http.base_url.host, c.http.base_url.port
    loop = asyncio.get_running_loop()
    socks: list[socket.socket] = []
    try:
        assert env["status"] == "waiting", brief(env)
        before = c.server_rss() if c.server_rss else None
        auth = c.auth()["authorization"]
        request = f"GET /v1/cells/{env['cell_id']} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n".encode()
        for _ in range(64):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            await loop.sock_connect(sock, (host, port))
            await loop.sock_sendall(sock, request)
            socks.append(sock)
        # Judged without reading (a read would be progress): the server's reset ends ESTABLISHED.
        await apoll_until(
            lambda: sum(_tcp_state(s) == _TCP_ESTABLISHED for s in socks) == 0,
            "the service aborts all 64 connections that never read",
            timeout_s=60.0,
        )
        if before is not None and c.server_rss is not None:
            rss = c.server_rss
            await apoll_until(lambda: rss() < before + 64 * MiB, f"service RSS back near {before / MiB:.0f} MiB", 10.0)
    finally:
        for sock in socks:
            sock.close()
        await c.cancel(env)


_TCP_ESTABLISHED = 1


def _tcp_state(sock: socket.socket) -> int:
    """The kernel's TCP state of ``sock`` (first byte of ``struct tcp_info``; Linux)."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


# -- Python cells (Monty in the same confined worker): the same bounds for the second guest language -------


def _python_case(id: str, code: str, check: Callable[[dict[str, Any]], None], *, guest_only: bool = True) -> None:
    async def run(c: Caller) -> None:
        env = await c.cell(code, language="python", timeout_ms=2000)
        if guest_only:
            sound(env)
        check(env)

    run.__doc__ = f"Python cell: {code[:120]!r}"
    case(id, guest_only=guest_only)(run)


def _fails_with(*codes: str, starts: str = "") -> Callable[[dict[str, Any]], None]:
    def check(env: dict[str, Any]) -> None:
        failed(env, *codes)
        assert str(env.get("error", "")).startswith(starts), brief(env)

    return check


_python_case("python_runaway_loop", "while True:\n    pass", _fails_with("timeout"), guest_only=False)
_python_case(
    "python_deep_recursion",
    "def f(n):\n    return f(n + 1)\nf(0)",
    _fails_with("uncaught_error", starts="RecursionError"),
)
_python_case("python_huge_string", "s = 'x' * (10**10)\nlen(s)", _fails_with("memory_limit_exceeded"))
_python_case(
    "python_doubling_list_memory_bomb",
    "x = [0]\nwhile True:\n    x = x + x",
    _fails_with("memory_limit_exceeded"),
)
_python_case(
    "python_huge_int_to_text",
    "x = 7 ** 200000\nstr(x)",
    _fails_with("uncaught_error", starts="ValueError: Exceeds the limit"),
)
_python_case(
    "python_nested_10000_value",
    "v = 1\nfor i in range(10000):\n    v = [v]\nv",
    _fails_with("uncaught_error", starts="TypeError: the cell's value: values may nest at most 200 levels"),
)
_python_case(
    "python_nested_10000_tool_argument",
    "v = 1\nfor i in range(10000):\n    v = [v]\nawait results.save(v)",
    _fails_with("uncaught_error", starts="TypeError: values may nest at most 200 levels"),
)
_python_case(
    "python_unawaited_call_flood",
    "for i in range(100000):\n    sleep(0)\n1",
    _fails_with("uncaught_error", starts="ValueError: too many host requests"),
)
_python_case(
    "python_print_flood",
    "for i in range(200000):\n    print(i)\n'done'",
    lambda env: _equal([completed(env), len(env["output"]) < 5000], ["done", True]),
)
_python_case("python_lone_surrogate_value", "'a\\ud800b'", lambda env: _equal(completed(env), "a" + FFFD + "b"))
for _id, _code, _starts in (
    ("python_open_file", "open('/etc/passwd').read()", "PermissionError"),
    ("python_os_environment", "import os\nos.environ", ""),
    ("python_os_getenv", "import os\nos.getenv('PATH')", "RuntimeError"),
    ("python_subprocess", "import subprocess\nsubprocess.run(['id'])", "ModuleNotFoundError"),
    ("python_socket", "import socket\nsocket.socket()", "ModuleNotFoundError"),
    ("python_dunder_import", "__import__('os').system('id')", "NameError"),
    # Monty 1.x's eval and exec run Monty code in the same sandbox; what they would reach is not there.
    ("python_eval_exec", "eval(\"__import__('os')\")", "NameError"),
    ("python_compile", "compile('1', 'f', 'eval')", "NameError"),
    ("python_class_definition", "class A:\n    def __repr__(self):\n        return 1 / 0\nA()", ""),
    ("python_frame_escape", "def f():\n    pass\nf.__globals__", "AttributeError"),
):
    _python_case(_id, _code, _fails_with("uncaught_error", "invalid_input", starts=_starts))


def _equal(got: Any, want: Any) -> None:
    if got != want:
        raise Violation(f"expected {want!r}, got {got!r}")


_python_case(
    "python_source_nested_100000_parens",
    "(" * 100000 + ")" * 100000,
    _fails_with("invalid_input", starts="SyntaxError at cell.py:"),
)
_python_case(
    "python_deep_repr_and_compare",
    "v = 1\nfor i in range(200000):\n    v = [v]\n[len(str(v)) > 0, v == v]",
    lambda env: _equal(completed(env), [True, True]),
)
