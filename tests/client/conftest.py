"""One real `codemode serve` (shipping plugin, one API key) shared by the client tests, and its features."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from codemode_client import BadRequestError, Client
from tests.support.live_server import codemode_serve

API_KEY = "ck_test_client_0123456789"
CONFIG = f"""
[tools]
plugins = ["examples.plugins.shipping"]

[[api_keys]]
key = "{API_KEY}"
tenant = "client"
"""


@dataclass(frozen=True)
class Features:
    """Which features of issue 14 the running server has (they arrive on other branches)."""

    background: bool
    approvals: bool


def _accepts(client: Client, field: str, value: object) -> bool:
    """Whether exec takes ``field`` (a server without it answers 422 naming it)."""
    try:
        env = client.exec("return 1", **{field: value})
    except BadRequestError as exc:
        if exc.need_param == field:
            return False
        raise
    client.wait(env.cell_id) if not env.is_final else None
    return True


@pytest.fixture(scope="package")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with codemode_serve(tmp_path_factory.mktemp("client-svc"), config=CONFIG) as base:
        yield base


@pytest.fixture(scope="package")
def features(base_url: str) -> Features:
    with Client(base_url, API_KEY) as client:
        return Features(background=_accepts(client, "background", True),
                        approvals=_accepts(client, "require_approval", []))


@pytest.fixture
def client(base_url: str) -> Iterator[Client]:
    with Client(base_url, API_KEY, timeout=60) as c:
        yield c


@pytest.fixture
def needs_background(features: Features) -> None:
    if not features.background:
        pytest.skip("needs the approvals/background server branch: this server refuses exec's `background` field")


@pytest.fixture
def needs_approvals(features: Features) -> None:
    if not features.approvals:
        pytest.skip("needs the approvals/background server branch: this server refuses exec's `require_approval` field")
