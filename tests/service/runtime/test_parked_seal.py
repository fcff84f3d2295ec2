"""The seal on a parked cell's record (service/runtime/parked_seal.py): every byte is bound, and the claims
name the cell, tenant and engine build it may be taken up as."""

from __future__ import annotations

import pytest

from service.errors import CellNotFound, SnapshotForeign, SnapshotTampered, SnapshotVersionMismatch
from service.runtime.parked_seal import SealClaims, open_record, seal, tag_of

SECRET = b"s" * 32
ENGINE = "pydantic-monty 0.0.18; codemode-python-cell/1"
CLAIMS = SealClaims("cell_a", "acme", "acme\x00key\x00abc", ENGINE, expires_at_ms=2_000)
STATE = {"spec": {"code": "1"}, "pending": []}
DUMP = b"\x00monty bytes\xff" * 10


def opened(record: bytes, **over: object) -> object:
    args: dict[str, object] = {
        "cell_id": "cell_a",
        "tenant": "acme",
        "engine": ENGINE,
        "now_ms": 1_000,
        "max_bytes": 1 << 20,
    }
    args.update(over)
    return open_record(SECRET, record, **args)  # type: ignore[arg-type]


def test_a_sealed_record_opens_to_what_was_sealed():
    record = seal(SECRET, CLAIMS, STATE, DUMP)
    got = opened(record)
    assert got.claims == CLAIMS and got.state == STATE and got.dump == DUMP  # type: ignore[attr-defined]
    assert tag_of(record) == record[-32:].hex()


@pytest.mark.parametrize("where", [0, 20, 60, -40, -1])
def test_any_changed_byte_is_refused_as_tampered(where):
    """One flipped bit anywhere (magic, claims, state, dump, tag) fails the MAC before anything is decoded."""
    record = bytearray(seal(SECRET, CLAIMS, STATE, DUMP))
    record[where] ^= 1
    with pytest.raises(SnapshotTampered):
        opened(bytes(record))


def test_another_secret_a_short_or_an_oversized_record_is_tampered():
    record = seal(SECRET, CLAIMS, STATE, DUMP)
    with pytest.raises(SnapshotTampered):
        open_record(b"t" * 32, record, cell_id="cell_a", tenant="acme", engine=ENGINE, now_ms=0, max_bytes=1 << 20)
    with pytest.raises(SnapshotTampered):
        opened(record[:10])
    with pytest.raises(SnapshotTampered, match="size"):
        opened(record, max_bytes=len(record) - 1)


def test_a_record_of_another_cell_or_tenant_is_foreign():
    """Genuinely sealed, for someone else: a record copied under another cell's name is refused."""
    record = seal(SECRET, CLAIMS, STATE, DUMP)
    with pytest.raises(SnapshotForeign):
        opened(record, cell_id="cell_b")
    with pytest.raises(SnapshotForeign):
        opened(record, tenant="other")


def test_another_engine_build_and_an_expired_record_are_refused():
    record = seal(SECRET, CLAIMS, STATE, DUMP)
    with pytest.raises(SnapshotVersionMismatch, match="0.0.18"):
        opened(record, engine="pydantic-monty 1.4.0; codemode-python-cell/1")
    with pytest.raises(CellNotFound, match="expired"):
        opened(record, now_ms=2_000)
