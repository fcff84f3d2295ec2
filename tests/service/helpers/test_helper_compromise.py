"""An owned helper process: whatever it writes is data the service checks, never code; it is then replaced.

Each test starts real helper processes the way the service does (``HelperPool``, ``start_helper``: the
same command line, environment and ``confine`` call), and the test-only payload
``tests/support/compromised_helper.py`` stands for code that a memory bug in the JSON decoder let in:
once confined, it answers every job the way its plan says (a pickle, wrong shapes, floods, an endless
stream, silence).  The service must refuse each answer with a clear, retryable error, stop that helper,
and serve the next request with a fresh one.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from service.errors import ConfigError, HelperFailed, TooManyRequests
from service.helpers import helper as helper_module
from service.helpers.helper import Helper, start_helper
from service.helpers.pool import HelperPool
from service.helpers.protocol import TEST_PAYLOAD_VARIABLE
from service.http.request_json import INLINE_BYTES, BodyDecoder
from service.process_launch import CONFINED_ENVIRONMENT
from service.settings_load import load_settings
from tests.conftest import make_client
from tests.support.helper_pools import ALPHA, ALPHA_NARROW, BETA, helper_options, helper_pool
from tests.support.live_server import ROOT

pytestmark = pytest.mark.anyio

#: An exec body over the inline limit: decoded in a helper.
EXEC_BODY = json.dumps({"code": "return 1 // " + "x" * (INLINE_BYTES + 1024)}).encode()
EXEC_VALUES = 100_000  # the exec body's value cap (service/http/body_limits.py)
WAIT_BODY = json.dumps(
    {"tool_results": [{"id": "req_1", "ok": True, "value": {"rows": ["y" * (INLINE_BYTES + 1024)]}}]}
).encode()


@pytest.fixture
async def pool() -> AsyncIterator[HelperPool]:
    """A pool without spares: every helper is started when a job needs it, with the payload set then."""
    helpers = helper_pool(spares=0)
    try:
        yield helpers
    finally:
        await helpers.close()


def _exited(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


async def _owned_answer(pool: HelperPool, plan: dict[str, object], body: bytes = EXEC_BODY, **job: object) -> str:
    """Decode ``body`` with a helper that answers as ``plan`` says: the refusal's message, after checking
    that it is a retryable 503, that the owned helper is gone, and that a fresh helper serves the next body."""
    pool.test_payload = json.dumps(plan)
    decoder = BodyDecoder(pool)
    with pytest.raises(HelperFailed) as refused:
        await decoder.decode(body, ALPHA, **job)  # type: ignore[arg-type]
    failure = refused.value
    assert (failure.code, failure.status, failure.error_type, failure.retry_after) == (
        "helper_failed",
        503,
        "transient",
        1,
    )
    assert "retry this one" in failure.message
    assert pool.live == 0, "the owned helper left its seat"
    pool.test_payload = None
    value = await decoder.decode(body, ALPHA, **job)  # type: ignore[arg-type]
    assert isinstance(value, dict)
    return failure.message


async def test_a_pickle_from_an_owned_helper_runs_nothing_in_the_service(pool: HelperPool, tmp_path: Path) -> None:
    """The old helpers answered through a process pool, in pickles: an owned one ran its code in the service.
    The same answer now is bytes that are not JSON: refused, and the pickle's code never runs here."""
    marker = tmp_path / "owned"
    message = await _owned_answer(pool, {"answer": "pickle", "marker": str(marker)}, max_values=EXEC_VALUES)
    assert "the helper process that decodes large request bodies wrote a frame" in message
    assert not marker.exists()


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("garbage", "wrote a frame that is not JSON"),
        ("not_an_object", "wrote a frame that is not a JSON object"),
        ("frames_as_text", "wrote a frame that is not an answer"),
        ("other_job", "answered job 2 when asked job 1"),
        ("unknown_outcome", "answered with an outcome this job does not have ('pwned')"),
        ("extra_field", "answered 'ok' with fields it does not have ('__class__')"),
        ("control_flood", "wrote a frame of more than 8 JSON values"),
        ("huge_frame", "announced a frame of 2147483648 bytes, over the"),
        ("exit", "stopped while working on this request (exit status 0)"),
    ],
)
async def test_an_answer_out_of_shape_stops_the_helper_and_fails_only_its_request(
    pool: HelperPool, answer: str, reason: str
) -> None:
    assert reason in await _owned_answer(pool, {"answer": answer}, max_values=EXEC_VALUES)


async def test_a_flood_of_tiny_values_is_counted_before_it_is_decoded(pool: HelperPool) -> None:
    """A decoded body of 600,000 zeros fits the bytes its answer may take, but not the body's value cap."""
    plan = {"answer": "value_flood", "values": 600_000}
    message = await _owned_answer(pool, plan, max_values=EXEC_VALUES)
    assert f"sent a decoded body of more than {EXEC_VALUES} JSON values" in message


async def test_a_decoded_body_too_deep_is_refused(pool: HelperPool) -> None:
    message = await _owned_answer(pool, {"answer": "too_deep", "depth": 200}, max_values=EXEC_VALUES)
    assert "sent a decoded body nested more than 128 levels deep" in message


async def test_an_endless_stream_is_cut_at_what_the_answer_may_take(pool: HelperPool) -> None:
    """Raw frames without end: read until they pass five times the body's size (plus 64 KiB), then cut."""
    message = await _owned_answer(pool, {"answer": "endless"}, max_values=EXEC_VALUES)
    assert "bytes left for its answer's raw frames" in message


async def test_tool_result_values_must_match_the_places_for_them(pool: HelperPool) -> None:
    """A wait body's values come back as raw frames: one more than the body has places for is refused."""
    message = await _owned_answer(pool, {"answer": "extra_tool_value"}, WAIT_BODY, tool_values_raw=True)
    assert "sent 2 tool result values for a body with 1 places for them" in message


async def test_a_count_of_the_wrong_type_is_refused(pool: HelperPool) -> None:
    pool.test_payload = json.dumps({"answer": "count_as_text"})
    with pytest.raises(HelperFailed) as refused:
        await BodyDecoder(pool).check_mcp_body(EXEC_BODY, ALPHA)
    assert "counts the values of large MCP request bodies answered 'count' without a well-typed 'count'" in (
        refused.value.message
    )


@pytest.mark.timeout(30)
async def test_closing_the_pool_just_after_a_helper_was_reaped_returns(pool: HelperPool) -> None:
    """A stopped helper's exit, reaped in the loop turn before ``close``, ends the close: it once spun for
    ever there, because a gather of finished tasks completes without yielding to the loop, so the task's
    own clean-up (its done callback) never ran."""
    pool.test_payload = json.dumps({"answer": "exit"})
    with pytest.raises(HelperFailed):
        await BodyDecoder(pool).decode(EXEC_BODY, ALPHA, max_values=EXEC_VALUES)
    await asyncio.sleep(0)  # this turn runs the reaping task to its end; its done callback waits for the next
    await pool.close()
    assert pool.live == 0


async def test_a_silent_helper_is_stopped_at_the_job_deadline(
    pool: HelperPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(helper_module, "JOB_SECONDS", 0.5)
    message = await _owned_answer(pool, {"answer": "silent"}, max_values=EXEC_VALUES)
    assert "did not answer within 0.5 s" in message


async def test_a_helper_starts_like_a_worker_and_holds_only_its_pipes() -> None:
    """``python -I -m service.helpers.process`` in ``/``, with the allow-listed environment only, no
    ``PYTHONPATH`` or working directory on its path, and, once confined, its three pipes and nothing else:
    no multiprocessing resource tracker, no child of its own."""
    helper = await start_helper(helper_options(), test_payload=json.dumps({"answer": "report"}))
    try:
        report = json.loads(await helper.read_frame(64 * 1024, "its report"))
        assert report["cwd"] == "/" and report["isolated"] == 1
        assert set(report["environ"]) <= {*CONFINED_ENVIRONMENT, TEST_PAYLOAD_VARIABLE}, report["environ"]
        assert "" not in report["path"] and os.getcwd() not in report["path"]
        assert report["fds"] == [0, 1, 2, 3, 4]  # its pipes, fd 1 a copy of stderr, and the listing's own fd
        command = Path(f"/proc/{helper.pid}/cmdline").read_bytes().split(b"\0")
        assert command[:4] == [sys.executable.encode(), b"-I", b"-m", b"service.helpers.process"]
        files = [os.readlink(f"/proc/{helper.pid}/fd/{fd}") for fd in sorted(os.listdir(f"/proc/{helper.pid}/fd"))]
        assert len(files) == 4 and all(f.startswith("pipe:") for f in files), files
        children = Path(f"/proc/{helper.pid}/task/{helper.pid}/children").read_text().split()
        assert children == []
    finally:
        helper.stop()
        await helper.wait()


def test_the_helper_process_imports_no_web_framework_and_no_pickle() -> None:
    """The helper imports everything it will run before it confines itself: only its jobs' light code."""
    probe = "import json, sys, service.helpers.process; print(json.dumps(sorted(sys.modules)))"
    modules = json.loads(subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, check=True).stdout)
    heavy = ("fastapi", "starlette", "pydantic", "uvicorn", "asyncio", "mcp", "httpx", "quickjs", "_quickjs")
    unsafe = ("pickle", "_pickle", "multiprocessing", "concurrent.futures.process")
    assert [m for m in modules if m.split(".")[0] in heavy or m in unsafe] == []
    assert "service.tools.schema_checks" in modules  # the scan sees the jobs' modules


def test_an_owned_helper_costs_its_request_a_503_and_nothing_else(tmp_path: Path) -> None:
    """Over HTTP: the exec whose body an owned helper answered with a pickle is a 503 ``helper_failed`` with
    Retry-After, its code never runs in the service, and a small exec beside it is served."""
    marker = tmp_path / "owned"
    client = make_client(tmp_path / "svc")
    client.app.state.services.helpers.test_payload = json.dumps({"answer": "pickle", "marker": str(marker)})  # type: ignore[attr-defined]
    with client:
        r = client.post("/v1/exec", content=EXEC_BODY, headers={"content-type": "application/json"})
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
        error = r.json()["error"]
        assert (error["code"], error["error_type"]) == ("helper_failed", "transient")
        assert "decodes large request bodies" in error["message"] and "retry" in error["message"]
        assert client.post("/v1/exec", json={"code": "return 2"}).json()["value"] == 2
    assert not marker.exists()


# ---- principals and turns ------------------------------------------------------------------------


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Helper]:
    """The helper process that did each job, in order."""
    helpers: list[Helper] = []
    run = Helper.run

    async def recorded(self: Helper, job: object) -> object:
        helpers.append(self)
        return await run(self, job)  # type: ignore[arg-type]

    monkeypatch.setattr(Helper, "run", recorded)
    return helpers


async def test_a_helper_serves_one_principal_for_its_whole_life(served: list[Helper]) -> None:
    """Keys with different policies (``key`` isolation) and other tenants never share a helper; a principal's
    jobs reuse its own; and a helper retired to make room is never handed to anyone else."""
    pool = helper_pool("key", max_live=2)
    decoder = BodyDecoder(pool)
    try:
        for key in (ALPHA, ALPHA, ALPHA_NARROW, BETA, ALPHA):  # beta's seat retires alpha's (least recently used)
            await decoder.decode(EXEC_BODY, key)
    finally:
        await pool.close()
    alpha, alpha_again, narrow, beta, alpha_later = (helper.pid for helper in served)
    assert alpha == alpha_again and len({alpha, narrow, beta, alpha_later}) == 4, served
    assert all(_exited(helper.pid) for helper in served)


async def test_without_a_principal_every_job_gets_a_fresh_helper_stopped_after_it(served: list[Helper]) -> None:
    """``cell`` (and ``session``) isolation: a body is decoded before its session is known, so each job
    takes a helper that served nobody, and it is stopped once the job is done."""
    pool = helper_pool("cell")
    decoder = BodyDecoder(pool)
    try:
        await decoder.decode(EXEC_BODY, ALPHA)
        await decoder.decode(EXEC_BODY, ALPHA)
        assert pool.live == 0 and [helper.dead for helper in served] == [True, True]  # stopped, not kept
    finally:
        await pool.close()
    assert len({helper.pid for helper in served}) == 2


async def test_a_tenants_thousand_bodies_are_capped_and_another_tenants_waits_one_turn_at_most() -> None:
    """One tenant sends 1,000 large bodies at once with one helper slot: past ``max_jobs_per_tenant`` they are
    refused at once (429); another tenant's body, sent while the first tenant's run, is served after at most
    the job running when it came and one more of theirs, not after all of them."""
    pool = helper_pool("key", max_live=1)
    decoder = BodyDecoder(pool)
    done: list[str] = []

    async def send(key: object, tag: str) -> None:
        await decoder.decode(EXEC_BODY, key)  # type: ignore[arg-type]
        done.append(tag)

    try:
        flood = [asyncio.ensure_future(send(ALPHA, "alpha")) for _ in range(1000)]
        while not (pool.jobs["alpha"] == pool.max_jobs_per_tenant and pool.live == 1):
            await asyncio.sleep(0)
        beta = asyncio.ensure_future(send(BETA, "beta"))
        outcomes = await asyncio.gather(*flood, beta, return_exceptions=True)
    finally:
        await pool.close()
    refused = [o for o in outcomes if isinstance(o, TooManyRequests)]
    assert len(refused) == 1000 - pool.max_jobs_per_tenant and refused[0].retry_after == 1
    assert [o for o in outcomes if o is not None and not isinstance(o, TooManyRequests)] == []
    assert len(done) == pool.max_jobs_per_tenant + 1 and done.index("beta") <= 2, done


def test_the_helper_test_payload_cannot_be_switched_on_in_a_deployment(tmp_path: Path) -> None:
    """The service never passes the payload variable to a helper (only ``HelperPool.test_payload`` does, and
    as a CODEMODE_ variable it is an unknown setting); a helper outside a development checkout (no tests/
    beside it) that is given it anyway refuses to start, before it reads anything."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv(TEST_PAYLOAD_VARIABLE, json.dumps({"answer": "pickle"}))
        with pytest.raises(ConfigError):
            load_settings()
    for package in ("bridge", "guest_runtime", "service"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path), TEST_PAYLOAD_VARIABLE: "{}"}
    options = json.dumps(helper_options())
    done = subprocess.run(
        [sys.executable, "-m", "service.helpers.process", options],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode != 0 and done.stdout == b""
    assert b"not a development checkout: refused" in done.stderr, done.stderr
