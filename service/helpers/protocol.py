"""The service <-> helper protocol: the frames each side sends, and the caps the service reads them under.

Frames are ``bridge.framing`` frames (a 4-byte length, then compact JSON), as between the service
and its workers.  Each exchange is one job, strict ping-pong:

    helper  -> service  ready   (once, after start-up and confinement)
    service -> helper   job     (a job *name* from the helper's fixed table, its arguments, and how
                                 many raw frames of payload follow: the data to work on)
    helper  -> service  answer  (the job's id, its outcome and fields, and how many raw frames follow)

A job never carries code: the helper runs only what its table (``jobs.JOBS``) names.  An answer is
data the service checks field by field (``job.Answer``) after counting its JSON values on the bytes;
nothing in it can become code, or an object of a type the service did not ask for.
"""

# No ``from __future__ import annotations``: TypedDict must see ``NotRequired`` at class creation.
from typing import Literal, NotRequired, TypedDict

from bridge.messages import SandboxOptions, SandboxReport

#: The helper's entry point (``python -I -m MODULE '<options>'``).
MODULE = "service.helpers.process"
#: The helper's start-up environment may name this; only the tests' ``HelperPool.test_payload`` sets it.
#: A helper refuses to start with it outside a development checkout (``process._test_payload``).
TEST_PAYLOAD_VARIABLE = "CODEMODE_HELPER_TEST_PAYLOAD"

JobName = Literal["decode", "count", "schemas", "json_texts", "output"]

#: Characters of one schema problem a helper reports; it cuts longer ones (the service refuses them).
PROBLEM_CHARS = 1000
#: Characters of the JSON decoder's own words on a body that is not JSON.
DETAIL_CHARS = 300
#: Bytes and JSON values of a ``ready`` frame, read before anything else of the helper.
READY_CAP = 64 * 1024
READY_VALUES = 200


class HelperOptions(TypedDict):
    """The helper's start-up argument (one JSON text on its command line), not a frame."""

    sandbox: SandboxOptions
    rlimit_as_bytes: int  # RLIMIT_AS; 0: none


class ReadyFrame(TypedDict):
    t: Literal["ready"]
    pid: int
    sandbox: SandboxReport


class JobFrame(TypedDict):
    t: Literal["job"]
    id: int
    name: JobName
    args: dict[str, object]  # the job's own (``jobs``): small, plain JSON
    frames: int  # raw frames of payload that follow


class AnswerFrame(TypedDict):
    t: Literal["answer"]
    id: int
    outcome: str
    frames: int  # raw frames that follow
    # Each job's own fields beside these (``jobs``), checked by the service per outcome (``job.Answer``).
    count: NotRequired[int]
    detail: NotRequired[str]
    problems: NotRequired[list[str | None]]
    index: NotRequired[int]
    details: NotRequired[list[str]]
    problem: NotRequired[str]


def ready_frame(pid: int, sandbox: SandboxReport) -> ReadyFrame:
    return {"t": "ready", "pid": pid, "sandbox": sandbox}


def job_frame(job_id: int, name: JobName, args: dict[str, object], frames: int) -> JobFrame:
    return {"t": "job", "id": job_id, "name": name, "args": args, "frames": frames}
