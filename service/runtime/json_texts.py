"""Guest JSON texts are checked before an envelope embeds them as they are.

Values and output stay encoded on their way back (``bridge.output`` embeds them with
``jsoncodec.fragment``: no Python objects of a 10 MiB value are built on the event loop).  Their text
comes from a worker, which an attacker may own, so each text is checked to be one JSON value before it
is embedded: an envelope is always JSON, and a value cannot spill into the fields around it.

Checking is parsing.  A few kilobytes parse here in well under a millisecond; anything larger is
checked in a helper process of the cell's own principal (``service.helpers``), so the event loop never
builds the objects of a large value, not even to throw them away.  The helper's word is trusted for the
cell's own data: it serves that principal alone, as the worker that wrote the text does.
"""

from __future__ import annotations

from typing import ClassVar, cast

from bridge.errors import InvalidSource
from bridge.output import FinalSource, OutputState, check_json
from service.helpers.job import Answer, AnswerCaps, HelperJob, is_int, is_str
from service.helpers.pool import HelperPool

from .spec import CellSpec

#: Texts up to this many bytes in all are checked on the event loop (at most a few thousand values).
INLINE_BYTES = 64 * 1024


class JsonTexts:
    """Checks a cell's guest texts: small ones here, large ones in the cell principal's helper."""

    def __init__(self, helpers: HelperPool | None) -> None:
        self.helpers = helpers  # None: everything is checked here (a service without helpers, tests)

    async def check_output(self, output: OutputState, final: FinalSource | None, spec: CellSpec) -> None:
        """Check what ``output`` would embed as it is when projected with ``final`` (``InvalidSource``: a
        text is not JSON; it stays unchecked, so no later projection embeds it either)."""
        await self.check(output.unchecked(final), spec.tenant, spec.principal)
        output.checked(final)

    async def check(self, texts: list[str], tenant: str, principal: str | None) -> None:
        """Raise ``InvalidSource`` unless every text is one JSON value."""
        if not texts:
            return
        if self.helpers is None or sum(map(len, texts)) <= INLINE_BYTES:
            for text in texts:
                check_json(text)
            return
        await self.helpers.run_for(JsonTextsJob(texts), tenant, principal)


#: The checker of a cell nobody gave one (tests that build cells by hand): everything on the loop.
INLINE = JsonTexts(None)


class JsonTextsJob(HelperJob[None]):
    """Check guest texts in a helper; its answer names the first text that is not JSON, if any."""

    name = "json_texts"
    purpose = "checks that cells' values and output are JSON"
    SHAPES: ClassVar = {"json": {}, "not_json": {"index": is_int, "detail": is_str}}

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def request(self) -> tuple[dict[str, object], list[bytes]]:
        return {}, [text.encode("utf-8") for text in self.texts]

    def caps(self) -> AnswerCaps:
        return AnswerCaps(control_bytes=4096, control_values=16, frames=0, frame_bytes=0)

    def finish(self, answer: Answer) -> None:
        if answer.outcome(self.SHAPES, {"json": range(1), "not_json": range(1)}) == "not_json":
            index = cast("int", answer.field("index"))
            raise InvalidSource(f"text {index} of {len(self.texts)} is not JSON: {answer.field('detail')}")
