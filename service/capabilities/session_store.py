"""The session store as the guest sees it: ``store.get``, ``store.set``, ``store.delete``.

A cell reads its session's data once and buffers its writes; the end-of-cell hook commits them
when, and only when, the cell completed.  The read happens before the cell takes a worker when its
code names ``store`` or ``load`` (``prefetch``, within the cell's timeout), else on its first store
request; a store that did not answer then makes every store request of the cell reject at once
(``store_unavailable``) rather than wait again.  A session that ever held network-derived writes
keeps that mark, so later cells that read from it are marked untrusted too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from bridge import jsoncodec
from bridge.json_types import JsonObject
from service.runtime.dispatch import CellContext, Dispatcher, GuestError, HostCall
from service.runtime.spec import CellSpec
from service.settings import Settings
from service.stores import SessionStore, StoreLimits
from service.stores.cell_writes import CellStoreWrites
from service.stores.errors import StoreError, StoreKeyError, StoreLimitError, StoreTypeError, StoreUnavailableError

from .cell_tools import CellTools, cell_tools
from .guest_errors import guest_error

#: Internal store key: set when a cell that saw network-derived data committed writes, so later
#: cells that load from the session are marked untrusted too.  Guest keys cannot start with NUL.
NETWORK_MARK_KEY = "\u0000codemode:network"


def store_limits(settings: Settings) -> StoreLimits:
    """The session-store limits: fixed per-session sizes (SPEC §6) and the tenant quotas of the settings."""
    return StoreLimits(
        max_tenant_bytes=settings.tenant_store_bytes,
        max_tenant_sessions=settings.tenant_max_sessions,
        session_ttl_seconds=settings.session_ttl_seconds,
    )


class SessionStoreHandlers:
    """The guest's store methods over one ``SessionStore`` (None: not configured on this server)."""

    def __init__(self, store: SessionStore | None, limits: StoreLimits) -> None:
        self.store = store
        self.limits = limits

    def install(self, dispatcher: Dispatcher) -> None:
        dispatcher.register("store.get", self._get, side_effects=False)
        dispatcher.register("store.set", self._set)
        dispatcher.register("store.delete", self._delete)
        dispatcher.on_finish(self._commit)

    def prefetch(self, cell: CellContext, deadline: float) -> Awaitable[None] | None:
        """The read of the session's data before the cell takes a worker, if its code may use it (else
        None: nothing to wait for).

        A cheap substring test decides: code that reaches the store by other spellings reads on its
        first store request instead (bounded by the store's own timeout).
        """
        spec = cell.spec
        if self._refusal(spec) is not None or ("store" not in spec.code and "load" not in spec.code):
            return None
        return self._prefetch(cell, deadline)

    async def _prefetch(self, cell: CellContext, deadline: float) -> None:
        spec = cell.spec
        state = cell_tools(cell)
        try:
            async with asyncio.timeout_at(deadline):
                await self._load(state, spec.tenant, spec.session_id or "")
        except TimeoutError:
            state.store_error = "session store unavailable: it did not answer within the cell's timeout"
        except StoreError as exc:
            state.store_error = f"session store unavailable: {exc}"

    def _refusal(self, spec: CellSpec) -> str | None:
        """Why a cell of ``spec`` has no store access, or None."""
        if self.store is None:
            return "the session store is not configured on this server"
        if spec.session_id is None:
            return "store/load need a session: send session_id with the exec request"
        if spec.restart_safe or spec.headless:
            return "store/load are not available in restart-safe or headless cells"
        return None

    async def _load(self, state: CellTools, tenant: str, session_id: str) -> None:
        assert self.store is not None
        snapshot = await self.store.get_all(tenant, session_id)
        usage = await self.store.usage(tenant)
        if state.writes is None:
            state.session_network = NETWORK_MARK_KEY in snapshot
            state.writes = CellStoreWrites(snapshot, self.limits, usage)

    async def _writes(self, call: HostCall) -> CellStoreWrites:
        spec = call.cell.spec
        refusal = self._refusal(spec)
        if refusal is not None:
            raise GuestError(refusal, "store_unavailable")
        state = cell_tools(call.cell)
        if state.writes is None:
            if state.store_error is not None:
                raise guest_error(StoreUnavailableError(state.store_error))
            try:
                await self._load(state, spec.tenant, spec.session_id or "")
            except StoreError as exc:
                raise guest_error(StoreUnavailableError(f"session store unavailable: {exc}")) from None
        assert state.writes is not None
        return state.writes

    async def _get(self, call: HostCall) -> JsonObject | None:
        writes = await self._writes(call)
        key = call.args[0] if call.args else None
        _check_key(key)
        text = writes.get(key)
        if text is not None and cell_tools(call.cell).session_network:
            call.cell.network_content = True  # provenance survives persistence
        return None if text is None else {"value": jsoncodec.loads(text)}

    async def _set(self, call: HostCall) -> None:
        writes = await self._writes(call)
        key = call.args[0] if call.args else None
        text = jsoncodec.dumps_text(call.args[1] if len(call.args) > 1 else None)
        _write(writes, key, text)
        return None

    async def _delete(self, call: HostCall) -> None:
        writes = await self._writes(call)
        _write(writes, call.args[0] if call.args else None, None)
        return None

    async def _commit(self, cell: CellContext, completed: bool) -> list[str]:
        state = cell.tools
        if not completed or not isinstance(state, CellTools) or state.writes is None or not state.writes.has_pending():
            return []
        assert self.store is not None and cell.spec.session_id is not None
        sets, deletes = state.writes.pending()
        if cell.network_content and not state.session_network:
            sets = {**sets, NETWORK_MARK_KEY: "true"}
        try:
            await self.store.commit(cell.spec.tenant, cell.spec.session_id, sets, deletes)
        except StoreLimitError as exc:
            return [f"the cell's store writes were not saved: {exc}"]
        except StoreError as exc:
            return [
                f"session store persistence could not be confirmed ({exc}); the cell's store writes "
                "may not have been saved"
            ]
        return []


def _check_key(key: object) -> None:
    if isinstance(key, str) and key.startswith("\u0000"):
        raise guest_error(StoreKeyError("store keys may not start with a NUL character (reserved)"))


def _write(writes: CellStoreWrites, key: object, text: str | None) -> None:
    _check_key(key)
    try:
        writes.set(key, text)
    except (StoreTypeError, StoreLimitError) as exc:
        raise guest_error(exc) from None
