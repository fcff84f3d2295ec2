"""The sealed ``requestState`` of an approval round (MCP 2026-07-28, multi round-trip requests).

When a cell parks on calls that need a person's approval, the facade answers ``input_required``: one form
per pending call, and a ``requestState`` that the client sends back, unchanged, with the person's answers.
On its way back that state is caller-supplied text, so before it means anything:

* it is bounded (``MAX_STATE_CHARS``) and must have the token's exact shape (printable ASCII);
* its MAC (HMAC-SHA256 under a secret every replica shares) is checked in constant time over the text as it
  arrived, before any of it is decoded;
* only then is it decoded and are its claims checked: the tenant and API key that may send it back, the
  request it answers (a digest of the tool's name and arguments), its expiry;
* it is good once: the facade claims its nonce in the shared ledger before it acts on it.

What it says is not secret (the cell id, the ids of the calls the client was shown, and the output the cell
wrote before it parked, which the client gets with the round's final answer); what it binds is.  The API
key is bound by a keyed digest, never written into the token.

The secret lives where the cells' routing lives: in the shared store of a cluster (made by the first replica
that needs it, read by the others), or in this process for a single one (its cells die with it anyway).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from bridge import jsoncodec
from service.errors import RequestStateRefused

#: How long a person has to answer one round (then the cell is still parked: ``wait`` asks again).
STATE_TTL_SECONDS = 600
#: Bytes of output (its compact JSON) a state carries from the leg that parked to the answer after the round.
CARRIED_OUTPUT_BYTES = 64 * 1024
#: The longest requestState accepted; anything longer is refused before it is looked at.
MAX_STATE_CHARS = 128 * 1024
#: The name of the shared secret in the store.
SECRET_NAME = "mcp-request-state"

_PREFIX = "cm1."
_SHAPE = re.compile(r"cm1\.[A-Za-z0-9_-]{1,131000}\.[A-Za-z0-9_-]{43}")
_MAC_LABEL = b"codemode/mcp/request-state/v1/mac"
_KEY_LABEL = b"codemode/mcp/request-state/v1/api-key"

_ASK_AGAIN = "call `wait` with cell_id {cell} to be asked again"
_TAMPERED = (
    "requestState refused: it was altered, or not minted by this service (or it was minted under a secret "
    "that has since changed); send it back exactly as the input_required answer gave it, or call `wait` with "
    "the cell's id to be asked again"
)


@runtime_checkable
class SharedLedger(Protocol):
    """Where the replicas of a cluster share the sealing secret and the record of used states (Redis)."""

    async def shared_secret(self, name: str) -> bytes: ...

    async def first_use(self, name: str, expires_at_ms: int) -> bool: ...


class LocalLedger:
    """The ledger of a single process: a secret made at start, and the used states until they expire.

    Only states this process minted can be used, each at most once, so the record holds at most the
    states answered within one ``STATE_TTL_SECONDS``.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._secret = secrets.token_bytes(32)
        self._used: OrderedDict[str, int] = OrderedDict()  # nonce -> expiry (ms), in the order used
        self._clock = clock

    async def shared_secret(self, name: str) -> bytes:
        return self._secret

    async def first_use(self, name: str, expires_at_ms: int) -> bool:
        now_ms = int(self._clock() * 1000)
        while self._used and next(iter(self._used.values())) <= now_ms:
            self._used.popitem(last=False)
        if name in self._used:
            return False
        self._used[name] = expires_at_ms
        return True


@dataclass(frozen=True)
class RoundClaims:
    """What one sealed state says: who may send it back, for which request, about which parked calls."""

    tenant: str
    key_tag: str
    cell_id: str
    pending: tuple[str, ...]  # the ids of the calls the forms asked about
    request: str  # digest of the tool call it answers
    expires_at_ms: int
    nonce: str
    output: list[object]  # output entries the round's answer shows first (the model has not seen them)


def request_digest(tool: str, arguments: object) -> str:
    """A digest of one tool call (its name and arguments, keys sorted): the request a state answers."""
    data = jsoncodec.dumps([tool, arguments], sort_keys=True)
    return _b64(hashlib.sha256(data).digest()[:18])


class StateSealer:
    """Seals and opens the states of approval rounds under one secret (see the module's docstring)."""

    def __init__(
        self, secret: bytes, clock: Callable[[], float] = time.time, ttl_seconds: float = STATE_TTL_SECONDS
    ) -> None:
        self._mac_key = hmac.digest(secret, _MAC_LABEL, "sha256")
        self._tag_key = hmac.digest(secret, _KEY_LABEL, "sha256")
        self._clock = clock
        self._ttl_ms = int(ttl_seconds * 1000)

    def key_tag(self, api_key: str) -> str:
        """Which API key may send a state back, without the key itself."""
        return _b64(hmac.digest(self._tag_key, api_key.encode("utf-8", "surrogatepass"), "sha256")[:18])

    def seal(
        self, *, tenant: str, api_key: str, cell_id: str, pending: Sequence[str], request: str, output: list[object]
    ) -> str:
        claims = {
            "v": 1,
            "t": tenant,
            "k": self.key_tag(api_key),
            "c": cell_id,
            "p": list(pending),
            "r": request,
            "e": int(self._clock() * 1000) + self._ttl_ms,
            "n": secrets.token_urlsafe(16),
            "o": carried(output),
        }
        signed = _PREFIX + _b64(jsoncodec.dumps(claims))
        token = signed + "." + self._mac(signed)
        if len(token) > MAX_STATE_CHARS:  # the output is cut, ids and tenants are bounded: a fault of ours
            raise RuntimeError(f"a requestState of {len(token)} characters is over {MAX_STATE_CHARS}")
        return token

    def open(self, token: object, *, tenant: str, api_key: str, request: str) -> RoundClaims:
        """The claims of ``token`` once its MAC holds and it is this caller's, for this request, unexpired.

        Raises RequestStateRefused naming the reason.  Nothing of the token is decoded before its MAC holds.
        """
        if not isinstance(token, str) or len(token) > MAX_STATE_CHARS or not _SHAPE.fullmatch(token):
            raise RequestStateRefused(_TAMPERED, need_param="requestState")
        signed, _, mac = token.rpartition(".")
        if not hmac.compare_digest(self._mac(signed), mac):
            raise RequestStateRefused(_TAMPERED, need_param="requestState")
        claims = _decoded(signed[len(_PREFIX) :])
        cell = claims.cell_id
        if int(self._clock() * 1000) >= claims.expires_at_ms:
            raise RequestStateRefused(
                f"requestState refused: it expired ({STATE_TTL_SECONDS} s after it was given); cell {cell} is "
                f"still parked: {_ASK_AGAIN.format(cell=cell)}",
                need_param="requestState",
            )
        if claims.tenant != tenant or not hmac.compare_digest(claims.key_tag, self.key_tag(api_key)):
            raise RequestStateRefused(
                "requestState refused: it was given to another API key; only the caller it was given to may "
                "send it back",
                need_param="requestState",
            )
        if claims.request != request:
            raise RequestStateRefused(
                "requestState refused: it answers another tool call; retry the tool call it came with, with "
                f"the same arguments, or {_ASK_AGAIN.format(cell=cell)}",
                need_param="requestState",
            )
        return claims

    def _mac(self, signed: str) -> str:
        return _b64(hmac.digest(self._mac_key, signed.encode("ascii"), "sha256"))


def _decoded(payload: str) -> RoundClaims:
    """The claims a state under our MAC carries (a shape we did not write is a fault of ours)."""
    try:
        raw = jsoncodec.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        claims = RoundClaims(
            tenant=raw["t"],
            key_tag=raw["k"],
            cell_id=raw["c"],
            pending=tuple(raw["p"]),
            request=raw["r"],
            expires_at_ms=raw["e"],
            nonce=raw["n"],
            output=raw["o"],
        )
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise RequestStateRefused(_TAMPERED, need_param="requestState") from None
    texts = (claims.tenant, claims.key_tag, claims.cell_id, claims.request, claims.nonce, *claims.pending)
    wrong = type(claims.expires_at_ms) is not int or not isinstance(claims.output, list)
    if raw.get("v") != 1 or not all(isinstance(t, str) for t in texts) or wrong:
        raise RequestStateRefused(_TAMPERED, need_param="requestState")
    return claims


def carried(output: list[object]) -> list[object]:
    """``output`` as a state carries it: whole when its JSON is at most ``CARRIED_OUTPUT_BYTES``, else the
    entries that fit and a last one saying how much is not shown."""
    size = len(jsoncodec.dumps(output))
    if size <= CARRIED_OUTPUT_BYTES:
        return output
    kept: list[object] = []
    used = 2  # the brackets
    room = CARRIED_OUTPUT_BYTES - 256  # for the note
    for entry in output:
        cost = len(jsoncodec.dumps(entry)) + 1
        if used + cost > room:
            break
        kept.append(entry)
        used += cost
    note = (
        f"[{size - used} bytes of output written before the approval are not shown: an approval round carries "
        f"at most {CARRIED_OUTPUT_BYTES} bytes of it]"
    )
    return [*kept, {"type": "text", "text": note}]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def replayed(cell_id: str) -> RequestStateRefused:
    """The refusal of a state that was already used."""
    return RequestStateRefused(
        f"requestState refused: it was already used (each approval round is answered once); "
        f"{_ASK_AGAIN.format(cell=cell_id)}",
        need_param="requestState",
    )
