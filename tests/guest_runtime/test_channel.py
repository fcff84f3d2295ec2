"""The worker's frame channel over a real pipe: read-ahead, vectored writes, large bodies."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest

from bridge.framing import encode_frame, encode_raw
from guest_runtime.worker import READ_AHEAD, WRITEV_GROUP, Channel

CAP = 64 * 1024 * 1024


_OPEN: list[int] = []


@pytest.fixture(autouse=True)
def _close_pipes() -> Iterator[None]:
    yield
    while _OPEN:
        os.close(_OPEN.pop())


def _close(fd: int) -> None:
    """Close one end now (the other side then reads the end of the stream)."""
    _OPEN.remove(fd)
    os.close(fd)


def _pipe_channel() -> tuple[Channel, int, int]:
    """A channel reading one pipe and writing another; returns it with the feeding and draining fds."""
    host_to_worker_r, host_to_worker_w = os.pipe()
    worker_to_host_r, worker_to_host_w = os.pipe()
    _OPEN.extend((host_to_worker_r, host_to_worker_w, worker_to_host_r, worker_to_host_w))
    return Channel(host_to_worker_r, worker_to_host_w, CAP), host_to_worker_w, worker_to_host_r


def test_frames_that_arrive_in_one_read_are_all_delivered_in_order():
    """A frame and its raw frames written in one go are read in order, the later ones from the
    read-ahead buffer after the writer has already closed its end."""
    channel, feed, _ = _pipe_channel()
    os.write(feed, encode_frame({"t": "settle", "n": 1}) + encode_raw(b'"one"') + encode_raw(b"[2]"))
    _close(feed)
    assert channel.read() == {"t": "settle", "n": 1}
    assert channel.read_raw() == '"one"'
    assert channel.read_raw() == "[2]"
    assert channel.read() is None  # then the end of the stream


def test_a_body_larger_than_the_read_ahead_arrives_whole_between_small_frames():
    """A multi-megabyte raw frame between two small ones crosses intact and in order."""
    channel, feed, _ = _pipe_channel()
    big = b'"' + b"x" * (3 * READ_AHEAD + 17) + b'"'

    def writer() -> None:
        for chunk in (encode_frame({"a": 1}), encode_raw(big), encode_frame({"b": 2})):
            os.write(feed, chunk)
        _close(feed)

    thread = threading.Thread(target=writer)
    thread.start()
    assert channel.read() == {"a": 1}
    assert channel.read_raw() == big.decode()
    assert channel.read() == {"b": 2}
    thread.join()


def test_a_message_with_more_attachments_than_one_writev_takes_arrives_whole():
    """More raw frames than one writev group (and than IOV_MAX) all reach the host, in order."""
    channel, _, drain = _pipe_channel()
    attachments = [f"[{i}]".encode() for i in range(2 * WRITEV_GROUP + 3)]
    thread = threading.Thread(target=channel.write, args=({"t": "idle"}, attachments))
    thread.start()
    reader = Channel(drain, -1, CAP)
    assert reader.read() == {"t": "idle"}
    assert [reader.read_raw() for _ in attachments] == [a.decode() for a in attachments]
    thread.join()
