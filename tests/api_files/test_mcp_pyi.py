"""The MCP stubs of Python cells (`mcp/index.pyi`, `mcp/<server>.pyi`) from hostile server metadata.

Server names, tool names and descriptions are remote text: whatever they hold, every stub is Python that
parses, and nothing of theirs becomes code. (The stubs' typing is checked by mypy in
tests/service/capabilities/test_declarations_pyi.py.)
"""

from __future__ import annotations

import ast

import pytest

from service.api_files.mcp_pyi import render_mcp_index_stub, render_mcp_server_stub
from service.api_files.model import McpServerDecl, McpToolDecl

HOSTILE = ['x"""\nimport os\nos.system("id")\n"""', "a\x00b\x1bc", "\ud800 lone", "'''", "# not a comment\n" * 50]


def server(identifier: str, name: str, tools: tuple[McpToolDecl, ...] = (), **has: bool) -> McpServerDecl:
    return McpServerDecl(identifier, name, tools, has.get("resources", False), has.get("prompts", False))


def names_defined(text: str) -> set[str]:
    """Every name a stub's module or class bodies bind (imports, classes, functions, annotations)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            found.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= {alias.asname or alias.name for alias in node.names}
    return found


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_names_and_descriptions_stay_comments(text):
    """A server name, tool name or description holding quotes, newlines, control characters or a lone
    surrogate leaves the stub parseable and declares nothing it names."""
    tool = McpToolDecl("run", text, text, {"type": "object", "properties": {"q": {"type": "string"}}})
    stub = render_mcp_server_stub(server("docs", text, (tool,), resources=True))
    defined = names_defined(stub.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
    assert "os" not in defined and "system" not in defined
    assert {"DocsServer", "run", "resources"} <= defined


def test_identifiers_python_cannot_reach_are_named_in_a_comment():
    """A tool or server whose identifier is a Python keyword is no member: the stub says to use a handle."""
    stub = render_mcp_server_stub(server("docs", "docs", (McpToolDecl("def", "def", "", {"type": "object"}),)))
    assert "def" not in names_defined(stub) and "'def' is not a Python name" in stub
    index = render_mcp_index_stub([server("docs", "docs"), server("lambda", "l")])
    assert "docs" in names_defined(index) and "lambda" not in names_defined(index)
    assert "'lambda' is not a Python name" in index


def test_a_server_with_nothing_declared_is_still_a_class():
    """A server without tools, resources or prompts is an empty class (a body of comments alone is no Python)."""
    assert "DocsServer" in names_defined(render_mcp_server_stub(server("docs", "docs")))
    assert "Mcp" in names_defined(render_mcp_index_stub([]))
