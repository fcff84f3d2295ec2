"""The helper process: does the jobs of its table (``jobs.JOBS``) for the service, one at a time.

Started by the service's helper pool as ``python -I -m service.helpers.process '<json options>'``.
It speaks ``protocol``'s frames over its stdin and a private copy of its stdout (fd 1 itself then
points at its stderr, so a stray print can never corrupt a frame).  It imports its jobs' code and
runs each once, confines itself (``guest_runtime.confinement``), and only then says ``ready`` and
reads its first job: every job's bytes are hostile.  It exits when its stdin closes.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Callable

from bridge import jsoncodec
from bridge.framing import DEFAULT_FRAME_CAP, HEADER_SIZE, decode_body, encode_frame, encode_raw, frame_length
from guest_runtime.confinement import confine
from guest_runtime.development_payload import development_payload
from guest_runtime.errors import ConfinementError

from .jobs import JOBS, warm_up
from .protocol import TEST_PAYLOAD_VARIABLE, HelperOptions, JobFrame, ready_frame


class Channel:
    """Blocking frame I/O with the service over two file descriptors."""

    def __init__(self, fd_in: int, fd_out: int, cap: int) -> None:
        self.fd_in = fd_in
        self.fd_out = fd_out
        self.cap = cap

    def read_job(self) -> tuple[JobFrame, list[bytes]] | None:
        """The next job frame and its payload frames; None once the service closed the pipe."""
        body = self.read_raw()
        if body is None:
            return None
        job: JobFrame = decode_body(body)
        payload = []
        for _ in range(job["frames"]):
            data = self.read_raw()
            if data is None:
                return None
            payload.append(data)
        return job, payload

    def read_raw(self) -> bytes | None:
        header = self._read_exact(HEADER_SIZE)
        return None if header is None else self._read_exact(frame_length(header, self.cap))

    def write(self, message: object, frames: list[bytes] | tuple[bytes, ...] = ()) -> None:
        """One frame of ``message``, then ``frames`` as raw frames."""
        data = b"".join([encode_frame(message), *(encode_raw(f) for f in frames)])
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd_out, view) :]

    def _read_exact(self, n: int) -> bytes | None:
        chunks = []
        while n:
            chunk = os.read(self.fd_in, n)
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)


def serve(channel: Channel) -> int:
    """Answer jobs until the service closes the pipe."""
    while True:
        message = channel.read_job()
        if message is None:
            return 0
        job, payload = message
        fields, frames = JOBS[job["name"]](job["args"], payload)
        channel.write({"t": "answer", "id": job["id"], **fields, "frames": len(frames)}, frames)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    options: HelperOptions = jsoncodec.loads(args[0])
    fd_out = os.dup(1)
    os.dup2(2, 1)
    # The service is trusted: the cap only bounds a frame of a broken one (the largest body is under it).
    channel = Channel(0, fd_out, DEFAULT_FRAME_CAP)
    _apply_rlimits(options)
    warm_up()
    payload = _test_payload()
    # Everything the job loop needs is imported and built: from here on it opens nothing.
    try:
        report = confine(options["sandbox"], keep_fds=(0, 1, 2, fd_out))
    except ConfinementError as exc:
        print(f"codemode helper refuses to start: {exc}", file=sys.stderr, flush=True)
        return 2
    channel.write(ready_frame(os.getpid(), report))
    if payload is not None:
        return payload(channel)
    return serve(channel)


def _apply_rlimits(options: HelperOptions) -> None:
    address_space = options["rlimit_as_bytes"]
    if address_space > 0:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # a helper has no business writing files


def _test_payload() -> Callable[[Channel], int] | None:
    """The tests' stand-in for an attacker with native code in a confined helper, if asked for
    (``HelperPool.test_payload``; refused outside a development checkout)."""
    loaded = development_payload(TEST_PAYLOAD_VARIABLE, "compromised_helper")
    if loaded is None:
        return None
    module, plan = loaded
    return lambda channel: int(module.run(channel, plan))


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except (BrokenPipeError, KeyboardInterrupt):
        raise SystemExit(0) from None  # the service closed our pipes: nothing left to report
