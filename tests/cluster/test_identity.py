"""Which replica holds a cell, read from its id; where a replica says peers reach it; when it is one."""

from __future__ import annotations

import re
import socket
import uuid

import pytest

from service.api.schemas import ID_PATTERN
from service.assembly import build_components
from service.cluster.identity import cell_id_prefix, holder_of, new_replica_id
from service.errors import ConfigError
from service.settings import Settings


def test_cell_ids_name_their_replica_and_restarts_get_a_new_one():
    """A replica's cell ids carry its id (within the API's id pattern); each start draws a new id."""
    rid = new_replica_id()
    cell_id = cell_id_prefix(rid) + str(uuid.uuid4())
    assert holder_of(cell_id) == rid
    assert re.match(ID_PATTERN, cell_id)
    assert len({new_replica_id() for _ in range(100)}) == 100


@pytest.mark.parametrize(
    "cell_id",
    ["cell_3019a25a-c79d-4920-b8cc-967506f817df", "cell_nope", "cell_abc.def", "cell_0123456789ab." + "x" * 36, ""],
)
def test_ids_no_replica_made_name_no_holder(cell_id):
    """Single-machine ids and made-up ids name no replica: they are answered locally (404)."""
    assert holder_of(cell_id) is None


def test_advertise_url_defaults_to_the_bind_address_and_must_be_http():
    """Default http://<host>:<port> (the machine's name for a wildcard bind); a non-HTTP URL stops the start."""
    assert Settings(port=8123).resolved_advertise_url == "http://127.0.0.1:8123"
    wildcard = Settings(host="0.0.0.0", port=80, api_keys=({"key": "k"},))
    assert wildcard.resolved_advertise_url == f"http://{socket.gethostname()}:80"
    assert Settings(advertise_url="http://10.0.0.5:8000/").check().resolved_advertise_url == "http://10.0.0.5:8000"
    for bad in ("10.0.0.5:8000", "ftp://x", "http://", "http://a b"):
        with pytest.raises(ConfigError, match="advertise_url"):
            Settings(advertise_url=bad).check()


def test_a_sqlite_store_makes_no_replica(tmp_path):
    """Only a shared (Redis) store makes the process a replica; with SQLite cell ids stay plain."""
    svc = build_components(Settings(workers=1, data_dir=str(tmp_path)))
    assert svc.replica is None
    assert svc.cells.cell_id_prefix == "cell_"
