"""``GET /v1/tool-description``: codemode as one function tool, per key, bounded, and the MCP exec text."""

from __future__ import annotations

from collections.abc import Iterator

import jsonschema
import pytest
from fastapi.testclient import TestClient

from service.mcp_server.facade import McpFacade
from service.settings import ApiKey, ToolSettings
from service.tool_description import MAX_DESCRIPTION_CHARS
from service.tools import ToolSpec
from tests.conftest import make_client

KEYS = (ApiKey("key-full", "full"), ApiKey("key-narrow", "narrow", tools={"deny": ["quote_shipping"]}))
FULL = {"Authorization": "Bearer key-full"}
NARROW = {"Authorization": "Bearer key-narrow"}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The shipping plugin behind two keys; the second one's policy denies quote_shipping."""
    with make_client(
        tmp_path_factory.mktemp("tooldesc"),
        api_keys=KEYS,
        tools=ToolSettings(plugins=("service.demo.shipping",)),
        max_output_bytes=4096,
    ) as c:
        yield c


def describe(client: TestClient, headers: dict[str, str], **params: str) -> dict:
    r = client.get("/v1/tool-description", headers=headers, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_the_description_teaches_the_guest_api_limits_and_wait(keyed):
    """The answer is {name, description, input_schema}; the text names every part of the guest API in brief,
    the two limits with this server's figures (inbox 10 MiB, output budget 4096) and how to continue."""
    tool = describe(keyed, FULL)
    assert set(tool) == {"name", "description", "input_schema"}
    assert tool["name"] == "codemode"
    text = tool["description"]
    for part in ("return", "text(v)", "json(v)", "catalog.search(", "API.list()", "API.read(", "MCP.<server>.<tool>"):
        assert part in text, part
    for part in ("results.save(", "results.load(", "store(key, value)", "load(key)"):
        assert part in text, part
    assert "inbox of 10485760 bytes" in text
    assert "max_output_bytes (default 4096)" in text
    assert 'status "waiting"' in text and "continue it with wait" in text


def test_the_quick_index_is_the_keys_own(keyed):
    """Each key's description ends with its own quick index: a tool its policy denies is not listed."""
    full = describe(keyed, FULL)["description"]
    narrow = describe(keyed, NARROW)["description"]
    assert "- quote_shipping {" in full and "- list_carriers {" in full
    assert "- quote_shipping {" not in narrow and "- list_carriers {" in narrow


def test_a_missing_key_is_refused(keyed):
    """With keys configured the route needs one, like every /v1 route."""
    assert keyed.get("/v1/tool-description").status_code == 401


def test_the_input_schema_takes_what_exec_runs(keyed):
    """Arguments valid under input_schema run as a cell; ones it refuses (no code, an unknown field) are refused."""
    schema = describe(keyed, FULL)["input_schema"]
    jsonschema.Draft202012Validator.check_schema(schema)
    args = {
        "code": 'const q = await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2});\nreturn q.currency'
    }
    jsonschema.validate({**args, "title": "quote"}, schema)
    r = keyed.post("/v1/exec", json={**args, "title": "quote"}, headers=FULL)
    assert r.json()["value"] == "USD", r.text
    validator = jsonschema.Draft202012Validator(schema)
    assert not validator.is_valid({"title": "no code"})
    assert not validator.is_valid({"code": "return 1", "session_id": "s"})  # the caller's business, not the model's


def test_languages_are_javascript_by_default_and_python(keyed):
    """language=javascript is the default, typescript the same answer; python describes Python cells and fixes
    `language` in the schema; any other language is a 422 naming the parameter and the languages that run."""
    assert describe(keyed, FULL, language="javascript") == describe(keyed, FULL)
    assert describe(keyed, FULL, language="typescript") == describe(keyed, FULL)
    python = describe(keyed, FULL, language="python")
    assert python["description"].startswith("Run Python in a fresh sandbox (Monty")
    assert "keyword arguments" in python["description"] and "quote_shipping" in python["description"]
    validator = jsonschema.Draft202012Validator(python["input_schema"])
    assert validator.is_valid({"code": "1 + 1", "language": "python"})
    assert not validator.is_valid({"code": "1 + 1"}) and not validator.is_valid({"code": "1", "language": "javascript"})
    assert len(python["description"]) <= MAX_DESCRIPTION_CHARS
    r = keyed.get("/v1/tool-description", params={"language": "ruby"}, headers=FULL)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["need_param"] == "language"
    assert "'ruby' is not available" in err["message"] and "javascript, typescript, python" in err["message"]
    r = keyed.get("/v1/tool-description", params={"language": "x" * 65}, headers=FULL)
    assert r.status_code == 422 and r.json()["error"]["need_param"] == "language"


def test_the_mcp_exec_tool_has_the_same_text(keyed):
    """The MCP facade's exec description is the text this route answers, for each key."""
    facade = McpFacade(keyed.app.state.services)
    for key, headers in zip(KEYS, (FULL, NARROW)):
        exec_tool = next(t for t in facade.tools(key) if t.name == "exec")
        assert exec_tool.description == describe(keyed, headers)["description"]


async def _noop(call_id, params, ctx):
    return None


def test_the_description_stays_bounded_with_a_thousand_tools(tmp_path):
    """A thousand tools with long names still give a description under MAX_DESCRIPTION_CHARS (the quick
    index skips lines that do not fit and says how many)."""
    tools = [
        ToolSpec(
            name=f"tool_{i:04d}_" + "n" * 60, description="d" * 500, execute=_noop, input_schema={"type": "object"}
        )
        for i in range(1000)
    ]
    with make_client(tmp_path, extra_tools=tools) as c:
        text = describe(c, {})["description"]
    assert len(text) <= MAX_DESCRIPTION_CHARS
    assert "- tool_0000_" in text and "omitted" in text
