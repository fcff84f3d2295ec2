"""Demo mode (``codemode serve --demo``): real tools on a fresh install, off by default.

It adds the example shipping plugin (``service.demo.shipping``) and the bundled travel MCP server
(``service.demo.travel``, run as ``python -m service.demo.travel``), both inside the service's
wheel, to whatever the settings configure, so the playground and the README's tour have tools to
call.  The tool policy of the settings and of each key still applies to them.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from service.errors import ConfigError
from service.settings import Settings
from service.settings_mcp import McpServerConfig

DEMO_PLUGIN = "service.demo.shipping"
DEMO_SERVER = McpServerConfig(name="travel", command=sys.executable, args=("-m", "service.demo.travel"))


def demo_settings(settings: Settings) -> Settings:
    """``settings`` with the demo plugin and MCP server added when ``demo`` is on (unchanged otherwise)."""
    if not settings.demo:
        return settings
    if any(s.name == DEMO_SERVER.name for s in settings.mcp_servers):
        raise ConfigError(
            f"demo mode adds an MCP server named {DEMO_SERVER.name!r}, and the config already has one: "
            "rename [mcp.servers.travel] or run without --demo",
            need_param="demo",
        )
    tools = settings.tools
    plugins = tools.plugins if DEMO_PLUGIN in tools.plugins else (*tools.plugins, DEMO_PLUGIN)
    return settings.replace(tools=replace(tools, plugins=plugins), mcp_servers=(*settings.mcp_servers, DEMO_SERVER))
