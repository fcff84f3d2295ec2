"""Saved results end to end (SPEC §6, reference items 41, 43-49): save/load/delete, scoping, retention."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest

from tests.conftest import make_client, run
from tests.conftest import value_of as ok

MiB = 1024 * 1024
UNAVAILABLE = "unavailable or expired"
REFERENCE_GUIDANCE = "Full result saved for this run; use results.load(reference.id) in a later exec."
RESULT_ID = re.compile(r"^result_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# A 5 MB array (about 5.9 MB of compact JSON): far over the 64 KiB output budget, under the 10 MiB inbox.
BIG_ARRAY_JS = "Array.from({length: 400000}, (_, i) => ({i}))"
BIG_ARRAY_BYTES = 5088891  # len(JSON.stringify(...)) of BIG_ARRAY_JS


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def try_load(ref_id: str, *, ok_value: str | None = None) -> str:
    """Cell code loading a reference: the loaded value (or ``ok_value``), else the error message."""
    got = ok_value and json.dumps(ok_value) or "v"
    return (
        f"try {{ const v = await results.load({json.dumps(ref_id)}); return {got}; }} "
        "catch (e) { return 'ERR ' + e.message; }"
    )


def scope() -> dict[str, str]:
    """A fresh (session, run) so tests sharing the module's service never see each other's results."""
    tag = uuid.uuid4().hex[:12]
    return {"session_id": f"sess-{tag}", "run_id": f"run-{tag}"}


def test_save_load_delete_and_small_descriptor(client):
    """results.save gives a full-preview descriptor; load gives a fresh copy; delete answers true, then false."""
    ids = scope()
    code = """
    const value = {rows: [1, 2, 3], name: "é"};
    const ref = await results.save(value);
    value.rows.push(4);  // the saved copy is detached from the guest's object
    const a = await results.load(ref.id);
    a.rows.push(99);
    const b = await results.load(ref.id);
    const first = await results.delete(ref.id);
    const second = await results.delete(ref.id);
    let after = null;
    try { await results.load(ref.id); } catch (e) { after = e.message; }
    return {ref, a, b, first, second, after};
    """
    v = ok(run(client, code, **ids))
    ref = v["ref"]
    assert RESULT_ID.match(ref["id"]), ref["id"]
    original = {"rows": [1, 2, 3], "name": "é"}
    assert ref["bytes"] == len(compact(original).encode())
    assert ref["count"] == 2
    assert isinstance(ref["shape"], str) and ref["shape"].startswith("object")
    assert ref["preview"] == original
    assert ref["previewTruncated"] is False
    assert v["a"] == {"rows": [1, 2, 3, 99], "name": "é"}
    assert v["b"] == original
    assert (v["first"], v["second"]) == (True, False)
    assert UNAVAILABLE in v["after"]


def test_large_descriptor_is_sampled_and_bounded(client):
    """A large heterogeneous value gets a sampled preview (paths, envelope scalars) in at most 768 bytes."""
    code = """
    const rows = Array.from({length: 180}, (_, i) =>
      i % 3 === 0 ? {id: i, label: "row-" + i} : i % 3 === 1 ? [i] : "s" + i);
    return await results.save({structuredContent: {rows}, status: "ok"});
    """
    ref = ok(run(client, code, **scope()))
    assert len(compact(ref).encode()) <= 768
    assert RESULT_ID.match(ref["id"])
    assert ref["count"] == 2
    assert ref["bytes"] > 256
    assert "sampled 3/180 heterogeneous" in ref["shape"], ref["shape"]
    assert ref["previewTruncated"] is True
    preview = ref["preview"]
    assert preview["sampled"] is True
    assert preview["scalars"] == {"$.status": "ok"}
    assert [a["path"] for a in preview["arrays"]] == ["$.structuredContent.rows"]
    assert preview["arrays"][0]["length"] == 180


def test_deep_long_key_value_has_limited_traversal_and_loads_whole(client):
    """A deep value with long keys gets a 'limited traversal' descriptor (<= 768 bytes); load gives it whole."""
    code = """
    let deep = {leaf: "end"};
    for (let i = 0; i < 30; i++) deep = {["k".repeat(100) + i]: deep, other: i};
    const ref = await results.save(deep);
    const back = await results.load(ref.id);
    return {ref, same: JSON.stringify(back) === JSON.stringify(deep)};
    """
    v = ok(run(client, code, **scope()))
    ref = v["ref"]
    assert len(compact(ref).encode()) <= 768
    assert ref["shape"].startswith("limited traversal")
    assert ref["traversalLimited"] is True
    assert v["same"] is True


def test_capacity_of_64_is_catchable_and_old_references_load(client):
    """The 65th save in a run rejects catchably; earlier references still load and a delete frees a slot."""
    code = """
    const ids = [];
    for (let i = 0; i < 64; i++) ids.push((await results.save({i})).id);
    let error = null;
    try { await results.save({i: 64}); } catch (e) { error = {name: e.name, message: e.message}; }
    const first = await results.load(ids[0]);
    const last = await results.load(ids[63]);
    await results.delete(ids[5]);
    const again = (await results.save({i: 65})).id;
    return {error, first, last, again: await results.load(again)};
    """
    v = ok(run(client, code, **scope()))
    assert v["error"] is not None and "64" in v["error"]["message"], v["error"]
    assert v["first"] == {"i": 0} and v["last"] == {"i": 63}
    assert v["again"] == {"i": 65}


def test_reference_loads_in_a_later_exec_of_the_same_run_only(client):
    """A saved result loads in a later cell of the same (session, run); another run or session cannot see it."""
    ids = scope()
    ref = ok(run(client, "return await results.save({secret: 42});", **ids))
    load = try_load(ref["id"])
    assert ok(run(client, load, **ids)) == {"secret": 42}
    other_run = ok(run(client, load, session_id=ids["session_id"], run_id="another-run"))
    other_session = ok(run(client, load, session_id="another-session", run_id=ids["run_id"]))
    no_session = ok(run(client, load, run_id=ids["run_id"]))
    for answer in (other_run, other_session, no_session):
        assert isinstance(answer, str) and answer.startswith("ERR ") and UNAVAILABLE in answer, answer


def test_ending_a_run_expires_its_references(client):
    """DELETE /v1/sessions/{sid}/runs/{rid} expires every reference of that run."""
    ids = scope()
    ref = ok(run(client, "await results.save([1]); return await results.save({n: 1});", **ids))
    r = client.delete(f"/v1/sessions/{ids['session_id']}/runs/{ids['run_id']}")
    assert r.status_code == 200, r.text
    assert r.json()["expired_results"] == 2
    load = try_load(ref["id"], ok_value="loaded")
    assert UNAVAILABLE in ok(run(client, load, **ids))


@pytest.mark.slow
def test_oversized_final_array_is_retained_and_loads_next_cell(client):
    """An interactive cell returning a 5 MB array gets a reference; the next cell of the run loads it all."""
    ids = scope()
    env = run(client, f"return {BIG_ARRAY_JS};", timeout_ms=60_000, **ids)
    marker = ok(env)
    assert isinstance(marker, dict) and marker.get("truncated") is True, marker
    assert marker["guidance"] == REFERENCE_GUIDANCE
    assert "prefix" not in marker
    ref = marker["reference"]
    assert RESULT_ID.match(ref["id"])
    assert ref["bytes"] == BIG_ARRAY_BYTES
    assert ref["count"] == 400000
    assert len(compact(marker).encode()) <= 65536
    code = f"""
    const all = await results.load({json.dumps(ref["id"])});
    return {{length: all.length, first: all[0], last: all[all.length - 1],
             sum: all.reduce((s, r) => s + r.i, 0)}};
    """
    loaded = ok(run(client, code, timeout_ms=60_000, **ids))
    assert loaded == {"length": 400000, "first": {"i": 0}, "last": {"i": 399999}, "sum": 399999 * 400000 // 2}
    elsewhere = try_load(ref["id"], ok_value="loaded")
    assert UNAVAILABLE in ok(run(client, elsewhere, session_id=ids["session_id"], run_id="other-run"))


@pytest.mark.slow
def test_headless_and_restart_safe_cells_get_a_plain_marker(client):
    """Headless and restart-safe cells never retain: an oversized array becomes an ordinary truncation marker."""
    original = compact([{"i": i} for i in range(20000)])
    for flags in ({"headless": True}, {"restart_safe": True}):
        marker = ok(run(client, "return Array.from({length: 20000}, (_, i) => ({i}));", **scope(), **flags))
        assert marker["truncated"] is True and "reference" not in marker, (flags, marker)
        assert original.startswith(marker["prefix"])
        assert marker["omittedBytes"] == len(original) - len(marker["prefix"])


def test_full_store_gives_not_retained_marker_and_keeps_old_references(client):
    """With 64 saves used, an oversized final array gets a plain marker whose guidance starts 'Not retained:'."""
    ids = scope()
    first = ok(
        run(
            client,
            """
    const ids = [];
    for (let i = 0; i < 64; i++) ids.push((await results.save({i})).id);
    return ids[0];
    """,
            **ids,
        )
    )
    marker = ok(run(client, "return Array.from({length: 20000}, (_, i) => ({i}));", **ids))
    assert marker["truncated"] is True and "reference" not in marker
    assert marker["guidance"].startswith("Not retained:"), marker["guidance"]
    assert "capacity" in marker["guidance"]
    original = compact([{"i": i} for i in range(20000)])
    assert original.startswith(marker["prefix"])
    assert marker["omittedBytes"] == len(original) - len(marker["prefix"])
    assert ok(run(client, f"return await results.load({json.dumps(first)});", **ids)) == {"i": 0}


@pytest.mark.slow
def test_retention_over_the_data_allowance_is_not_retained(tmp_path):
    """Over the run's byte allowance: the final value is a 'Not retained:' marker and results.save rejects."""
    with make_client(tmp_path, max_snapshot_bytes=2 * MiB, workers=1) as client:  # allowance 2 MiB
        ids = scope()
        ok(run(client, 'await results.save("s".repeat(1500000)); return 1;', **ids))
        marker = ok(run(client, 'return Array.from({length: 100}, () => "x".repeat(10000));', **ids))
        explicit = ok(
            run(
                client,
                """
        try { await results.save("y".repeat(1000000)); return "saved"; } catch (e) { return e.name; }
        """,
                **ids,
            )
        )
    assert explicit == "RangeError"  # an explicit save over the allowance rejects catchably
    assert marker["truncated"] is True and "reference" not in marker
    assert marker["guidance"].startswith("Not retained:"), marker["guidance"]


def test_non_json_arguments_reject_and_change_nothing(client):
    """BigInt, cycles and throwing getters make results.save, store and tool calls reject; nothing changes."""
    ids = scope()
    ref = ok(run(client, 'await store("k", {v: 1}); return (await results.save({keep: true})).id;', **ids))
    code = f"""
    const cyclic = {{}}; cyclic.self = cyclic;
    const bad = {{bigint: 1n, cycle: cyclic, getter: {{get x() {{ throw new Error("getter exploded"); }}}}}};
    const out = {{}};
    for (const [name, v] of Object.entries(bad)) {{
      for (const [where, call] of [["save", () => results.save(v)], ["store", () => store("k", v)],
                                   ["tool", () => echo({{x: v}})]]) {{
        try {{ await call(); out[name + ":" + where] = "accepted"; }}
        catch (e) {{ out[name + ":" + where] = e.name; }}
      }}
    }}
    out.kept = await results.load({json.dumps(ref)});
    out.stored = await load("k");
    // Refused saves took no slot: 63 more fit next to the one saved before.
    let saved = 0;
    try {{ for (let i = 0; i < 64; i++) {{ await results.save(i); saved++; }} }} catch (e) {{}}
    out.saved = saved;
    return out;
    """
    env = run(client, code, **ids)
    v = ok(env)
    for name in ("bigint", "cycle"):
        for where in ("save", "store", "tool"):
            assert v[f"{name}:{where}"] == "TypeError", (name, where, v)
    for where in ("save", "store", "tool"):
        assert v[f"getter:{where}"] != "accepted", (where, v)
    assert v["kept"] == {"keep": True}
    assert v["stored"] == {"v": 1}
    assert v["saved"] == 63
    assert env["telemetry"]["call_count"] == 0  # the tool never ran
    store = client.get(f"/v1/sessions/{ids['session_id']}/store").json()
    assert store["keys"] == [{"key": "k", "bytes": len('{"v":1}')}]


def test_results_save_refused_in_restart_safe_cells(client):
    """results.save in a restart-safe cell rejects catchably (a replay could not see the result)."""
    v = ok(
        run(
            client,
            "try { await results.save(1); return 'saved'; } catch (e) { return e.message; }",
            restart_safe=True,
            **scope(),
        )
    )
    assert v != "saved" and "restart-safe" in v


@pytest.mark.slow
def test_references_expire_after_results_ttl(tmp_path):
    """A saved result loads until results_ttl_seconds have passed on the results clock, not after."""
    now = [1000.0]
    with make_client(tmp_path, results_ttl_seconds=60, workers=1, results_clock=lambda: now[0]) as client:
        ids = scope()
        ref = ok(run(client, "return await results.save({n: 1});", **ids))
        load = try_load(ref["id"])
        now[0] += 59.9
        assert ok(run(client, load, **ids)) == {"n": 1}
        now[0] += 0.2
        answer = ok(run(client, load, **ids))
    assert isinstance(answer, str) and UNAVAILABLE in answer, answer


def test_network_provenance_travels_with_saved_results(client):
    """A result saved by a cell that saw network data taints the cell that loads it; others stay clean."""
    ids = scope()
    tainted = run(client, "await news(); return (await results.save({headline: 'x'})).id;", **ids)
    assert tainted["untrusted_content"] is True
    clean = run(client, "return (await results.save({local: 1})).id;", **ids)
    assert "untrusted_content" not in clean
    loaded = run(client, f"text('seen'); return await results.load({json.dumps(tainted['value'])});", **ids)
    assert loaded["value"] == {"headline": "x"}
    assert loaded["untrusted_content"] is True
    assert loaded["output"][0]["text"] != "seen" and "seen" in loaded["output"][0]["text"]
    plain = run(client, f"text('seen'); return await results.load({json.dumps(clean['value'])});", **ids)
    assert "untrusted_content" not in plain and plain["output"] == [{"type": "text", "text": "seen"}]
