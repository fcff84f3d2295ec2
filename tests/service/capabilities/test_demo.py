"""Demo mode: `codemode serve --demo` has the shipping plugin and the bundled travel MCP server; off by default."""

from __future__ import annotations

import httpx
import pytest

from service.demo import DEMO_PLUGIN, DEMO_SERVER, demo_settings
from service.errors import ConfigError
from service.settings import Settings, ToolSettings
from service.settings_load import load_settings
from service.settings_mcp import McpServerConfig
from tests.support.demo_server import demo_serve

pytestmark = pytest.mark.slow

TOUR = """
const quote = await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2});
const weather = await MCP.travel.forecast({city: "Paris", days: 2});
const hits = await catalog.search("weather forecast");
return {price: quote.price, currency: quote.currency, days: weather.structuredContent.days.length,
        found: hits.map(h => h.callableName)};
"""


def test_a_demo_server_calls_a_plugin_tool_and_the_bundled_mcp_server(tmp_path):
    """A cell on `codemode serve --demo` quotes a parcel (plugin), asks the travel server for a forecast
    (MCP over stdio) and finds the forecast tool by searching for "weather"."""
    with demo_serve(tmp_path) as base:
        r = httpx.post(base + "/v1/exec", json={"code": TOUR, "timeout_ms": 30000}, timeout=60)
    env = r.json()
    assert env["status"] == "completed", env
    assert env["value"]["currency"] == "USD" and env["value"]["price"] > 0
    assert env["value"]["days"] == 2
    assert any("forecast" in name for name in env["value"]["found"]), env["value"]


def test_without_demo_the_tools_are_not_there(tmp_path):
    """A plain `codemode serve` on embedded defaults has neither the shipping tools nor the travel server."""
    with demo_serve(tmp_path, args=()) as base:
        catalog = httpx.get(base + "/v1/catalog", timeout=30).json()
        r = httpx.post(base + "/v1/exec", json={"code": "return typeof MCP.travel"}, timeout=30)
    assert "quote_shipping" not in {t["callableName"] for t in catalog["tools"]}
    assert r.json()["value"] == "undefined", r.text


def test_demo_adds_to_the_configuration_without_duplicates():
    """Demo mode appends the plugin (once, even when already listed) and the travel server; off changes nothing."""
    plain = Settings()
    assert demo_settings(plain) is plain
    on = demo_settings(Settings(demo=True, tools=ToolSettings(plugins=(DEMO_PLUGIN, "x.y"))))
    assert on.tools.plugins == (DEMO_PLUGIN, "x.y")
    assert on.mcp_servers == (DEMO_SERVER,)
    assert load_settings(environ={"CODEMODE_DEMO": "true"}).demo is True


def test_demo_refuses_a_configured_server_of_the_same_name():
    """A configured [mcp.servers.travel] with demo on is a start-up error naming the clash."""
    mine = McpServerConfig(name="travel", url="http://127.0.0.1:9/mcp")
    with pytest.raises(ConfigError, match="already has one"):
        demo_settings(Settings(demo=True).replace(mcp_servers=(mine,)))
