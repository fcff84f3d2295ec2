"""A helper job as the service sees it: what it sends, the caps its answer is read under, how it is checked.

A helper that an attacker took over (a memory bug in the JSON decoder, say) writes whatever it likes
on its pipe.  So the service reads an answer in steps that each cost a small, bounded amount before
the next: every frame's announced length is checked against the job's caps before its bytes are
read (``AnswerCaps``), the control frame's JSON values are counted on its bytes before it is decoded,
and each field is checked for its exact type (``Answer.outcome``).  The job itself then checks its raw
frames the same way (``finish``).  A check that fails raises ``HelperFailed`` naming what the helper
did wrong (``refuse``): the helper is stopped, and the request fails with a 503 the caller may retry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Generic, NoReturn, TypeVar

from service.errors import HelperFailed

from .protocol import JobName

Result = TypeVar("Result")
#: A field's check: whether a decoded value is of the kind the protocol says.
Kind = Callable[[object], bool]

#: The fields every answer carries, beside the job's own.
COMMON_FIELDS = ("t", "id", "outcome", "frames")


def is_int(value: object) -> bool:
    return type(value) is int  # not a bool


def is_str(value: object) -> bool:
    return type(value) is str


def refuse(reason: str) -> NoReturn:
    """The answer is out of shape: ``reason`` says how (completing "the helper process that ... ")."""
    raise HelperFailed(reason)


@dataclass(frozen=True)
class AnswerCaps:
    """What one job's answer may take: its control frame, and its raw frames together."""

    control_bytes: int
    control_values: int
    frames: int  # raw frames at most
    frame_bytes: int  # bytes of all raw frames together, their headers included


class Answer:
    """An answer read under its job's caps: the control frame's fields, decoded, and the raw frames."""

    def __init__(self, fields: dict[str, object], frames: list[bytes]) -> None:
        self.fields = fields
        self.frames = frames

    def outcome(self, shapes: Mapping[str, Mapping[str, Kind]], frames: Mapping[str, range]) -> str:
        """The answer's outcome, after checking that its fields are exactly the common ones and the
        outcome's own (``shapes[outcome]``: name -> kind), and its raw frames as many as ``frames[outcome]``."""
        outcome = self.fields["outcome"]
        if not isinstance(outcome, str) or outcome not in shapes:
            refuse(f"answered with an outcome this job does not have ({_shown(outcome)})")
        own = shapes[outcome]
        extra = set(self.fields) - set(COMMON_FIELDS) - set(own)
        if extra:
            refuse(f"answered {outcome!r} with fields it does not have ({', '.join(sorted(map(_shown, extra)))})")
        for name, kind in own.items():
            if name not in self.fields or not kind(self.fields[name]):
                refuse(f"answered {outcome!r} without a well-typed {name!r}")
        if len(self.frames) not in frames[outcome]:
            refuse(f"answered {outcome!r} with {len(self.frames)} raw frames")
        return outcome

    def field(self, name: str) -> object:
        """A field ``outcome`` checked already (of the kind its shape named)."""
        return self.fields[name]


class HelperJob(Generic[Result]):
    """One kind of job: its name in the helper's table, and the service's side of it."""

    name: ClassVar[JobName]
    #: What the helper does, completing "the helper process that ..." in error messages.
    purpose: ClassVar[str]

    def request(self) -> tuple[dict[str, object], list[bytes]]:
        """The job's arguments (small, plain JSON) and its payload (raw frames: the data to work on)."""
        raise NotImplementedError

    def caps(self) -> AnswerCaps:
        raise NotImplementedError

    def finish(self, answer: Answer) -> Result:
        """The job's result from a checked answer; ``refuse`` when it is out of shape. A refusal the
        caller must hear (a body that is not JSON) is raised as its own service error: the helper is sound."""
        raise NotImplementedError


def _shown(value: object) -> str:
    """A short, printable stand-in for a value the helper wrote (it goes into a log line and an error)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
