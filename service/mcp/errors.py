"""Errors of the MCP host side; every class has a stable ``code``.

McpError                     base
 ├── McpUnavailable          mcp_unavailable: the server cannot be reached or died; names the server
 ├── McpTimeout              mcp_timeout: no answer within the deadline; names the server (and tool)
 ├── McpProtocolError        mcp_protocol: the server answered with an error or a malformed result
 ├── McpUnknownTool          mcp_unknown_tool: no such server or tool identifier
 └── McpInvalidInput         mcp_invalid_input: the guest's arguments cannot be sent

An unusable ``[mcp.servers.<name>]`` entry is a start-up ``ConfigError`` (``service.errors.McpConfigError``),
raised while the settings are read.

``counted`` says whether a tool call failing this way counts against the run's failure budget, as a
native tool's failure does: the server failing the call does (down, silent, broken answer); the
caller's own mistakes and codemode's refusals (unknown tool, bad input, capacity, shutdown) do not.
"""

from __future__ import annotations


class McpError(Exception):
    """Base of every MCP host error."""

    code = "mcp_error"
    counted = False

    def __init__(self, message: str, *, server: str | None = None, tool: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.server = server
        self.tool = tool


class McpUnavailable(McpError):
    """The server is not reachable, failed to start, or died."""

    code = "mcp_unavailable"

    def __init__(
        self,
        message: str,
        *,
        server: str | None = None,
        tool: str | None = None,
        retryable: bool = False,
        counted: bool = True,
    ) -> None:
        super().__init__(message, server=server, tool=tool)
        # True only when the request provably never reached a live server, so resending is safe.
        self.retryable = retryable
        self.counted = counted


class McpTimeout(McpError):
    """The server did not answer within the call's deadline."""

    code = "mcp_timeout"
    counted = True


class McpProtocolError(McpError):
    """The server answered with an error or a result the SDK rejected."""

    code = "mcp_protocol"
    counted = True


class McpUnknownTool(McpError):
    """No server or tool with that identifier."""

    code = "mcp_unknown_tool"


class McpInvalidInput(McpError):
    """The arguments do not fit the MCP call."""

    code = "mcp_invalid_input"
