"""The virtual API file table: listing, reading, path rules and byte counts."""

from __future__ import annotations

import pytest

from service.api_files import ApiFileError, ApiFileTable, McpServerDecl, McpToolDecl, ToolDecl

GITHUB = McpServerDecl(
    "github",
    "GitHub",
    (
        McpToolDecl(
            "createIssue",
            "create_issue",
            "Cr\u00e9er un ticket \u2014 \u00e9t\u00e9 \U0001f41b",
            {
                "type": "object",
                "properties": {"title": {"type": "string", "description": "Issue title\nShown in tracker"}},
                "required": ["title"],
            },
        ),
    ),
    has_resources=True,
    has_prompts=False,
)
DOCS = McpServerDecl("docs", "docs", (), has_resources=True, has_prompts=True)
TOOLS = [
    ToolDecl("read", "Lire un fichier \u00e0 la racine.\nSecond line.", {"type": "object"}, None, True),
    ToolDecl("client_x", "", None, None, False),
]


@pytest.fixture
def table() -> ApiFileTable:
    """A table with two tools and two MCP servers."""
    return ApiFileTable(TOOLS, [GITHUB, DOCS])


def paths(listing: dict) -> list[str]:
    """Paths of a listing."""
    return [item["path"] for item in listing["files"]]


def test_list_all_files_in_order(table):
    """The table lists results, tools, then the MCP index and servers."""
    assert paths(table.list()) == [
        "results.d.ts",
        "tools/client_x.d.ts",
        "tools/read.d.ts",
        "mcp/index.d.ts",
        "mcp/docs.d.ts",
        "mcp/github.d.ts",
    ]


def test_no_mcp_files_without_servers():
    """Without MCP servers there are no mcp/ files."""
    assert paths(ApiFileTable(TOOLS, []).list()) == ["results.d.ts", "tools/client_x.d.ts", "tools/read.d.ts"]


@pytest.mark.parametrize("prefix", ["mcp", "mcp/", "/mcp/", " mcp "])
def test_prefix_matches_directory(table, prefix):
    """`mcp` and `mcp/` both list the MCP files."""
    assert paths(table.list(prefix)) == ["mcp/index.d.ts", "mcp/docs.d.ts", "mcp/github.d.ts"]


def test_prefix_matches_exact_path_and_not_partial_segments(table):
    """A prefix matches a whole path or a directory, never part of a segment."""
    assert paths(table.list("results.d.ts")) == ["results.d.ts"]
    assert paths(table.list("mc")) == []
    assert paths(table.list("tools")) == ["tools/client_x.d.ts", "tools/read.d.ts"]
    assert paths(table.list("")) == paths(table.list())


def test_listed_bytes_equal_read_bytes_equal_utf8_length(table):
    """Listed bytes match read bytes and the UTF-8 length, which exceeds the char count for non-ASCII."""
    for item in table.list()["files"]:
        read = table.read(item["path"])
        assert read["bytes"] == len(read["content"].encode("utf-8"))
        if "bytes" in item:
            assert item["bytes"] == read["bytes"]
    github = table.read("mcp/github.d.ts")
    assert "Cr\u00e9er un ticket" in github["content"]
    assert github["bytes"] > len(github["content"])


def test_tool_files_are_listed_without_bytes_and_rendered_on_read(table):
    """Tool entries carry no bytes in the listing; reading renders the declaration."""
    listed = {item["path"]: item for item in table.list("tools")["files"]}
    assert "bytes" not in listed["tools/read.d.ts"]
    read = table.read("tools/read.d.ts")
    assert read["path"] == "tools/read.d.ts"
    assert read["description"] == "read: Lire un fichier \u00e0 la racine."
    assert "declare function read(input?: Record<string, unknown>): Promise<unknown>;" in read["content"]
    assert read["bytes"] > len(read["content"])


def test_read_normalizes_leading_slash_and_whitespace(table):
    """Leading slashes and surrounding whitespace are ignored."""
    assert table.read("  /results.d.ts ")["path"] == "results.d.ts"


@pytest.mark.parametrize(
    "path",
    [
        "",
        "  ",
        "/",
        "tools/",
        "tools//read.d.ts",
        "./results.d.ts",
        "tools/../results.d.ts",
        "mcp/.",
        "..",
        None,
        3,
    ],
)
def test_invalid_paths_are_rejected(table, path):
    """Empty, `.` and `..` segments (and non-strings) are invalid paths."""
    with pytest.raises(ApiFileError, match="^invalid API file path$") as caught:
        table.read(path)
    assert caught.value.code == "api_file"


def test_unknown_path_names_the_file(table):
    """An unknown path is reported with its normalized spelling."""
    with pytest.raises(ApiFileError, match=r"^Unknown API file: tools/missing\.d\.ts$"):
        table.read("/tools/missing.d.ts")


def test_invalid_prefix_is_rejected(table):
    """A prefix with a `..` segment is an invalid path."""
    with pytest.raises(ApiFileError, match="invalid API file path"):
        table.list("mcp/../tools")


def test_duplicate_callable_names_are_refused():
    """Two tools with one callable name cannot share a file."""
    with pytest.raises(ValueError, match="duplicate callable name"):
        ApiFileTable([TOOLS[0], TOOLS[0]], [])


def test_results_file_declares_the_guest_contract(table):
    """results.d.ts declares results, ResultReference and store/load with their limits."""
    content = table.read("results.d.ts")["content"]
    for needle in (
        "interface ResultReference",
        "previewTruncated",
        "declare const results",
        "declare function store(key: string, value: unknown): Promise<void>;",
        "declare function load(key: string): Promise<unknown>;",
        "256 KiB",
        "1 MiB",
        "64 entries",
    ):
        assert needle in content


def test_lone_surrogates_in_descriptions_are_replaced():
    """A description with a lone surrogate still reads as valid UTF-8 with a replacement character."""
    table = ApiFileTable([ToolDecl("odd", "bad \ud800 text", None, None, True)], [])
    read = table.read("tools/odd.d.ts")
    assert "bad \ufffd text" in read["content"]
    assert read["bytes"] == len(read["content"].encode("utf-8"))
