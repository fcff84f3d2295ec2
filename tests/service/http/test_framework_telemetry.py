"""FastAPI's own OpenTelemetry instrumentation stays off, even when the process has global providers.

codemode's spans are its own (docs/guide/traces.md); the framework's would duplicate them, and left
on, the framework asks the global providers on every request whether anyone configured them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import sys, tempfile
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
with trace.get_tracer("probe").start_as_current_span("probe-works"):
    pass
from fastapi.testclient import TestClient
from service.app import create_app
from service.settings import Settings
settings = Settings(workers=1, data_dir=tempfile.mkdtemp()).check()
with TestClient(create_app(settings)) as client:
    statuses = [client.get("/healthz").status_code, client.post("/v1/exec", json={"code": "return 1"}).status_code]
print("PROBE", statuses, [span.name for span in exporter.get_finished_spans()], file=sys.stderr)
"""


def test_a_global_tracer_provider_gets_no_framework_spans() -> None:
    """With a global tracer provider installed, requests make no FastAPI spans (only the probe's own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CODEMODE_", "FASTAPI_"))}
    env.update(PYTHONPATH=str(ROOT), FASTAPI_OTEL_AUTO_CONFIGURE="true")
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert "PROBE [200, 200] ['probe-works']" in done.stderr, done.stderr[-3000:]
