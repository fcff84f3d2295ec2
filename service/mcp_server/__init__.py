"""The service as an MCP server: tools exec, wait, cancel and search_tools, and the declaration files as
resources, over Streamable HTTP at ``/mcp`` and over stdio (``codemode mcp``).  ``facade`` holds the
logic, ``rendering`` the model-facing text, ``sdk_server`` the only contact with the SDK."""
