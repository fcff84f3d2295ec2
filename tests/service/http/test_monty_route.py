"""``/v1/monty`` on a replica that is shutting down: a new connection is refused the way a new cell is
(503 ``replica_draining`` with ``Retry-After``), so a pool dialling again reaches another replica.
The route's frames, policy and limits are tested with pydantic-ai's own tooling in
``tests/adapters/test_pydantic_ai_codemode.py`` and ``tests/monty_relay/``."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import WebSocketDenialResponse

from service.drain import refuse_new_cell
from tests.conftest import make_client


def test_a_draining_replica_refuses_new_monty_connections(tmp_path: Path) -> None:
    with make_client(tmp_path) as client:
        client.app.state.services.cells.refuse_new = refuse_new_cell  # as the drain sets it (service/drain.py)
        with pytest.raises(WebSocketDenialResponse) as denied, client.websocket_connect("/v1/monty"):
            pass
    assert denied.value.status_code == 503, denied.value.text
    assert denied.value.json()["error"]["code"] == "replica_draining"
    assert denied.value.headers["retry-after"] == "1"
