"""Guest globals against the real service: no host surface, encoders, timers, yield_control."""

from __future__ import annotations

import pytest

from tests.conftest import make_client, run


def _completed(env: dict) -> dict:
    assert env["status"] == "completed", env
    return env


def test_no_process_require_or_module(client):
    """`typeof process/require/module` are all "undefined"."""
    env = _completed(run(client, "return [typeof process, typeof require, typeof module, typeof exports]"))
    assert env["value"] == ["undefined"] * 4


def test_no_hidden_host_hook_on_global_object(client):
    """No own global name starts with `__` or `codemode`, and no engine host object is exposed."""
    env = _completed(
        run(
            client,
            """
        const names = Reflect.ownKeys(globalThis).map(String);
        const hidden = names.filter(n => n.startsWith("__") || n.toLowerCase().startsWith("codemode"));
        const host = ["std", "os", "print", "scriptArgs", "gc", "performance"].filter(n => n in globalThis);
        return {hidden, host}
    """,
        )
    )
    assert env["value"] == {"hidden": [], "host": []}


def test_guest_cannot_forge_a_tool_reply(client):
    """Patching JSON.parse and Object.prototype.then does not change a real tool result."""
    env = _completed(
        run(
            client,
            'JSON.parse = () => ({echo: "forged"}); '
            "Object.prototype.then = undefined; "
            'const r = await echo({x: "real"}); return r.echo',
        )
    )
    assert env["value"] == "real"


def test_text_encoder_and_decoder_round_trip(client):
    """TextEncoder/TextDecoder exist and round-trip non-ASCII text as UTF-8."""
    env = run(
        client,
        """
        if (typeof TextEncoder !== "function" || typeof TextDecoder !== "function")
            return {missing: [typeof TextEncoder, typeof TextDecoder]};
        const bytes = new TextEncoder().encode("h\\u00e9 \\u20ac");
        return {len: bytes.length, first: bytes[0], back: new TextDecoder().decode(bytes)};
    """,
    )
    assert env["status"] == "completed", env
    assert env["value"] == {"len": 7, "first": 104, "back": "h\u00e9 \u20ac"}


def test_settimeout_orders_by_delay_and_passes_arguments(client):
    """Timers fire in delay order, pass extra arguments, and clearTimeout stops one."""
    env = _completed(
        run(
            client,
            """
        const out = [];
        setTimeout((a, b) => out.push("late:" + a + b), 40, "x", "y");
        setTimeout(() => out.push("early"), 5);
        const c = setTimeout(() => out.push("never"), 10);
        clearTimeout(c);
        await new Promise(r => setTimeout(r, 80));
        return out;
    """,
        )
    )
    assert env["value"] == ["early", "late:xy"]
    assert env["bridge_dispatch_started"] is False


def test_settimeout_delay_normalisation_and_type_check(client):
    """Negative/NaN delays fire as 0 and a non-function callback throws TypeError."""
    env = _completed(
        run(
            client,
            """
        const out = [];
        setTimeout(() => out.push("neg"), -5);
        setTimeout(() => out.push("nan"), NaN);
        await new Promise(r => setTimeout(r, 10));
        try { setTimeout("code string", 1) } catch (e) { out.push(e.name) }
        return out;
    """,
        )
    )
    assert env["value"] == ["neg", "nan", "TypeError"]


def test_zero_delay_timers_of_a_cell_without_host_work_stay_in_the_worker(client):
    """setTimeout(0) with no host request in flight runs in the worker: no host request, same order.

    Microtasks run before the timers, timers run in the order they were set, and a timer set by a
    timer callback runs in the next round, after the rest of the batch."""
    env = _completed(
        run(
            client,
            """
        const out = [];
        for (let i = 0; i < 200; i++) await new Promise(r => setTimeout(r, 0));
        setTimeout(() => { out.push("a"); setTimeout(() => out.push("c"), 0); }, 0);
        setTimeout((x) => out.push(x), 0, "b");
        const gone = setTimeout(() => out.push("cleared"), 0);
        clearTimeout(gone);
        Promise.resolve().then(() => out.push("micro"));
        await new Promise(r => setTimeout(r, 0));
        await new Promise(r => setTimeout(r, 0));
        return out;
    """,
        )
    )
    assert env["value"] == ["micro", "a", "b", "c"]
    assert env["telemetry"]["host_requests"] == 0


def test_zero_delay_timer_chains_cannot_hold_back_host_work(client):
    """Once a cell waits for a tool, its zero-delay timers go to the host, so an endless timer chain
    started before the call still lets the call run and the cell finish."""
    env = _completed(
        run(
            client,
            """
        let stop = false, ticks = 0;
        (function tick() { ticks++; if (!stop) setTimeout(tick, 0); })();
        const r = await echo({x: "through"});
        stop = true;
        return {echo: r.echo, ticked: ticks > 1};
    """,
            timeout_ms=10000,
        )
    )
    assert env["value"] == {"echo": "through", "ticked": True}
    assert env["telemetry"]["host_requests"] >= 2  # the tool call and at least one host timer


def test_worker_kept_timers_share_the_timer_cap_and_failures(client):
    """Worker-kept timers are capped like host requests (RangeError), and a throwing callback fails
    the cell as an unhandled rejection, as a host timer's does."""
    env = _completed(
        run(client, "try { for (let i = 0; i < 100000; i++) setTimeout(() => {}, 0) } catch (e) { return e.name }")
    )
    assert env["value"] == "RangeError"
    env = run(
        client, 'setTimeout(() => { throw new Error("boom") }, 0); await new Promise(r => setTimeout(r, 0)); return 1'
    )
    assert env["status"] == "failed" and "boom" in env["error"], env


def test_yield_control_parks_with_reason_yield_then_resumes(client):
    """yield_control parks as waiting/yield; wait resolves it to {status:"yielded", reason}."""
    env = run(client, 'text("a"); const r = await yield_control("checkpoint"); text("b"); return r')
    assert env["status"] == "waiting", env
    assert env["reason"] == "yield"
    assert [c["method"] for c in env["pending_tool_calls"]] == ["yield"]
    assert env["output"] == [{"type": "text", "text": "a"}]
    assert env["bridge_dispatch_started"] is False and env["replay_safe"] is True
    r = client.post(f"/v1/cells/{env['cell_id']}/wait", json={})
    assert r.status_code == 200, r.text
    done = r.json()
    assert done["status"] == "completed", done
    assert done["value"] == {"status": "yielded", "reason": "checkpoint"}
    assert done["output"] == [{"type": "text", "text": "b"}]  # only entries not delivered before


def test_yield_control_without_reason_resolves_null_reason(client):
    """yield_control() without an argument resumes with reason null."""
    env = run(client, "return await yield_control()")
    assert env["status"] == "waiting" and env["reason"] == "yield", env
    done = client.post(f"/v1/cells/{env['cell_id']}/wait", json={}).json()
    assert done["value"] == {"status": "yielded", "reason": None}


def test_cleartimeout_of_timer_created_before_a_yield(client):
    """A timer created before yield_control can be cleared after the wait resumes the cell."""
    env = run(
        client,
        """
        const t = setTimeout(() => text("fired"), 300);
        await yield_control("pause");
        clearTimeout(t);
        await new Promise(r => setTimeout(r, 450));
        return "cleared";
    """,
    )
    assert env["status"] == "waiting", env
    r = client.post(f"/v1/cells/{env['cell_id']}/wait", json={"timeout_ms": 3000})
    done = r.json()
    assert done["status"] == "completed", done
    assert done["value"] == "cleared"
    assert {"type": "text", "text": "fired"} not in done["output"]


def test_outstanding_timers_do_not_hold_a_finished_cell(client):
    """A cell that returns with timers still pending completes at once and their callbacks never run."""
    env = run(
        client, 'setTimeout(() => text("late"), 5000); setTimeout(() => text("later"), 9000); return 1', timeout_ms=3000
    )
    # "completed" is the bound: a cell that waited for its timers would reach its 3 s timeout_ms first.
    assert env["status"] == "completed" and env["value"] == 1, env
    assert env["output"] == []


@pytest.mark.slow
def test_guest_dates_are_utc(tmp_path, monkeypatch):
    """Guests see UTC even when the host runs in another zone: offset 0, local hours equal UTC hours."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # workers inherit the host's zone unless they override it
    with make_client(tmp_path, workers=1) as c:
        env = run(c, "const d = new Date(Date.UTC(2026, 0, 1, 5)); return [d.getTimezoneOffset(), d.getHours()];")
    assert env["status"] == "completed", env
    assert env["value"] == [0, 5]
