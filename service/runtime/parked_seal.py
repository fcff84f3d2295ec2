"""The seal on a parked Python cell's record: what lets another replica (or this one, restarted) trust it.

A parked Python cell is written to the shared store as one record: its claims (cell, tenant, principal,
engine build, expiry), the service's own state of it (its spec's fields, the calls it waits on, its
counters) and its engine's dump, which a worker produced.  Monty does not authenticate what it loads
("successful loading does not establish validity"), and the worker that dumped the bytes may be owned by
an attacker, so before anything of a record is used:

* it is bounded (``max_bytes``) and must have the layout below, read on lengths alone;
* its MAC (HMAC-SHA256 under a secret the replicas share, kept in the store) is checked in constant time
  over every byte before the tag, before anything of it is decoded (``SnapshotTampered``);
* then its claims are checked against the cell asked for: its id and tenant (``SnapshotForeign``: a record
  copied to another cell's name), the engine build of this service (``SnapshotVersionMismatch``), its
  expiry (an expired cell is not found).

The engine's dump is never decoded here: it is handed back to a worker of the cell's own principal, so
the worst that a forged dump could do is what that principal's own cell could do.

Layout: ``MAGIC``, then the claims' and the state's JSON, each after its length (4 bytes, big-endian), then
the dump, then the 32-byte tag.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from bridge import jsoncodec
from service.errors import CellNotFound, SnapshotForeign, SnapshotTampered, SnapshotVersionMismatch

#: The name of the sealing secret in the store.
SECRET_NAME = "parked-cells"
MAGIC = b"codemode-parked/1\n"
_LABEL = b"codemode/parked-cell/v1/mac"
_TAG_BYTES = 32
_LENGTH_BYTES = 4
#: The claims and the state are the service's own JSON: a record whose parts claim more is refused.
MAX_PART_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class SealClaims:
    """What a record is bound to."""

    cell_id: str
    tenant: str
    principal: str | None  # the worker principal its cell ran under (None: a process of its own)
    engine: str  # the engine build whose dump it holds (``guest_runtime.monty.dump_format``)
    expires_at_ms: int  # wall clock: the cell would have expired idle by then

    def fields(self) -> dict[str, object]:
        return {
            "cell": self.cell_id,
            "tenant": self.tenant,
            "principal": self.principal,
            "engine": self.engine,
            "expires_at_ms": self.expires_at_ms,
        }


@dataclass(frozen=True)
class OpenedRecord:
    claims: SealClaims
    state: dict[str, object]  # the service's state of the cell (``parked_record``)
    dump: bytes  # the engine's dump, as the worker wrote it


def seal(secret: bytes, claims: SealClaims, state: dict[str, object], dump: bytes) -> bytes:
    """The record of a parked cell, sealed under ``secret``."""
    head = jsoncodec.dumps(claims.fields())
    body = jsoncodec.dumps(state)
    unsealed = b"".join((MAGIC, _length(head), head, _length(body), body, dump))
    return unsealed + _tag(secret, unsealed)


def tag_of(record: bytes) -> str:
    """A record's tag, in hex: what names one version of it (a claim takes the record it read, no other)."""
    return record[-_TAG_BYTES:].hex()


def open_record(
    secret: bytes, record: bytes, *, cell_id: str, tenant: str, engine: str, now_ms: int, max_bytes: int
) -> OpenedRecord:
    """The record's parts once its seal and claims hold for cell ``cell_id`` of ``tenant`` (see the module)."""
    if len(record) > max_bytes or len(record) < len(MAGIC) + 2 * _LENGTH_BYTES + _TAG_BYTES:
        raise _tampered(cell_id, f"its size ({len(record)} bytes) is out of range")
    unsealed, tag = record[:-_TAG_BYTES], record[-_TAG_BYTES:]
    if not hmac.compare_digest(tag, _tag(secret, unsealed)):
        raise _tampered(cell_id, "its seal does not match its bytes")
    # Sealed by a replica: the lengths and JSON below are its own, read with checks all the same.
    if not unsealed.startswith(MAGIC):
        raise _tampered(cell_id, "it is not a parked cell's record")
    pos = len(MAGIC)
    head, pos = _part(unsealed, pos, cell_id)
    body, pos = _part(unsealed, pos, cell_id)
    claims = _claims(head, cell_id)
    if claims.cell_id != cell_id or claims.tenant != tenant:
        raise SnapshotForeign(
            f"the stored state under cell {cell_id} was sealed for another cell or tenant, so it was refused; "
            "start a new cell"
        )
    if claims.engine != engine:
        raise SnapshotVersionMismatch(
            f"cell {cell_id} was parked by a replica running {claims.engine!r}, and this one runs {engine!r}: "
            "a paused program is taken up only by the engine build that paused it; wait through a replica "
            "of the same version, or start the cell again"
        )
    if claims.expires_at_ms <= now_ms:
        raise CellNotFound(f"cell {cell_id} expired while its replica was gone; start a new cell")
    state = jsoncodec.loads(body)
    if not isinstance(state, dict):
        raise _tampered(cell_id, "its state is not an object")
    return OpenedRecord(claims, state, unsealed[pos:])


def _tag(secret: bytes, unsealed: bytes) -> bytes:
    mac = hmac.new(secret, _LABEL, hashlib.sha256)
    mac.update(unsealed)
    return mac.digest()


def _length(part: bytes) -> bytes:
    return len(part).to_bytes(_LENGTH_BYTES, "big")


def _part(data: bytes, pos: int, cell_id: str) -> tuple[bytes, int]:
    size = int.from_bytes(data[pos : pos + _LENGTH_BYTES], "big")
    start = pos + _LENGTH_BYTES
    if size > MAX_PART_BYTES or start + size > len(data):
        raise _tampered(cell_id, "a part's length is out of range")
    return data[start : start + size], start + size


def _claims(head: bytes, cell_id: str) -> SealClaims:
    try:
        fields = jsoncodec.loads(head)
        principal = fields["principal"]
        claims = SealClaims(
            str(fields["cell"]),
            str(fields["tenant"]),
            None if principal is None else str(principal),
            str(fields["engine"]),
            int(fields["expires_at_ms"]),
        )
    except (jsoncodec.JSONDecodeError, KeyError, TypeError, ValueError):
        raise _tampered(cell_id, "its claims are out of shape") from None
    return claims


def _tampered(cell_id: str, why: str) -> SnapshotTampered:
    return SnapshotTampered(
        f"the stored state of cell {cell_id} was refused: {why} (it was altered, or sealed under a secret this "
        "service no longer has); the cell cannot be resumed, start it again"
    )
