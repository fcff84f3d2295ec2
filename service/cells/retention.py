"""An oversized final value kept as a saved result, around the synchronous envelope build.

The output projection asks for a reference while it builds the envelope, synchronously, but a
shared results store answers asynchronously.  So the value is saved before the build whenever the
projection may ask for it, the build takes that answer, and a reference the envelope did not show
(the value fitted after all, the marker did not, or the envelope failed to encode) is deleted after.
"""

from __future__ import annotations

from typing import Protocol

from bridge.errors import InvalidSource
from bridge.output import FinalValue, NotRetained, OutputState, RetainResult

from .dispatch import CellContext

__all__ = ["Retainer", "Retention"]


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
