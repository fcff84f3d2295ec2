"""OpenTelemetry traces: a span per cell leg, a child span per host request, parents from ``traceparent``.

Spans are captured with the SDK's own ``InMemorySpanExporter`` behind ``service.tracing.tracing_to``;
the configuration tests run the real ``codemode exec`` with the ``OTEL_*`` variables set.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench.servers import otlp_collector
from service import tracing as tracing_module
from service.app import create_app
from service.assembly import build_components
from service.cli import main
from service.errors import ConfigError
from service.runtime.spec import CellSpec
from service.settings import Settings
from service.tracing import NO_TRACING, Tracing, TracingConfig, start_tracing, tracing_to
from tests.conftest import run, wait
from tests.support.polling import poll_until
from tests.support.tools import TEST_TOOLS

ROOT = Path(__file__).resolve().parents[2]
TRACING_MODULE = tracing_module.__file__
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
WAIT_PARENT_ID = "b7ad6b7169203331"


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, InMemorySpanExporter]]:
    """A real service whose spans land in an in-memory exporter."""
    exporter = InMemorySpanExporter()
    settings = Settings(workers=2, data_dir=str(tmp_path_factory.mktemp("svc")), kill_grace_ms=500).check()
    services = build_components(settings, extra_tools=TEST_TOOLS, tracing=tracing_to(exporter))
    with TestClient(create_app(settings, services)) as client:
        yield client, exporter


def _spans(exporter: InMemorySpanExporter, cell_id: str) -> tuple[list[ReadableSpan], list[ReadableSpan]]:
    """The cell's leg spans (in start order) and the call spans under any of them."""
    legs = sorted(
        (
            s
            for s in exporter.get_finished_spans()
            if s.name == "codemode.cell" and s.attributes["codemode.cell_id"] == cell_id
        ),
        key=lambda s: s.start_time,
    )
    leg_ids = {s.context.span_id for s in legs}
    calls = [
        s
        for s in exporter.get_finished_spans()
        if s.name == "codemode.call" and s.parent is not None and s.parent.span_id in leg_ids
    ]
    return legs, calls


#: The same cell in both guest languages: text, a tool that answers, a tool that fails (caught).
TRACED_CELLS = {
    "javascript": 'text("hello"); const v = await echo({x: 7}); try { await fail({message: "no"}) } catch (e) {} '
    "return v.echo",
    "python": 'text("hello")\nv = await echo(x=7)\ntry:\n    await fail(message="no")\nexcept Exception:\n    pass\n'
    'v["echo"]',
}


@pytest.mark.parametrize("language", ["javascript", "python"])
def test_cell_calling_a_tool_is_one_leg_span_with_a_call_span_per_request(traced, language):
    """One leg: a ``codemode.cell`` span with the cell's attributes, and under it one ``codemode.call`` per
    host request (method, tool, request and reply bytes, outcome), inside the leg's time; in either language."""
    client, exporter = traced
    env = run(client, TRACED_CELLS[language], title="traced cell", language=language)
    assert env["status"] == "completed" and env["value"] == 7, env
    (leg,), calls = _spans(exporter, env["cell_id"])
    assert leg.parent is None  # no traceparent: a new trace
    assert leg.resource.attributes["service.name"] == "codemode"
    attrs = dict(leg.attributes)
    assert attrs["codemode.tenant"] == "local" and attrs["codemode.title"] == "traced cell"
    assert attrs["codemode.status"] == "completed" and attrs["codemode.legs"] == 1
    assert attrs["codemode.output_bytes"] == len(json.dumps([{"type": "text", "text": "hello"}], separators=(",", ":")))
    assert "codemode.code" not in attrs
    assert leg.status.status_code is trace.StatusCode.UNSET
    by_tool = {c.attributes["codemode.tool"]: c for c in calls}
    assert sorted(by_tool) == ["echo", "fail"]
    echo, fail = by_tool["echo"], by_tool["fail"]
    assert echo.attributes["codemode.method"] == "tool" and echo.attributes["codemode.outcome"] == "ok"
    assert echo.attributes["codemode.request_bytes"] > 0 and echo.attributes["codemode.reply_bytes"] > 0
    assert fail.attributes["codemode.outcome"] == "tool_error"
    assert fail.status.status_code is trace.StatusCode.ERROR
    for call in calls:
        assert call.context.trace_id == leg.context.trace_id
        assert leg.start_time <= call.start_time <= call.end_time <= leg.end_time


def test_failed_cell_leg_span_carries_its_code_and_error_status(traced):
    """A failed cell's leg span says ``failed`` with the envelope's code, and its span status is ERROR."""
    client, exporter = traced
    env = run(client, "throw new TypeError('nope')")
    assert env["status"] == "failed", env
    (leg,), _ = _spans(exporter, env["cell_id"])
    assert leg.attributes["codemode.status"] == "failed"
    assert leg.attributes["codemode.code"] == env["code"]
    assert leg.status.status_code is trace.StatusCode.ERROR


def test_parked_cell_has_a_span_per_leg_and_its_call_ends_when_it_settles(traced):
    """A cell parked on a slow tool and resumed by wait gives two leg spans in one trace (the second under
    the first); the call made in the first leg stays its child and ends when the tool finished, after the
    first leg ended."""
    client, exporter = traced
    env = run(client, "return (await echo({x: 3, delay: 0.6})).echo", timeout_ms=150)
    assert env["status"] == "waiting", env
    done = wait(client, env["cell_id"], timeout_ms=5000)
    assert done["status"] == "completed" and done["value"] == 3, done
    (first, second), (call,) = _spans(exporter, env["cell_id"])
    assert [first.attributes["codemode.legs"], second.attributes["codemode.legs"]] == [1, 2]
    assert [first.attributes["codemode.status"], second.attributes["codemode.status"]] == ["waiting", "completed"]
    assert second.parent.span_id == first.context.span_id
    assert second.context.trace_id == first.context.trace_id
    assert call.parent.span_id == first.context.span_id
    assert call.end_time > first.end_time  # the tool outlived the leg that called it
    assert call.end_time <= second.end_time
    assert call.end_time - call.start_time >= 0.6e9
    assert call.attributes["codemode.outcome"] == "ok"


def test_traceparent_on_exec_and_wait_becomes_each_legs_parent(traced):
    """An incoming W3C ``traceparent`` is the leg span's parent; a wait with its own links to the first leg."""
    client, exporter = traced
    r = client.post(
        "/v1/exec",
        json={"code": "return (await echo({x: 1, delay: 0.4})).echo", "timeout_ms": 150},
        headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"},
    )
    env = r.json()
    assert env["status"] == "waiting", env
    r = client.post(
        f"/v1/cells/{env['cell_id']}/wait",
        json={"timeout_ms": 5000},
        headers={"traceparent": f"00-{TRACE_ID}-{WAIT_PARENT_ID}-01"},
    )
    assert r.json()["status"] == "completed", r.text
    (first, second), (call,) = _spans(exporter, env["cell_id"])
    assert (first.context.trace_id, first.parent.span_id) == (int(TRACE_ID, 16), int(PARENT_ID, 16))
    assert first.parent.is_remote
    assert (second.context.trace_id, second.parent.span_id) == (int(TRACE_ID, 16), int(WAIT_PARENT_ID, 16))
    assert [link.context.span_id for link in second.links] == [first.context.span_id]
    assert call.context.trace_id == int(TRACE_ID, 16) and call.parent.span_id == first.context.span_id


@pytest.mark.parametrize(
    "header",
    [
        "00-not-a-trace-01",
        f"00-{'0' * 32}-{PARENT_ID}-01",  # the all-zero trace id is invalid
        f"00-{TRACE_ID}-{PARENT_ID}-01" + "-x" * 100_000,  # over the propagator's length cap
    ],
)
def test_malformed_traceparent_starts_a_new_trace(traced, header):
    """A traceparent that is not valid W3C is ignored: the cell runs and its leg is a new trace's root."""
    client, exporter = traced
    r = client.post("/v1/exec", json={"code": "return 1"}, headers={"traceparent": header})
    assert r.status_code == 200 and r.json()["status"] == "completed", r.text
    (leg,), _ = _spans(exporter, r.json()["cell_id"])
    assert leg.parent is None and leg.context.trace_id != int(TRACE_ID, 16)


def test_a_cancelled_parked_cell_ends_its_trace_with_a_span_and_its_pending_call(traced):
    """Cancelling a parked cell adds a last ``codemode.cell`` span (failed, ``aborted``), parented by the
    cancel's ``traceparent``; the still-running call ends with the cell: outcome ``cancelled``."""
    client, exporter = traced
    env = run(client, "return (await echo({x: 1, delay: 30})).echo", timeout_ms=150)
    assert env["status"] == "waiting", env
    r = client.post(f"/v1/cells/{env['cell_id']}/cancel", headers={"traceparent": f"00-{TRACE_ID}-{WAIT_PARENT_ID}-01"})
    assert r.json()["code"] == "aborted", r.text
    (leg, ending), (call,) = _spans(exporter, env["cell_id"])
    assert leg.attributes["codemode.status"] == "waiting"
    assert (ending.attributes["codemode.status"], ending.attributes["codemode.code"]) == ("failed", "aborted")
    assert ending.status.status_code is trace.StatusCode.ERROR
    assert (ending.context.trace_id, ending.parent.span_id) == (int(TRACE_ID, 16), int(WAIT_PARENT_ID, 16))
    assert call.attributes["codemode.outcome"] == "cancelled"
    assert call.status.status_code is trace.StatusCode.ERROR


def test_a_parked_cell_that_expires_ends_its_trace_with_a_span(tmp_path):
    """An expired parked cell's last span joins its own trace (no request to take a parent from)."""
    exporter = InMemorySpanExporter()
    now = [0.0]
    settings = Settings(workers=1, data_dir=str(tmp_path), cell_ttl_seconds=60).check()
    services = build_components(
        settings, extra_tools=TEST_TOOLS, tracing=tracing_to(exporter), cells_clock=lambda: now[0]
    )
    with TestClient(create_app(settings, services)) as client:
        env = run(client, "await yield_control('later'); return 1")
        assert env["status"] == "waiting", env
        now[0] += 61
        poll_until(lambda: client.get(f"/v1/cells/{env['cell_id']}").json()["status"] == "failed", "the cell expires")
    (leg, ending), _ = _spans(exporter, env["cell_id"])
    assert (ending.attributes["codemode.status"], ending.attributes["codemode.code"]) == ("failed", "aborted")
    assert ending.context.trace_id == leg.context.trace_id and ending.parent.span_id == leg.context.span_id


def test_cancelling_a_cell_in_its_leg_adds_no_second_span(traced):
    """A cell cancelled while its leg runs ends in that leg's span: the cancel adds none."""
    client, exporter = traced
    cell_id = client.post("/v1/exec", json={"code": "while (true) {}", "background": True, "timeout_ms": 20000}).json()[
        "cell_id"
    ]
    poll_until(lambda: client.get(f"/v1/cells/{cell_id}").json()["telemetry"]["legs"] == 1, "the leg runs")
    assert client.post(f"/v1/cells/{cell_id}/cancel").json()["code"] == "aborted"
    (leg,), _ = _spans(exporter, cell_id)
    assert (leg.attributes["codemode.status"], leg.attributes["codemode.code"]) == ("failed", "aborted")


def _tracing_calls_per_cell(tmp: Path, tracing: Tracing) -> int:
    """Run a cell with three tool calls on an in-process service and count the calls made, on this thread
    (the event loop's), into service/tracing.py or OpenTelemetry while the cell ran."""
    calls = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" and (
            frame.f_code.co_filename == TRACING_MODULE or "opentelemetry" in frame.f_code.co_filename
        ):
            calls += 1

    async def scenario() -> None:
        settings = Settings(workers=1, data_dir=str(tmp)).check()
        svc = build_components(settings, extra_tools=TEST_TOOLS, tracing=tracing)
        await svc.start()
        try:
            limits = svc.cells.limits(timeout_ms=5000, memory_limit_bytes=None, max_output_bytes=None)
            spec = CellSpec(
                code="for (let i = 0; i < 3; i++) await echo({x: i}); return 1", tenant="local", limits=limits
            )
            sys.setprofile(profile)
            try:
                env = await svc.cells.exec(spec)
            finally:
                sys.setprofile(None)
            assert env["status"] == "completed", env
        finally:
            await svc.close()

    asyncio.run(scenario())
    return calls


def test_tracing_off_runs_no_tracing_code_per_cell(tmp_path):
    """Off, a cell and its host requests run no tracing code at all (no span, no attribute dict: a flag and
    ``is None`` checks); on, the same cell does (the probe sees it)."""
    assert _tracing_calls_per_cell(tmp_path / "off", NO_TRACING) == 0
    assert _tracing_calls_per_cell(tmp_path / "on", tracing_to(InMemorySpanExporter())) > 0


# ---- configuration -----------------------------------------------------------------------------


def test_exporter_choice_is_read_from_the_standard_variables():
    """OTEL_TRACES_EXPORTER picks the exporters (default none); OTEL_SDK_DISABLED wins; bad values name the variable."""
    assert TracingConfig.from_env({}).exporters == ()
    assert TracingConfig.from_env({"OTEL_TRACES_EXPORTER": "none"}).exporters == ()
    assert TracingConfig.from_env({"OTEL_TRACES_EXPORTER": "console"}).exporters == ("console",)
    assert TracingConfig.from_env({"OTEL_TRACES_EXPORTER": "otlp, Console"}).exporters == ("otlp", "console")
    assert TracingConfig.from_env({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}).exporters == ()
    otlp = TracingConfig.from_env(
        {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_SERVICE_NAME": "svc-a",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
        }
    )
    assert (otlp.service_name, otlp.endpoint) == ("svc-a", "http://collector:4318/v1/traces")
    with pytest.raises(ConfigError, match="OTEL_TRACES_EXPORTER: 'zipkin' is not supported") as exc:
        TracingConfig.from_env({"OTEL_TRACES_EXPORTER": "zipkin"})
    assert exc.value.need_param == "OTEL_TRACES_EXPORTER"
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' is not supported"):
        TracingConfig.from_env({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert start_tracing(TracingConfig.from_env({})) is NO_TRACING
    assert NO_TRACING.provider is None and not NO_TRACING.enabled


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean environment for ``codemode exec`` (no CODEMODE_ or OTEL_ variables), data in tmp."""
    for key in list(os.environ):
        if key.startswith(("CODEMODE_", "OTEL_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("CODEMODE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CODEMODE_WORKER_NICE", "0")  # workers at the service's priority (tests/conftest.py)
    (tmp_path / "cell.js").write_text("await new Promise(r => setTimeout(r, 1)); return 2", encoding="utf-8")
    return tmp_path


def test_console_exporter_writes_spans_to_stderr_and_keeps_stdout_for_the_envelope(cli_env, monkeypatch, capsys):
    """``OTEL_TRACES_EXPORTER=console``: ``codemode exec`` prints the envelope alone on stdout and the
    cell and timer spans, as JSON, on stderr (flushed when the service closes)."""
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "console-test")
    assert main(["exec", str(cli_env / "cell.js")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["value"] == 2
    names = {s["name"]: s for s in _json_objects(err)}
    assert set(names) == {"codemode.cell", "codemode.call"}
    assert names["codemode.call"]["attributes"]["codemode.method"] == "sleep"
    assert names["codemode.call"]["parent_id"] == names["codemode.cell"]["context"]["span_id"]
    assert names["codemode.cell"]["resource"]["attributes"]["service.name"] == "console-test"


def test_unsupported_exporter_stops_the_command_at_start(cli_env, monkeypatch, capsys):
    """An exporter the service cannot run is a start-up error naming the variable, not a silent no-trace."""
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "jaeger")
    assert main(["exec", str(cli_env / "cell.js")]) == 3
    assert (
        "cannot start: OTEL_TRACES_EXPORTER: 'jaeger' is not supported; use otlp, console or none"
        in capsys.readouterr().err
    )


def _json_objects(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects that start at the beginning of a line of ``text`` (the console exporter's spans)."""
    decoder, at = json.JSONDecoder(), 0
    while (at := text.find("{", at)) >= 0:
        if at == 0 or text[at - 1] == "\n":
            value, at = decoder.raw_decode(text, at)
            yield value
        else:
            at += 1


def test_otlp_exporter_posts_spans_to_the_configured_endpoint(cli_env, monkeypatch, capsys):
    """``OTEL_TRACES_EXPORTER=otlp`` sends the spans as OTLP/HTTP protobuf to ``OTEL_EXPORTER_OTLP_ENDPOINT``."""
    with otlp_collector() as (endpoint, received):
        monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        assert main(["exec", str(cli_env / "cell.js")]) == 0
        poll_until(lambda: received, "the collector received an export")
    path, content_type, body = received[0]
    assert (path, content_type) == ("/v1/traces", "application/x-protobuf")
    assert b"codemode.cell" in body and b"codemode.call" in body and b"codemode.cell_id" in body


def test_tracing_off_imports_no_sdk_and_installs_no_provider(cli_env):
    """With no OTEL_ variables a cell with host requests runs without the SDK ever imported, so no provider
    exists and no span is made; the global provider is still the API's placeholder."""
    probe = (
        "import sys\n"
        "from service.cli import main\n"
        f"rc = main(['exec', {str(cli_env / 'cell.js')!r}])\n"
        "from opentelemetry import trace\n"
        "sdk = sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk'))\n"
        "print('PROBE', rc, sdk, type(trace.get_tracer_provider()).__name__, file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CODEMODE_"))}
    env.update(PYTHONPATH=str(ROOT), CODEMODE_DATA_DIR=str(cli_env / "data"))
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout)["value"] == 2, done.stderr
    assert "PROBE 0 [] ProxyTracerProvider" in done.stderr, done.stderr


def test_mcp_tool_calls_take_their_parent_from_the_http_header_or_the_request_meta(traced):
    """An MCP exec's leg is a child of the HTTP request's ``traceparent``, else of the MCP request's
    ``_meta.traceparent`` (stdio has no headers); the facade passes it down like the HTTP API."""
    from service.mcp_server.cell_tools import ToolAnswer
    from service.mcp_server.facade import McpFacade
    from service.mcp_server.rounds import Caller
    from service.mcp_server.sdk_server import _trace_parent
    from service.settings import ApiKey

    client, exporter = traced
    facade = McpFacade(client.app.state.services)
    header = f"00-{TRACE_ID}-{PARENT_ID}-01"
    meta = f"00-{TRACE_ID}-{WAIT_PARENT_ID}-01"

    class _HttpRequest:  # what the SDK hands a handler over Streamable HTTP: a request with its ASGI scope
        scope = {"type": "http", "headers": [(b"traceparent", header.encode())]}

    from_header = _trace_parent(facade, _HttpRequest(), {"traceparent": meta})
    from_meta = _trace_parent(facade, None, {"traceparent": meta, "other": 1})
    key = ApiKey(key="", tenant="local")

    async def exec_with(parent: object) -> str:
        answer = await facade.call(Caller(key, trace_parent=parent), "exec", {"code": "return 1"})
        assert (
            isinstance(answer, ToolAnswer)
            and answer.structured is not None
            and answer.structured["status"] == "completed"
        )
        return str(answer.structured["cell_id"])

    assert client.portal is not None  # the app's event loop, where its cells run
    for parent, parent_id in ((from_header, PARENT_ID), (from_meta, WAIT_PARENT_ID)):
        cell_id = client.portal.call(exec_with, parent)
        (leg,), _ = _spans(exporter, cell_id)
        assert (leg.context.trace_id, leg.parent.span_id) == (int(TRACE_ID, 16), int(parent_id, 16))


def test_a_parent_passed_on_to_another_replica_keeps_its_trace():
    """``headers_for`` writes the traceparent a relayed request (the MCP facade's wait on another replica)
    carries, naming the same trace and parent span; without tracing or a parent it adds nothing."""
    tracing = tracing_to(InMemorySpanExporter())
    header = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    headers = dict(tracing.headers_for(tracing.parent_from_headers({"traceparent": header})))
    assert headers[b"traceparent"] == header.encode()
    assert tracing.headers_for(None) == [] and NO_TRACING.headers_for(object()) == []
