"""Reaching the replica that holds a cell, for the HTTP relay (service/http/replica_routing.py) and the
MCP facade's ``wait`` and ``cancel`` (service/mcp_server/cell_tools.py): one place that knows who holds a
cell, where it is, and what to answer when it cannot be reached.

The request goes to the holder's own HTTP route (``/v1/cells/<id>[/<action>]``) with the caller's API
key, so the holder authenticates and authorises the caller itself, and marked as relayed, so the
holder never relays it further.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from service.errors import CellNotFound, ReplicaUnavailable, ServiceError, StoreUnavailable
from service.outbound_http import TRANSPORT_ERRORS, StreamedAnswer
from service.stores.errors import StoreError

from .drained import cell_drained
from .identity import holder_of

if TYPE_CHECKING:
    from .replica import Replica

CELLS_PATH = "/v1/cells/"


# Not a ServiceError: a control-flow signal from the relay to its caller; nothing failed.
class ServeHere(Exception):  # noqa: N818 - a signal, not an error
    """The cell's replica stopped and this replica holds it now, or takes it up from its kept record
    (service/runtime/parked_cells.py): serve the request here."""


@dataclass(frozen=True)
class HolderAnswer:
    """The holder's whole answer to a relayed request."""

    status: int
    body: bytes
    retry_after: int | None


def held_elsewhere(replica: Replica | None, cell_id: str) -> str | None:
    """The id of the replica holding ``cell_id`` when that is another one; None when this replica
    answers for it (its own cell, no cluster, or an id no replica made)."""
    if replica is None:
        return None
    holder = holder_of(cell_id)
    return holder if holder is not None and holder != replica.replica_id else None


async def open_on_holder(
    replica: Replica,
    holder: str,
    cell_id: str,
    method: str,
    target: str,
    headers: Iterable[tuple[bytes, bytes]],
    body: bytes,
    *,
    relayed_here: bool,
    may_take_up: bool = False,
) -> StreamedAnswer:
    """Send the request for ``cell_id`` to ``holder``; the caller reads and closes the answer.

    ``target`` is the holder's path and query; ``relayed_here``: this request was itself relayed by a
    peer (so the holder's address now names this process).  Raises CellNotFound (the holder stopped),
    CellDrained (the holder was drained while it held the cell), StoreUnavailable (nobody can say where
    it is), ReplicaUnavailable (it does not answer).  A stopped holder's cell that another replica took up
    is reached there; ``ServeHere`` when this replica took it up, or (``may_take_up``: a wait) may take it
    up from its kept record.
    """
    what = f"cell {cell_id}"
    if relayed_here:
        if await _adopter(replica, cell_id) == replica.replica_id:
            raise ServeHere
        raise CellNotFound(
            f"{what} is unknown here: the replica that ran it ({holder}) no longer answers at this address "
            f"(this is replica {replica.replica_id}: the holder stopped and this one took its address, or "
            "its advertise_url names something other than the replica itself); start a new cell"
        )
    url = await _where(replica, holder, what)
    if url is None:  # the replica that ran it stopped: one that took it up, or its record, may have it
        holder, url = await _successor(replica, holder, cell_id, may_take_up)
    for last in (False, True):
        try:
            answer: StreamedAnswer = await replica.peers.open(url, method, target, headers, body, what=what)
        except ReplicaUnavailable:
            # The address may have been remembered from before the holder left: ask the store once more, so
            # a holder that drained or stopped is answered for now rather than after the next lookup.
            replica.membership.forget_peer(holder)
            if last or await _where(replica, holder, what) is not None:
                raise
            holder, url = await _successor(replica, holder, cell_id, may_take_up)
            continue
        except ServiceError:
            replica.membership.forget_peer(holder)
            raise
        return answer
    raise AssertionError("unreachable: the last try returns or raises")


async def _successor(replica: Replica, holder: str, cell_id: str, may_take_up: bool) -> tuple[str, str]:
    """Where the cell of the stopped ``holder`` is now: the replica that took it up (its id and address);
    ``ServeHere`` when that is this one or this one may take it up now; else what ``_gone`` says."""
    adopter = await _adopter(replica, cell_id)
    if adopter == replica.replica_id:
        raise ServeHere
    if adopter is not None:
        url = await _where(replica, adopter, f"cell {cell_id}")
        if url is not None:
            return adopter, url
    try:
        kept = await replica.membership.directory.has_parked(cell_id)
    except StoreError as exc:
        raise _store_down(cell_id, exc) from None
    if kept and may_take_up:
        raise ServeHere
    if kept:
        raise CellNotFound(
            f"cell {cell_id} is not running anywhere: the replica that ran it ({holder}) stopped, and its parked "
            "state is kept: a wait on any replica takes it up there"
        )
    await _gone(replica, holder, cell_id)


async def _adopter(replica: Replica, cell_id: str) -> str | None:
    try:
        return await replica.membership.directory.adopter_of(cell_id)
    except StoreError as exc:
        raise _store_down(cell_id, exc) from None


def _store_down(cell_id: str, exc: StoreError) -> StoreUnavailable:
    return StoreUnavailable(
        f"the shared store that says which replica holds cell {cell_id} is unavailable: {exc}; retry shortly",
        retry_after=1,
    )


async def _where(replica: Replica, holder: str, what: str) -> str | None:
    try:
        return await replica.membership.peer_url(holder)
    except StoreError as exc:
        raise StoreUnavailable(
            f"the shared store that says which replica holds {what} is unavailable: {exc}; retry shortly",
            retry_after=1,
        ) from None


async def _gone(replica: Replica, holder: str, cell_id: str) -> NoReturn:
    """Raise what a request for ``cell_id`` gets now that ``holder``'s heartbeat is gone: CellDrained if its
    drain recorded the cell; ReplicaUnavailable (retry) while the store's recent outage may explain the
    missing heartbeat; else CellNotFound (it stopped, or the cell had ended)."""
    try:
        fate = await replica.membership.drained_fate(holder, cell_id)
    except StoreError as exc:
        raise StoreUnavailable(
            f"the shared store that says what became of cell {cell_id} is unavailable: {exc}; retry shortly",
            retry_after=1,
        ) from None
    if fate is not None:
        raise cell_drained(cell_id, holder, fate)
    if replica.membership.unsure():
        raise ReplicaUnavailable(
            f"whether the replica holding cell {cell_id} ({holder}) stopped is not known yet: the shared store "
            "was unavailable a moment ago, so its heartbeat may only have lapsed meanwhile; retry shortly",
            retry_after=1,
        )
    raise CellNotFound(
        f"cell {cell_id} is unknown: the replica that ran it ({holder}) stopped (its heartbeat is gone: it shut "
        f"down or was silent for {replica.ttl_seconds} s), and the cell's state was lost with it; "
        "start a new cell"
    )


async def call_holder(
    replica: Replica | None,
    holder: str,
    cell_id: str,
    action: str,
    api_key: str,
    body: bytes,
    extra_headers: list[tuple[bytes, bytes]],
    max_bytes: int,
) -> HolderAnswer:
    """POST ``/v1/cells/<cell_id>/<action>`` to ``holder`` as the caller with ``api_key`` and read the whole
    answer (at most ``max_bytes``; the holder bounds its own answers, this is the backstop)."""
    assert replica is not None, "held_elsewhere names a holder only in a cluster"
    headers = [(b"content-type", b"application/json"), *extra_headers]
    if api_key:
        headers.append((b"authorization", b"Bearer " + api_key.encode()))
    target = f"{CELLS_PATH}{cell_id}/{action}"
    answer = await open_on_holder(
        replica, holder, cell_id, "POST", target, headers, body, relayed_here=False, may_take_up=action == "wait"
    )
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in answer.chunks():
            size += len(chunk)
            if size > max_bytes:
                raise ServiceError(
                    f"the replica holding cell {cell_id} answered more than {max_bytes} bytes, more than any "
                    "envelope holds: that replica is at fault",
                    non_retriable=True,
                )
            chunks.append(chunk)
    except TRANSPORT_ERRORS as exc:
        raise ReplicaUnavailable(
            f"the replica holding cell {cell_id} broke off its answer ({type(exc).__name__}); retry shortly",
            retry_after=1,
        ) from None
    finally:
        await answer.close()
    retry = next((v for k, v in answer.headers if k.lower() == b"retry-after"), None)
    return HolderAnswer(answer.status, b"".join(chunks), int(retry) if retry and retry.isdigit() else None)
