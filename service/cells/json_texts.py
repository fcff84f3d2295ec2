"""Guest JSON texts are checked before an envelope embeds them as they are.

Values and output stay encoded on their way back (``bridge.output`` embeds them with
``jsoncodec.fragment``: no Python objects of a 10 MiB value are ever built).  Their text comes from a
worker, which an attacker may own, so each text is checked to be one JSON value before it is embedded:
an envelope is always JSON, and a value cannot spill into the fields around it.
"""

from __future__ import annotations

import asyncio

from bridge.output import check_json

#: Texts are checked in runs of about this many bytes, the event loop's other work between runs.
RUN_BYTES = 256 * 1024


async def check_texts(texts: list[str]) -> None:
    """Raise ``bridge.errors.InvalidSource`` unless every text is one JSON value."""
    run = 0
    for text in texts:
        check_json(text)
        run += len(text)
        if run >= RUN_BYTES:
            run = 0
            await asyncio.sleep(0)
