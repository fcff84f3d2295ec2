"""Every answer is valid UTF-8 JSON with an honest status; the loop-lag histogram runs with the app."""

from __future__ import annotations

import asyncio
import time

import pytest
from fastapi.testclient import TestClient

from service.errors import ResponseNotEncodable
from service.http.responses import JSONBytes
from service.metrics import LoopLagMonitor, Metrics
from tests.conftest import make_client
from tests.support.polling import apoll_until, poll_until


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def test_lone_surrogates_anywhere_become_u_fffd_and_pairs_join():
    body = JSONBytes({"k\ud800": ["x\udfffy", "\ud83d\ude00", {"m": "\udc00\ud800"}], "n": 1}).body
    assert body.decode("utf-8", errors="strict") == '{"k\ufffd":["x\ufffdy","\U0001f600",{"m":"\ufffd\ufffd"}],"n":1}'


def test_valid_answers_are_encoded_unchanged():
    assert JSONBytes({"a": "é😀", "b": [1.5, None, True]}).body == '{"a":"é😀","b":[1.5,null,true]}'.encode()


@pytest.mark.parametrize("depth", [255, 300, 2000])
def test_unencodable_answer_is_an_honest_non_retriable_error(depth):
    """Too deep to encode: a 500 that says retrying cannot help, never 'transient'."""
    with pytest.raises(ResponseNotEncodable) as info:
        JSONBytes({"value": _nested(depth)})
    body = info.value.body()["error"]
    assert info.value.status == 500
    assert body["error_type"] != "transient" and body["non_retriable"] is True
    assert "nested less deeply" in body["message"]


@pytest.fixture(scope="module")
def app_client(tmp_path_factory):
    with make_client(tmp_path_factory.mktemp("responses")) as c:
        yield c


@pytest.mark.slow
def test_unexpected_failure_is_not_transient(tmp_path):
    """An unforeseen exception answers 500 with the error body, non-retriable and not 'transient'."""
    client = make_client(tmp_path)

    async def boom() -> None:
        raise RuntimeError("a bug")

    client.app.add_api_route("/boom", boom)
    with TestClient(client.app, raise_server_exceptions=False) as c:
        r = c.get("/boom")
    assert r.status_code == 500
    err = r.json()["error"]
    assert err["error_type"] != "transient" and err["non_retriable"] is True
    assert "incident" in err["message"]


def test_unexpected_failure_keeps_the_exception_text_out_of_the_body(tmp_path, caplog):
    """A 500 names an incident the service logged with the exception; its text never reaches the caller."""
    client = make_client(tmp_path)

    async def leak() -> None:
        raise RuntimeError("secret-token-123 at /etc/codemode/config.toml")

    client.app.add_api_route("/leak", leak)
    with TestClient(client.app, raise_server_exceptions=False) as c, caplog.at_level("ERROR", logger="codemode"):
        r = c.get("/leak")
    message = r.json()["error"]["message"]
    assert r.status_code == 500 and "secret-token-123" not in r.text and "RuntimeError" not in r.text
    incident = message.split("incident ")[1].split(" ")[0]
    logged = [rec for rec in caplog.records if incident in rec.getMessage()]
    assert logged and "secret-token-123" in str(logged[0].exc_info[1])


def test_openapi_envelope_status_includes_running(app_client):
    """GET /v1/cells/{id} answers "running" during a leg: the schema says so."""
    schema = app_client.get("/openapi.json").json()["components"]["schemas"]["CellEnvelope"]
    assert "running" in schema["properties"]["status"]["enum"]


def test_loop_lag_histogram_records_a_held_loop():
    """Holding the loop for 0.3 s shows as one observation of at least 0.25 s."""
    metrics = Metrics()

    async def scenario() -> None:
        monitor = LoopLagMonitor(metrics, interval=0.01)
        monitor.start()
        # Hold the loop only once the monitor is between observations, so the hold falls inside one.
        await apoll_until(lambda: _observations(metrics) > 0, "the monitor's first observation", 5)
        time.sleep(0.3)  # the thing being measured: a handler that holds the loop
        await apoll_until(lambda: _bucket(metrics, "+Inf") > _bucket(metrics, "0.25"), "an observation over 0.25 s", 5)
        await monitor.stop()
        assert monitor._task is None

    asyncio.run(scenario())
    assert _bucket(metrics, "+Inf") - _bucket(metrics, "0.25") >= 1


def _observations(metrics: Metrics) -> float:
    return metrics.registry.get_sample_value("codemode_event_loop_lag_seconds_count") or 0.0


def _bucket(metrics: Metrics, le: str) -> float:
    value = metrics.registry.get_sample_value("codemode_event_loop_lag_seconds_bucket", {"le": le})
    return value or 0.0


def test_loop_lag_is_exported_while_the_app_runs(app_client):
    """/metrics shows the loop-lag histogram's observations while the app runs."""

    def observed() -> float:
        text = app_client.get("/metrics").text
        lines = text.splitlines()
        return next(
            (float(line.split()[-1]) for line in lines if line.startswith("codemode_event_loop_lag_seconds_count")), 0.0
        )

    poll_until(lambda: observed() > 0, "a loop lag observation on /metrics", 10)


@pytest.mark.parametrize("field, value", [("headless", 0), ("restart_safe", "yes")])
def test_boolean_fields_take_only_booleans(app_client, field, value):
    """The schema says boolean: 0 or "yes" is 422 naming the field, not silently coerced."""
    r = app_client.post("/v1/exec", json={"code": "return 1", field: value})
    assert r.status_code == 422 and r.json()["error"]["need_param"] == field


def test_405_names_the_allowed_methods(app_client):
    """A method the path does not answer is 405 with ``Allow`` listing every route's methods of that path."""
    r = app_client.put("/v1/exec", json={})
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert r.json()["error"]["error_type"] == "recoverable" and r.json()["error"]["code"] == "invalid_request"
    both = app_client.put("/v1/sessions/s1/runs/r1", json={})
    assert both.status_code == 405 and both.headers["allow"] == "DELETE, GET"
