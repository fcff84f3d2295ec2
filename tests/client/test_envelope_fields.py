"""The Python client's ``Envelope`` reads every field the service's OpenAPI document gives an envelope."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from codemode_client.models import Envelope

from service.app import create_app
from service.settings import Settings

#: Fields of ``Envelope`` that are the client's own, not the wire's.
CLIENT_ONLY = {"raw"}


def test_client_envelope_fields_equal_the_openapi_cell_envelope(tmp_path: Path) -> None:
    """The typed fields of ``codemode_client.Envelope`` are exactly the properties of the OpenAPI
    ``CellEnvelope`` of the served app (a field added to the wire must be added to the client)."""
    document = create_app(Settings(data_dir=str(tmp_path), workers=1)).openapi()
    wire = set(document["components"]["schemas"]["CellEnvelope"]["properties"])
    client = {f.name for f in dataclasses.fields(Envelope)} - CLIENT_ONLY
    assert wire and client == wire


def test_untrusted_content_is_read_only_when_true() -> None:
    """``untrusted_content`` is true only when the service says true; absent or anything else is false."""
    base = {"status": "completed", "cell_id": "c1"}
    assert Envelope.parse({**base, "untrusted_content": True}).untrusted_content is True
    assert Envelope.parse(base).untrusted_content is False
    assert Envelope.parse({**base, "untrusted_content": "yes"}).untrusted_content is False
