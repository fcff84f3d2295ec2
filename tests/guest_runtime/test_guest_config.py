"""The guest config's caps: one source of their defaults (``guest_config.py``), read by one rule in both engines;
and the guest's fixed limits, declared there once for both languages."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from bridge import jsoncodec
from bridge.messages import GuestCaps
from guest_runtime import guest_config
from guest_runtime.errors import EngineFault
from guest_runtime.guest_config import MAX_PENDING_REQUESTS, MAX_QUEUED_REQUESTS, MAX_REQUEST_VALUES, read_caps
from guest_runtime.monty.engine import PythonEngine
from guest_runtime.quickjs import prelude_source
from guest_runtime.quickjs.engine import GuestEngine

MiB = 1024 * 1024


def test_every_cap_has_a_default_but_the_request_size():
    """The defaults name caps of GuestCaps; maxQueuedBytes takes maxRequestBytes, which has none."""
    assert set(guest_config.DEFAULTS) | {"maxRequestBytes", "maxQueuedBytes"} == set(GuestCaps.__annotations__)
    assert "maxRequestBytes" not in guest_config.DEFAULTS and "maxQueuedBytes" not in guest_config.DEFAULTS


def test_a_config_that_gives_only_the_request_size_gets_the_defaults():
    """Left out, a cap is its default; maxQueuedBytes is maxRequestBytes (a burst may carry what one request may)."""
    assert read_caps({"tools": [], "maxRequestBytes": 5000}) == {
        "maxRequestBytes": 5000,
        "maxQueuedRequests": MAX_QUEUED_REQUESTS,
        "maxPendingRequests": MAX_PENDING_REQUESTS,
        "maxQueuedBytes": 5000,
        "maxRequestValues": MAX_REQUEST_VALUES,
    }
    given = {"maxRequestBytes": 10, "maxQueuedRequests": 2, "maxPendingRequests": 3, "maxQueuedBytes": 4.0}
    assert read_caps({**given, "maxRequestValues": 5}) == {**given, "maxQueuedBytes": 4, "maxRequestValues": 5}


@pytest.mark.parametrize(
    ("caps", "refusal"),
    [
        ({}, "maxRequestBytes must be a positive integer, not missing"),
        ({"maxRequestBytes": 0}, "maxRequestBytes must be a positive integer, not 0"),
        ({"maxRequestBytes": -4096}, "maxRequestBytes must be a positive integer, not -4096"),
        ({"maxRequestBytes": 1.5}, "maxRequestBytes must be a positive integer, not 1.5"),
        ({"maxRequestBytes": "4096"}, 'maxRequestBytes must be a positive integer, not "4096"'),
        (
            {"maxRequestBytes": 4096, "maxPendingRequests": True},
            "maxPendingRequests must be a positive integer, not true",
        ),
        ({"maxRequestBytes": 4096, "maxQueuedBytes": None}, "maxQueuedBytes must be a positive integer, not null"),
        ({"maxRequestBytes": 4096, "maxRequestValues": 0}, "maxRequestValues must be a positive integer, not 0"),
    ],
)
@pytest.mark.parametrize("engine", [GuestEngine, PythonEngine])
def test_both_engines_refuse_a_cap_outside_the_rule(
    engine: type[GuestEngine | PythonEngine], caps: dict[str, Any], refusal: str
):
    """A bad cap is the host's bug: each engine refuses the config naming the cap, in the same words.

    The prelude used to run with no request-size cap when maxRequestBytes was missing, and to keep a
    negative or non-numeric cap that the Monty engine replaced with its default.
    """
    with pytest.raises(EngineFault, match=re.escape(f"guest config {refusal}")):
        engine().configure(jsoncodec.dumps_text({"tools": [], "mcp": [], **caps}), 32 * MiB)


def _refusals(code: str, **caps: int) -> list[str]:
    """Run ``code`` in a QuickJS cell configured with ``caps`` alone; the texts it emitted."""
    engine = GuestEngine()
    engine.configure(jsoncodec.dumps_text({"tools": [], "mcp": [], **caps}), 64 * MiB)
    # A deadline, not an expected time: the first cell walks a million values, seconds on a busy machine.
    engine.compile(code, 30.0)
    deadline = time.monotonic() + 30.0
    engine.call_cell(deadline)
    engine.pump(deadline)
    snap = engine.take()
    return [jsoncodec.loads(entry)["text"] for entry in snap["output"]]


def test_the_prelude_refuses_past_the_defaults_generated_from_guest_config():
    """With only maxRequestBytes given, the prelude's limits are guest_config.py's defaults."""
    values, burst, pending = _refusals(
        """
        const why = e => e.message;
        const table = Array.from({ length: 1000 }, () => new Array(1000).fill(0)); // 1,001,001 values
        text(await results.save(table).then(() => 'sent', why));
        void results.save('x'.repeat(3000000));
        text(await results.save('y'.repeat(3000000)).then(() => 'sent', why));
        try { for (;;) setTimeout(() => {}, 5); } catch (e) { text(e.message); }
        """,
        maxRequestBytes=4 * MiB,
    )
    assert values.startswith(f"request arguments hold more than {MAX_REQUEST_VALUES} JSON values"), values
    assert f"over the {4 * MiB}-character cap" in burst, burst  # maxQueuedBytes: maxRequestBytes
    assert pending.startswith(f"too many host requests pending (limit {MAX_PENDING_REQUESTS}:"), pending
    (queued,) = _refusals(
        f"let last; for (let i = 0; i <= {MAX_QUEUED_REQUESTS}; i++) last = yield_control();"
        "text(await last.then(() => 'sent', e => e.message));",
        maxRequestBytes=MiB,
        maxPendingRequests=4 * MAX_QUEUED_REQUESTS,
    )
    assert queued.startswith(f"too many host requests queued at once (limit {MAX_QUEUED_REQUESTS})"), queued


def test_the_prelude_declares_each_fixed_limit_only_in_the_generated_file():
    """MAX_NESTING, MAX_OUTPUT_ENTRIES and CONSOLE_TOTAL are spelled once, in guest_config.py: the prelude
    reads them from the file generated from it and declares them nowhere else."""
    folder = Path(str(prelude_source.folder()))
    for name, value in guest_config.LIMITS.items():
        declaring = sorted(p.name for p in folder.glob("*.js") if re.search(rf"\bconst {name}\b", p.read_text("utf-8")))
        assert declaring == ["guest_config.js"], (name, declaring)
        assert f"const {name} = {value};" in (folder / "guest_config.js").read_text("utf-8")


@pytest.mark.parametrize(
    ("engine", "code", "marker"),
    [
        (
            GuestEngine,
            "for (let i = 0; i < 400; i++) console.log('x'.repeat(100)); return 1",
            "[console output truncated]",
        ),
        (PythonEngine, "for i in range(400):\n    print('x' * 100)\n1", "[print output truncated]"),
    ],
)
def test_both_engines_stop_console_output_at_the_one_console_total(
    engine: type[GuestEngine | PythonEngine], code: str, marker: str
):
    """40,000 characters printed: each engine keeps at most CONSOLE_TOTAL of them and most of that, then one marker."""
    cell = engine()
    cell.configure(jsoncodec.dumps_text({"tools": [], "mcp": [], "maxRequestBytes": MiB}), 64 * MiB)
    cell.compile(code, 5.0)
    texts = [jsoncodec.loads(entry)["text"] for entry in cell.start(time.monotonic() + 5.0).output]
    assert texts[-1] == marker and marker not in texts[:-1]
    kept = sum(len(t) for t in texts[:-1])
    assert guest_config.CONSOLE_TOTAL // 2 < kept <= guest_config.CONSOLE_TOTAL, kept
