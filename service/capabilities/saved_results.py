"""Saved results: ``results.save``, ``results.load``, ``results.delete`` and a final value kept by reference.

Results are kept per (tenant, session, run) for ``results_ttl_seconds``, charged to the cell's inbox
allowance, and carry their network provenance: loading a network-derived result marks the cell.
Restart-safe cells cannot use them (a replay could not see them).  With a ``redis://`` store they
live in Redis, shared by replicas; while it is down, save/load/delete reject with the transient
``store_unavailable`` and an oversized final value is shown as a plain truncation marker.
"""

from __future__ import annotations

import logging

from bridge import jsoncodec
from bridge.json_types import JsonObject
from bridge.output import NotRetained, RetainResult
from bridge.refs import describe_reference
from service.runtime.dispatch import CellContext, Dispatcher, GuestError, HostCall, RawJson
from service.settings import Settings
from service.stores.errors import ResultsError, StoreError, StoreUnavailableError
from service.stores.results_backend import ResultsBackend
from service.stores.saved_results import ResultScope
from service.tools.run_book import DEFAULT_RUN

from .guest_errors import guest_error

log = logging.getLogger("codemode")


def result_scope(cell: CellContext) -> ResultScope:
    return ResultScope(cell.spec.tenant, cell.spec.session_id or "", cell.spec.run_id or DEFAULT_RUN)


class SavedResults:
    """The guest's saved-results methods, and the retainer a cell keeps an oversized final value with."""

    def __init__(self, settings: Settings, results: ResultsBackend) -> None:
        self.settings = settings
        self.results = results

    def install(self, dispatcher: Dispatcher) -> None:
        dispatcher.register("results.save", self._save_request)
        dispatcher.register("results.load", self._load_request, side_effects=False)
        dispatcher.register("results.delete", self._delete_request)

    async def keep(self, cell: CellContext, json_text: str) -> RetainResult:
        """Keep an oversized final value as a saved result, or say why not."""
        try:
            ref = await self._save(cell, json_text)
        except ResultsError as exc:
            reason = {"results_capacity": "result-store capacity", "results_quota": "saved-results quota"}.get(
                exc.code, "result data allowance"
            )
            return NotRetained(f"{reason}: {exc}")
        except StoreError as exc:
            return NotRetained(f"saved results unavailable: {exc}")
        return describe_reference(ref, json_text)

    async def release(self, cell: CellContext, ref_id: str) -> None:
        """Free a result kept by ``keep`` that the envelope did not show (nobody can load it)."""
        try:
            await self.results.delete(result_scope(cell), ref_id)
        except StoreError as exc:  # its TTL frees it; until then it counts against the quotas
            log.warning("could not delete an unshown saved result %s: %s", ref_id, exc)

    async def _save(self, cell: CellContext, json_text: str) -> str:
        """Keep JSON for the cell's run (inbox-sized allowance, TTL, network provenance)."""
        return await self.results.save(
            result_scope(cell),
            json_text,
            cell.spec.limits.inbox_bytes,
            self.settings.results_ttl_seconds,
            network=cell.network_content,
        )

    @staticmethod
    def _allowed(call: HostCall) -> None:
        if call.cell.spec.restart_safe:
            raise GuestError(
                "results are not available in restart-safe cells: a replay could not see them", "results_unavailable"
            )

    async def _save_request(self, call: HostCall) -> JsonObject:
        self._allowed(call)
        text = jsoncodec.dumps_text(call.args[0] if call.args else None)
        try:
            ref = await self._save(call.cell, text)
        except ResultsError as exc:
            raise guest_error(exc) from None
        except StoreError as exc:
            raise _unavailable(exc) from None
        return describe_reference(ref, text)

    async def _load_request(self, call: HostCall) -> RawJson:
        self._allowed(call)
        try:
            text, network = await self.results.load_entry(result_scope(call.cell), call.args[0] if call.args else None)
        except ResultsError as exc:
            raise guest_error(exc) from None
        except StoreError as exc:
            raise _unavailable(exc) from None
        if network:
            call.cell.network_content = True  # provenance travels with the saved data
        return RawJson(text.encode("utf-8"))

    async def _delete_request(self, call: HostCall) -> bool:
        self._allowed(call)
        try:
            return await self.results.delete(result_scope(call.cell), call.args[0] if call.args else None)
        except StoreError as exc:
            raise _unavailable(exc) from None


def _unavailable(exc: StoreError) -> GuestError:
    """The shared results store is down or unreachable: a transient failure the guest may retry."""
    return guest_error(StoreUnavailableError(f"saved results are unavailable for now: {exc}; retry shortly"))
