"""The end of a cell: its final envelope, built from the outcome, encoded, then committed.

A cell ends ``Completed`` (the guest returned a value) or ``Failed`` (a guest error, a limit, a
cancel, the loss of its process).  The envelope is built in this order:

1. the output is projected into what the envelope may carry (``bridge.output``): a completed
   value over ``max_output_bytes`` fails the cell ``output_limit_exceeded``, or, for interactive
   cells, an oversized object or array is saved as a reference (``retention.py``);
2. text from the network is marked untrusted, and the envelope is encoded as JSON: a value that
   cannot be encoded (lone surrogates, extreme nesting) fails the cell ``internal_error`` naming why;
3. only then do the end-of-cell steps run (store commits, ``finalizers``), told whether the
   envelope says ``completed``: a result that cannot be sent commits nothing.  Their warnings are
   added to the envelope when they fit its encoding.

An oversized final value of an interactive cell is kept as a saved result around the synchronous
build (``Retention``): the projection asks for a reference while it builds the envelope, but a shared
results store answers asynchronously, so the value is saved before the build whenever the projection
may ask for it, the build takes that answer, and a reference the envelope did not show (the value
fitted after all, the marker did not, or the envelope failed to encode) is deleted after.

Then the cell's ``ended`` future is done, and its owner (``CellRegistry``, subscribed to that
future of every cell) records the end: the envelope goes on the cell's event stream, its parked slot is
let go (a background cell's when its result is collected), and a bounded summary is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from bridge import jsoncodec
from bridge.errors import InvalidSource, OutputLimitExceeded
from bridge.messages import Phase
from bridge.output import FinalError, FinalSource, FinalValue, NotRetained, OutputState, RetainResult

from . import envelopes
from .dispatch import CellContext, Finalizer
from .envelopes import Envelope, LegFields
from .json_texts import JsonTexts

UNSENDABLE_MESSAGE = (
    "the cell's result could not be encoded as JSON ({detail}), so its store writes were not "
    "committed; return and emit plain JSON data (valid Unicode text, moderate nesting)"
)


@dataclass(frozen=True)
class Completed:
    value_source: dict[str, object]  # the worker's report of the returned value (``bridge.output``)


@dataclass(frozen=True)
class Failed:
    message: str
    phase: Phase
    code: str


Outcome = Completed | Failed


class FinalEnvelope:
    """Builds one cell's final envelope from its outcome and seals it (encoded, committed)."""

    def __init__(
        self,
        context: CellContext,
        output: OutputState,
        fields: Callable[[], LegFields],
        retention: Retention | None,
        json_texts: JsonTexts,
    ) -> None:
        self.context = context
        self.output = output
        self._fields = fields  # the fields every envelope carries (replay safety, telemetry), as of now
        self.retention = retention
        self.json_texts = json_texts

    async def seal(self, outcome: Outcome, finalizers: list[Finalizer]) -> Envelope:
        try:
            await self.json_texts.check_output(self.output, _final(outcome), self.context.spec)
        except InvalidSource as exc:  # nothing unchecked is embedded: a failure keeps its own words
            envelope, encoded, shown_reference = self._without_output(outcome, exc)
        else:
            if self.retention is not None:
                await self.retention.prepare(self.output)  # the shared results store answers asynchronously
            envelope, encoded, shown_reference = self._encoded(outcome)
        if self.retention is not None:
            await self.retention.settle(shown_reference)  # a saved value nobody was shown the reference of
        warnings = await _run_finalizers(finalizers, self.context, envelope["status"] == "completed")
        if warnings:
            envelopes.add_warnings(envelope, warnings)
            try:
                encoded = jsoncodec.dumps(envelope)
            except jsoncodec.JSONEncodeError:
                envelopes.drop_warnings(envelope)  # the result matters more than a note about it
        return envelopes.sealed(envelope, encoded)

    def _encoded(self, outcome: Outcome) -> tuple[Envelope, bytes, str | None]:
        """The final envelope, its encoding and the saved-result id it shows."""
        try:
            envelope, reference_id = self._built(outcome)
            return envelope, jsoncodec.dumps(self._marked(envelope)), reference_id
        except Exception as exc:  # noqa: BLE001 - any failure to build the result fails the cell, not the service
            return self._unsendable(exc)

    def _without_output(self, outcome: Outcome, exc: Exception) -> tuple[Envelope, bytes, None]:
        """The envelope when output or the value is not JSON: a failure as it is (no output), a result as
        unsendable."""
        if isinstance(outcome, Completed):
            return self._unsendable(exc)
        envelope = self._failure(outcome.message, outcome.phase, outcome.code, [])
        return envelope, jsoncodec.dumps(self._marked(envelope)), None

    def _unsendable(self, exc: Exception) -> tuple[Envelope, bytes, None]:
        detail = f"{type(exc).__name__}: {exc}"[:300].encode("utf-8", "replace").decode("utf-8")
        envelope = self._failure(UNSENDABLE_MESSAGE.format(detail=detail), "bridge", "internal_error", [])
        return envelope, jsoncodec.dumps(self._marked(envelope)), None

    def _built(self, outcome: Outcome) -> tuple[Envelope, str | None]:
        if isinstance(outcome, Completed):
            retain = self.retention.retain if self.retention is not None else None
            try:
                projection = self.output.project(FinalValue(outcome.value_source), retain)
            except OutputLimitExceeded as exc:
                return self._failure(str(exc), "host", "output_limit_exceeded", []), None
            envelope = envelopes.completed(
                self.context.id, value=projection.value, output=projection.output, **self._fields()
            )
            return envelope, projection.reference_id
        code = outcome.code
        try:
            failed = self.output.project(FinalError(outcome.message))
            output, error = failed.output, failed.error or outcome.message
        except OutputLimitExceeded:
            output, error, code = [], outcome.message[:200] + " [error truncated]", "output_limit_exceeded"
        return self._failure(error, outcome.phase, code, output), None

    def _failure(self, error: str, phase: Phase, code: str, output: list[object]) -> Envelope:
        return envelopes.failed(self.context.id, error=error, code=code, phase=phase, output=output, **self._fields())

    def _marked(self, envelope: Envelope) -> Envelope:
        return marked(envelope, self.context)


def _final(outcome: Outcome) -> FinalSource:
    return FinalValue(outcome.value_source) if isinstance(outcome, Completed) else FinalError(outcome.message)


def marked(envelope: Envelope, context: CellContext) -> Envelope:
    """``envelope``, marked untrusted when the cell has seen network content."""
    if context.network_content:
        envelopes.mark_untrusted(envelope)
    return envelope


async def _run_finalizers(finalizers: list[Finalizer], context: CellContext, completed: bool) -> list[str]:
    warnings: list[str] = []
    for finalizer in finalizers:
        try:
            warnings.extend(await finalizer(context, completed))
        except Exception as exc:  # noqa: BLE001 - an end hook failing must not lose the result
            warnings.append(f"end-of-cell step failed: {type(exc).__name__}: {exc}")
    return warnings


class Retainer(Protocol):
    """Keeps a final value too large for the envelope as a saved result, and frees one not shown."""

    async def keep(self, cell: CellContext, json_text: str) -> RetainResult: ...

    async def release(self, cell: CellContext, ref_id: str) -> None: ...


class Retention:
    """One ending cell's kept value: saved by ``prepare``, handed to the build, settled after it."""

    def __init__(self, retainer: Retainer, cell: CellContext, value_source: dict[str, object]) -> None:
        self._retainer = retainer
        self._cell = cell
        self._value_source = value_source
        self._kept: RetainResult | None = None
        self._failure: Exception | None = None

    async def prepare(self, output: OutputState) -> None:
        """Save the value now if the projection may want its reference."""
        try:
            text = output.retention_candidate(FinalValue(self._value_source))
        except InvalidSource:
            return  # the build reports the malformed source
        if text is not None:
            try:
                self._kept = await self._retainer.keep(self._cell, text)
            except Exception as exc:  # noqa: BLE001 - raised inside the build, which fails the cell as before
                self._failure = exc

    def retain(self, _text: str) -> RetainResult:
        """The projection's retain callback: the answer ``prepare`` got for this same text."""
        if self._failure is not None:
            raise self._failure
        return self._kept if self._kept is not None else NotRetained("the value was not saved")

    async def settle(self, shown_id: str | None) -> None:
        """Delete the kept result unless the envelope shows its reference."""
        kept_id = self._kept.get("id") if isinstance(self._kept, dict) else None
        if isinstance(kept_id, str) and kept_id != shown_id:
            await self._retainer.release(self._cell, kept_id)
