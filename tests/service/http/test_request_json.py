"""Request body decoding: nesting cap, malformed JSON, wait bodies' tool values kept as raw JSON."""

from __future__ import annotations

import asyncio

import pytest

from service.errors import InvalidRequest
from service.http.request_json import INLINE_BYTES, MAX_BODY_DEPTH, WAIT_REST_BYTES, BodyDecoder, decode_body
from service.runtime.dispatch import RawJson
from tests.support.helper_pools import ALPHA, helper_pool


def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("depth", [MAX_BODY_DEPTH + 1, 1024, 1025, 100_000])
def test_too_deep_bodies_are_422_naming_the_cap(depth):
    with pytest.raises(InvalidRequest) as info:
        decode_body(_deep(depth))
    assert info.value.status == 422 and info.value.need_param == "body"
    assert f"nested more than {MAX_BODY_DEPTH} levels" in info.value.message


def test_body_at_the_cap_decodes():
    value = decode_body(_deep(MAX_BODY_DEPTH))
    for _ in range(MAX_BODY_DEPTH - 1):
        value = value[0]
    assert value == []


@pytest.mark.parametrize("body", [b'{"code":', b"\xff\xfe", b"{'a': 1}"])
def test_malformed_bodies_are_422_saying_not_json(body):
    with pytest.raises(InvalidRequest) as info:
        decode_body(body)
    assert "not valid JSON" in info.value.message and info.value.error_type == "recoverable"


def test_escaped_lone_surrogates_in_bodies_decode_as_replacement_characters():
    """Like every string crossing the service, a lone surrogate escape in a body becomes U+FFFD."""
    assert decode_body(b'{"k\\udfff":"a\\ud800b"}') == {"k\ufffd": "a\ufffdb"}


def test_wait_tool_values_stay_compact_json():
    body = b'{"tool_results":[{"id":"req_1","ok":true,"value":{"a": [1, 2.5, "\\u00e9"]}},{"id":"req_2","ok":false,"error":"no"}]}'
    value = decode_body(body, tool_values_raw=True)
    first, second = value["tool_results"]
    assert isinstance(first["value"], RawJson) and first["value"].data == '{"a":[1,2.5,"é"]}'.encode()
    assert second == {"id": "req_2", "ok": False, "error": "no"}


def test_wait_body_rest_is_capped():
    errors = [{"id": f"req_{i}", "ok": False, "error": "e" * 1024} for i in range(WAIT_REST_BYTES // 1024 + 1)]
    import json

    with pytest.raises(InvalidRequest) as info:
        decode_body(json.dumps({"tool_results": errors}).encode(), tool_values_raw=True)
    assert "besides tool_results[].value" in info.value.message


def test_large_bodies_decode_in_the_helper_process_the_same_way():
    """Above INLINE_BYTES the helper process decodes; the answer and the errors are the same."""
    big = ("[" + ",".join(['{"k":1}'] * (INLINE_BYTES // 7)) + "]").encode()
    body = b'{"tool_results":[{"id":"req_1","ok":true,"value":' + big + b"}]}"

    async def scenario() -> None:
        decoder = BodyDecoder(helpers := helper_pool())
        try:
            value = await decoder.decode(body, ALPHA, tool_values_raw=True)
            assert value["tool_results"][0]["value"].data == big
            with pytest.raises(InvalidRequest) as deep:
                await decoder.decode(_deep(200) + b" " * INLINE_BYTES, ALPHA)
            assert f"nested more than {MAX_BODY_DEPTH} levels" in deep.value.message
            with pytest.raises(InvalidRequest) as bad:
                await decoder.decode(b"{" + b" " * INLINE_BYTES, ALPHA)
            assert "not valid JSON" in bad.value.message
            assert helpers.live == 1 and not next(iter(helpers.seats.values())).helper.dead  # refusals keep it
        finally:
            await helpers.close()

    asyncio.run(scenario())


@pytest.mark.slow
def test_a_dead_decoder_process_is_replaced():
    """If the helper process dies, that request is a transient 503 and the next one decodes again."""
    import os
    import signal

    from service.errors import HelperFailed

    body = b'{"a":"' + b"x" * INLINE_BYTES + b'"}'

    async def scenario() -> None:
        decoder = BodyDecoder(helpers := helper_pool())
        try:
            assert (await decoder.decode(body, ALPHA))["a"] == "x" * INLINE_BYTES
            [seat] = helpers.seats.values()
            assert seat.helper is not None
            os.kill(seat.helper.pid, signal.SIGKILL)
            with pytest.raises(HelperFailed) as info:
                await decoder.decode(body, ALPHA)
            assert info.value.error_type == "transient" and info.value.retry_after == 1
            # Whichever it sees first: the job's bytes refused, or no answer.
            assert "killed by SIGKILL" in info.value.message and "retry" in info.value.message
            assert (await decoder.decode(body, ALPHA))["a"] == "x" * INLINE_BYTES
        finally:
            await helpers.close()

    asyncio.run(scenario())


@pytest.mark.slow
def test_stopping_the_service_stops_its_decoder_helper(tmp_path):
    """After a large body was decoded in a helper process, SIGTERM to `codemode serve` leaves no
    process of its behind (a helper used to be left running, orphaned, with its resource tracker)."""
    import os
    import sys

    import httpx

    from bench.servers import descendants
    from tests.support.live_server import free_port, live_process
    from tests.support.polling import poll_until

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    argv = [
        sys.executable,
        "-m",
        "service.cli",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--log-level",
        "warning",
    ]
    with live_process(argv, base + "/healthz", tmp_path) as proc:
        big = {"code": "return 1;" + " " * (INLINE_BYTES + 1024)}
        assert httpx.post(base + "/v1/exec", json=big, timeout=30).json()["value"] == 1
        family = descendants(proc.pid)
        assert len(family) >= 2  # workers, and now the helper

    def all_gone() -> bool:
        for pid in family:
            try:
                with open(f"/proc/{pid}/stat") as stat:
                    if stat.read().rsplit(")", 1)[1].split()[0] != "Z":
                        return False
            except FileNotFoundError:
                continue
        return True

    try:
        poll_until(all_gone, "every process of the stopped service exits", timeout_s=10)
    finally:
        for pid in family:  # never leave strays behind, even when the assertion failed
            try:
                os.kill(pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
