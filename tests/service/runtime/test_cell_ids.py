"""Cell ids: the registry's random ids are version-4 UUID text, as ``str(uuid.uuid4())`` writes it."""

from __future__ import annotations

import uuid

from service.runtime.registry import random_uuid


def test_random_ids_are_uuid4_text() -> None:
    """Every id parses as an RFC 4122 version-4 UUID and is written exactly as ``str(UUID)`` writes it."""
    ids = [random_uuid() for _ in range(2000)]
    for text in ids:
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == text
    assert len(set(ids)) == len(ids)
