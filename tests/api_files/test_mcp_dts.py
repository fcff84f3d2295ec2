"""MCP declaration files."""

from __future__ import annotations

from service.api_files import McpServerDecl, McpToolDecl, render_mcp_index, render_mcp_server

ISSUE = McpToolDecl(
    "createIssue",
    "create_issue",
    "Create an issue.\n\n" + "\n".join(f"l{n}" for n in range(20)),
    {
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "Issue title\nShown in tracker"},
            "body": {"type": "string", "default": "", "description": "Body */ text"},
            "state": {"enum": ["open", "closed"]},
        },
        "required": ["title", "body"],
    },
)
SERVER = McpServerDecl("github", "GitHub", (ISSUE, McpToolDecl("delete2", "delete", "Delete.", None)), True, True)


def test_server_file_declares_tools_with_docs():
    """Tools become functions with description, collapsed @param lines and per-param docs."""
    text = render_mcp_server(SERVER)
    assert "declare namespace MCP.github {" in text
    assert "function createIssue(input: {" in text
    assert "@param title Issue title Shown in tracker" in text
    assert "@param body Body *\\/ text" in text
    assert "title: string;" in text
    assert '/** Body *\\/ text Default: "". */' in text
    assert "body?: string;" in text
    assert 'state?: "open" | "closed";' in text
    assert "function delete2(input?: Record<string, never>): Promise<McpToolResult>;" in text
    assert "function $api(tool?: string, options?: { schema?: boolean }): Promise<McpApiHeader>;" in text


def test_description_keeps_at_most_12_non_empty_lines_and_marks_the_cut():
    """Long descriptions are cut to 12 non-empty lines, then a line saying so and where the full text is."""
    text = render_mcp_server(SERVER)
    assert " * l10\n" in text
    assert " * l11\n" not in text
    assert ' * l10\n     * \u2026 (cut at 12 lines; the full description: MCP.github.$api("createIssue"))\n' in text


def test_descriptions_of_12_lines_or_fewer_have_no_cut_marker():
    """A description that fits is kept whole, with no marker."""
    whole = McpToolDecl("t", "t", "\n".join(f"w{n}" for n in range(12)), None)
    text = render_mcp_server(McpServerDecl("s", "s", (whole,), False, False))
    assert " * w11\n" in text and "\u2026" not in text and "cut at" not in text


def test_resources_and_prompts_namespaces_follow_flags():
    """`namespace resources` / `namespace prompts` appear only when the server has them."""
    text = render_mcp_server(SERVER)
    assert "namespace resources {" in text and "namespace prompts {" in text
    bare = render_mcp_server(McpServerDecl("x", "x", (), False, False))
    assert "namespace resources" not in bare and "namespace prompts" not in bare


def test_index_references_every_server():
    """mcp/index.d.ts references each server file and declares MCP.$api()."""
    other = McpServerDecl("constructor2", "constructor", (), False, False)
    text = render_mcp_index([SERVER, other])
    assert text.splitlines()[:2] == [
        '/// <reference path="./github.d.ts" />',
        '/// <reference path="./constructor2.d.ts" />',
    ]
    assert "function $api(): Promise<McpRootHeader>;" in text
    assert '//   MCP.github: "GitHub" (2 tools, resources, prompts)' in text


def test_server_names_cannot_break_out_of_comments():
    """Line breaks (including U+2028) in a server name stay inside one comment line."""
    text = render_mcp_server(McpServerDecl("s", "evil\nname\u2028x", (), False, False))
    assert '// MCP server "evil name x", reached as MCP.s.' in text
