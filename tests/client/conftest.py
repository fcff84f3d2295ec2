"""One real `codemode serve` (shipping plugin, one API key) shared by the client tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from codemode_client import Client

from tests.support.live_server import codemode_serve

API_KEY = "ck_test_client_0123456789"
CONFIG = f"""
[tools]
plugins = ["service.demo.shipping"]

[[api_keys]]
key = "{API_KEY}"
tenant = "client"
"""


@pytest.fixture(scope="package")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with codemode_serve(tmp_path_factory.mktemp("client-svc"), config=CONFIG) as base:
        yield base


@pytest.fixture
def client(base_url: str) -> Iterator[Client]:
    with Client(base_url, API_KEY, timeout=60) as c:
        yield c
