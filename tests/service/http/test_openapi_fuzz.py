"""Schemathesis against the service's own OpenAPI document, on a live `codemode serve`.

Every operation gets a bounded number of generated requests (valid and invalid by the schema);
none may answer 5xx, every non-200 answer has the documented error body, and every answer passes
schemathesis's conformance checks (documented status codes, response schemas, ``Allow`` on 405).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from service.app import create_app
from service.assembly import build_components
from service.settings import Settings
from tests.support.live_server import codemode_serve

pytestmark = pytest.mark.slow

ERROR_TYPES = {"recoverable", "config", "transient"}
EXAMPLES_PER_OPERATION = 25
# Rules the schema cannot express (unique client tool names, pending call ids) refuse some
# schema-valid requests, and explicit nulls stand for defaults: these two checks do not apply.
NOT_APPLICABLE = [positive_data_acceptance, negative_data_rejection]


def _openapi() -> dict:
    service_settings = Settings(workers=1)
    return create_app(service_settings, build_components(service_settings, store=False)).openapi()


schema = schemathesis.openapi.from_dict(_openapi())


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with codemode_serve(tmp_path_factory.mktemp("fuzz"), env={"CODEMODE_TIMEOUT_MS": "2000"}) as url:
        yield url


def _assert_error_body(response) -> None:
    body = response.json()
    assert isinstance(body, dict) and set(body) == {"error"}, body
    err = body["error"]
    assert isinstance(err.get("code"), str) and err["code"], body
    assert isinstance(err.get("message"), str) and err["message"], body
    assert err.get("error_type") in ERROR_TYPES, body
    assert set(err) <= {"code", "message", "error_type", "need_param", "non_retriable"}, body


@schema.parametrize()
@settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_no_5xx_and_every_error_has_the_error_body(case, base):
    response = case.call_and_validate(base_url=base, timeout=30, excluded_checks=NOT_APPLICABLE)
    assert response.status_code < 500, (case.method, case.formatted_path, response.text[:500])
    if response.status_code != 200:
        _assert_error_body(response)
    elif case.path != "/metrics":
        response.content.decode("utf-8", errors="strict")
