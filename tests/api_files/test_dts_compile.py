"""Every generated declaration file compiles with the real `tsc --strict`, and is usable from code."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from service.api_files import ApiFileTable, McpServerDecl, McpToolDecl, ToolDecl
from service.api_files.discriminator import DISCRIMINATOR_KEY
from service.api_files.tool_dts import TOOL_OUTPUT_MAX_CHARS, render_tool_declaration

pytestmark = pytest.mark.slow

OBJ = "object"


def closed(properties: dict, required: list[str] | None = None) -> dict:
    """A closed object schema."""
    return {
        "type": OBJ,
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


def discriminated(variants: dict[str, dict], prop: str = "action") -> dict:
    """An output union annotated with the input discriminator."""
    return {
        "anyOf": list(variants.values()),
        DISCRIMINATOR_KEY: {
            "version": 1,
            "inputProperty": prop,
            "mapping": {value: index for index, value in enumerate(variants)},
        },
    }


def big_variant(index: int) -> dict:
    """A closed object branch with many long-named fields."""
    return closed({f"field_{index}_{n}_with_a_rather_long_descriptive_name": {"type": "string"} for n in range(12)})


def deep_object(levels: int) -> dict:
    """An object nested far beyond the renderer's depth limit."""
    node: dict = {"type": OBJ, "properties": {}}
    for _ in range(levels):
        node = {"type": OBJ, "properties": {"n": node}}
    return node


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str = Field(description="City */ name")


class Tree(BaseModel):
    value: int
    children: list[Tree] = []


class Order(BaseModel):
    ship_to: Address = Field(description="Where it goes")
    bill_to: Address | None = None
    lines: list[dict[str, Address]]
    tree: Tree


ODD_DEF_NAMES = ["my-def", "1abc", "a b/c~d", "", "Record", "caf\u00e9", "string", "delete", "My_def", "odd_defs"]


def _pointer(name: str) -> str:
    return "#/$defs/" + name.replace("~", "~0").replace("/", "~1").replace(" ", "%20")


ODD_DEFS = {
    "type": OBJ,
    "properties": {f"p{n}": {"$ref": _pointer(name)} for n, name in enumerate(ODD_DEF_NAMES)},
    "required": ["p0", "p1"],
    "$defs": {name: closed({"n": {"const": n}}) for n, name in enumerate(ODD_DEF_NAMES)},
}

ACTIONS_64 = [f"action{n}" for n in range(64)]
_DEEP = deep_object(80)

CORPUS: list[tuple[str, str, dict | None, dict | None]] = [
    ("empty_input", "No input at all.", {"type": OBJ, "properties": {}}, None),
    ("no_schema", "Schemas missing.", None, None),
    (
        "read",
        "Read a file.",
        closed({"path": {"type": "string"}, "offset": {"type": "integer"}}, ["path"]),
        closed({"text": {"type": "string"}, "truncated": {"type": "boolean"}}),
    ),
    (
        "nested",
        "Nested objects.",
        {
            "type": OBJ,
            "properties": {
                "a": {
                    "type": OBJ,
                    "properties": {
                        "b": {
                            "type": OBJ,
                            "properties": {"c": {"type": "array", "items": {"type": "number"}}},
                        }
                    },
                }
            },
        },
        {"type": OBJ, "properties": {"deep": {"type": OBJ, "properties": {"deeper": {"type": "null"}}}}},
    ),
    (
        "enums",
        "Enums and consts.",
        {
            "type": OBJ,
            "properties": {
                "mode": {"enum": ["fast", "slow", 'quote"d', "line\nbreak", "\u2028sep"]},
                "level": {"enum": [1, 2, -3, 4.5, None, True]},
                "fixed": {"const": "v1"},
                "neg": {"const": -1},
            },
        },
        {"enum": [f"s{n}" for n in range(40)]},
    ),
    (
        "unions",
        "anyOf and oneOf.",
        {
            "type": OBJ,
            "properties": {
                "id": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "many": {"oneOf": [{"const": n} for n in range(12)]},
            },
        },
        {
            "oneOf": [
                closed({"ok": {"const": True}, "value": {"type": "string"}}),
                closed({"ok": {"const": False}, "error": {"type": "string"}}),
            ]
        },
    ),
    (
        "nullable",
        "Nullable fields.",
        {
            "type": OBJ,
            "properties": {
                "a": {"type": "string", "nullable": True},
                "b": {"type": ["string", "null"]},
                "c": {"enum": ["x", None]},
                "d": {"type": ["array", "null"], "items": {"type": "string"}},
            },
        },
        {"type": ["object", "null"], "properties": {"x": {"type": "integer"}}},
    ),
    (
        "arrays_of_objects",
        "Rows.",
        {
            "type": OBJ,
            "properties": {
                "rows": {
                    "type": "array",
                    "items": closed(
                        {
                            "id": {"type": "integer"},
                            "tags": {
                                "type": "array",
                                "items": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                            },
                        }
                    ),
                }
            },
        },
        {
            "type": "array",
            "items": {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "number"}]}},
        },
    ),
    (
        "maps",
        "additionalProperties maps.",
        {
            "type": OBJ,
            "properties": {
                "env": {"type": OBJ, "additionalProperties": {"type": "string"}},
                "mixed": {
                    "type": OBJ,
                    "properties": {"fixed": {"type": "integer"}, "opt": {"type": "boolean"}},
                    "required": ["fixed"],
                    "additionalProperties": {"type": "string"},
                },
            },
            "additionalProperties": {"type": "number"},
        },
        {"type": OBJ, "additionalProperties": {"type": "array", "items": {"type": "string"}}},
    ),
    (
        "refs",
        "$ref everywhere.",
        {"type": OBJ, "properties": {"node": {"$ref": "#/$defs/node"}}, "$defs": {"node": {"type": OBJ}}},
        {"$ref": "#/$defs/out", "$defs": {"out": {"type": "string"}}},
    ),
    (
        "weird_keys",
        "Keys that are not identifiers */ nor safe.",
        {
            "type": OBJ,
            "properties": {
                "a-b": {"type": "string"},
                "__proto__": {"type": "string"},
                "constructor": {"type": "number"},
                "delete": {"type": "boolean"},
                "class": {"type": "string"},
                "1abc": {"type": "string"},
                "with space": {"type": "string"},
                'quote"key': {"type": "string"},
                "": {"type": "string"},
                "caf\u00e9": {"type": "string"},
                "$dollar": {"type": "string"},
                "new\nline": {"type": "string"},
                "star*/slash": {"type": "string", "description": "ends */ comments"},
            },
            "required": ["a-b", "__proto__"],
        },
        closed({"__proto__": {"type": "string"}, "toString": {"type": "string"}, "x-y": {"type": "integer"}}),
    ),
    (
        "reserved_words",
        "Reserved words as keys.",
        closed(
            {
                w: {"type": "string"}
                for w in (
                    "break",
                    "case",
                    "catch",
                    "default",
                    "do",
                    "else",
                    "enum",
                    "export",
                    "extends",
                    "function",
                    "import",
                    "in",
                    "instanceof",
                    "return",
                    "super",
                    "this",
                    "typeof",
                    "void",
                    "while",
                    "yield",
                )
            },
            [],
        ),
        None,
    ),
    (
        "described",
        "Line one */\n\n  * star line\n/* opener */\nlast */",
        {
            "type": OBJ,
            "properties": {"q": {"type": "string", "description": "Query */ text\nsecond line", "default": "a*/b"}},
        },
        None,
    ),
    (
        "type_arrays",
        "Type arrays.",
        {
            "type": OBJ,
            "properties": {
                "v": {"type": ["string", "number", "boolean", "null"]},
                "w": {"type": ["integer", "object"]},
                "bad": {"type": ["nonsense"]},
                "empty": {"type": []},
            },
        },
        {"type": ["string", "integer"]},
    ),
    ("booleans", "Boolean schemas.", {"type": OBJ, "properties": {"yes": True, "no": False}}, True),
    (
        "all_of",
        "allOf intersections.",
        {
            "allOf": [
                closed({"a": {"type": "string"}}),
                {"type": OBJ, "properties": {"b": {"type": "number"}}},
            ]
        },
        {"allOf": [{"type": "string"}, {"minLength": 1}]},
    ),
    (
        "tuples",
        "Tuple arrays.",
        {
            "type": OBJ,
            "properties": {
                "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]},
                "old": {"type": "array", "items": [{"type": "string"}]},
            },
        },
        {"type": "array"},
    ),
    ("deep", "Very deep.", {"type": OBJ, "properties": {"l": _DEEP}}, None),
    (
        "wide",
        "Many properties.",
        {"type": OBJ, "properties": {f"p{n}": {"type": "string"} for n in range(300)}},
        closed({f"o{n}": {"type": "integer"} for n in range(40)}),
    ),
    (
        "big_numbers",
        "Odd literals.",
        {
            "type": OBJ,
            "properties": {
                "huge": {"const": 2**80},
                "tiny": {"const": 1e-7},
                "negzero": {"const": -0.0},
                "obj": {"const": {"a": 1}},
                "arr": {"enum": [[1], [2]]},
            },
        },
        {"const": 12345678901234567890},
    ),
    (
        "both_unions",
        "anyOf and oneOf at once.",
        {
            "type": OBJ,
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        },
        {"anyOf": [{"type": "string"}], "oneOf": [{"type": "number"}]},
    ),
    (
        "required_anyof",
        "Required via anyOf.",
        {"anyOf": [closed({"x": {"type": "string"}}), closed({"y": {"type": "string"}})]},
        None,
    ),
    ("non_object_input", "String input schema.", {"type": "string"}, {"type": "null"}),
    (
        "empty_enum",
        "Degenerate enums.",
        {"type": OBJ, "properties": {"e": {"enum": []}, "n": {"enum": "x"}}},
        {"enum": [None]},
    ),
    ("never_closed", "Closed empty object.", {"type": OBJ, "additionalProperties": False}, closed({})),
    (
        "nullable_union",
        "Nullable union.",
        {
            "type": OBJ,
            "properties": {"u": {"anyOf": [{"type": "string"}, {"type": "number"}], "nullable": True}},
        },
        {"oneOf": [{"type": "string"}, {"type": "null"}], "nullable": True},
    ),
    (
        "automations",
        "Scheduler actions.",
        {
            "type": OBJ,
            "properties": {
                "action": {"type": "string", "enum": ["list", "status", "remove"]},
                "jobId": {"type": "string"},
            },
            "required": ["action"],
        },
        discriminated(
            {
                "list": closed({"jobs": {"type": "array", "items": closed({"id": {"type": "string"}})}}),
                "status": closed({"ready": {"type": "boolean"}}),
                "remove": closed({"removed": {"type": "boolean"}, "sessionCleanup": {"const": "pending"}}, ["removed"]),
            }
        ),
    ),
    (
        "process",
        "Broad selector type.",
        {"type": OBJ, "properties": {"op": {"type": "string"}}},
        discriminated(
            {
                "poll": closed({"log": {"type": "string"}}),
                "__proto__": closed({"weird": {"type": "null"}}),
                "a-b": closed({"dash": {"type": "integer"}}),
            },
            prop="op",
        ),
    ),
    (
        "odd_selector",
        "Selector with a dash.",
        {"type": OBJ, "properties": {"the-mode": {"type": "string"}}, "required": ["the-mode"]},
        discriminated(
            {"one": closed({"one": {"type": "number"}}), "two": closed({"two": {"type": "string"}})},
            prop="the-mode",
        ),
    ),
    (
        "many_actions",
        "64 small variants narrow.",
        {"type": OBJ, "properties": {"action": {"enum": ACTIONS_64}}, "required": ["action"]},
        discriminated({name: closed({f"result{n}": {"type": "integer"}}) for n, name in enumerate(ACTIONS_64)}),
    ),
    (
        "huge_actions",
        "64 large variants fall back.",
        {"type": OBJ, "properties": {"action": {"type": "string"}}, "required": ["action"]},
        discriminated({name: big_variant(n) for n, name in enumerate(ACTIONS_64)}),
    ),
    (
        "ref_variants",
        "Reference-bearing variants keep the union.",
        {"type": OBJ, "properties": {"action": {"type": "string"}}},
        {
            **discriminated({"a": {"$ref": "#/$defs/a"}, "b": closed({"b": {"type": "string"}})}),
            "$defs": {"a": closed({"a": {"type": "string"}})},
        },
    ),
    ("order_tree", "Nested and recursive pydantic models.", Order.model_json_schema(), Tree.model_json_schema()),
    ("odd_defs", "Definition names that are not identifiers.", ODD_DEFS, {"$ref": "#/definitions/x y"}),
    (
        "missing_refs",
        "References that cannot be resolved.",
        {
            "type": OBJ,
            "properties": {
                "gone": {"$ref": "#/$defs/Gone"},
                "remote": {"$ref": "https://example.com/schema.json#/$defs/A"},
                "anchor": {"$ref": "#node"},
                "dynamic": {"$dynamicRef": "#meta"},
            },
            "required": ["gone"],
        },
        {
            "$defs": {
                "A": {"anyOf": [{"$ref": "#/$defs/B"}, {"type": "null"}]},
                "B": {"$ref": "#/$defs/A"},
                "Map": {"type": OBJ, "additionalProperties": {"$ref": "#/$defs/Map"}},
                "Json": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/Json"}}]},
            },
            "type": OBJ,
            "properties": {"a": {"$ref": "#/$defs/A"}, "m": {"$ref": "#/$defs/Map"}, "j": {"$ref": "#/$defs/Json"}},
            "required": ["a", "m", "j"],
        },
    ),
    (
        "bad_annotation",
        "Malformed annotation.",
        None,
        {
            "anyOf": [{"type": "string"}],
            DISCRIMINATOR_KEY: {"version": 2, "inputProperty": "a", "mapping": {"x": 0}},
        },
    ),
]

CLIENT_TOOLS = [
    ToolDecl(
        "client_lookup",
        "A client tool with a lying schema.",
        {"type": "string"},
        {"type": "number"},
        trusted=False,
    )
]

MCP_SERVERS = [
    McpServerDecl(
        "github",
        "GitHub \u2713 server",
        (
            McpToolDecl(
                "createIssue",
                "create_issue",
                "Create an issue.\n\n\u00c9t\u00e9 */ notes",
                {
                    "type": OBJ,
                    "properties": {
                        "title": {"type": "string", "description": "Issue title\nShown in tracker"},
                        "body": {"type": "string", "default": "", "description": "Body */ text"},
                        "labels": {"type": "array", "items": {"type": "string"}},
                        "meta": {"type": OBJ, "additionalProperties": {"type": "integer"}},
                        "a-b": {"type": "string", "nullable": True},
                    },
                    "required": ["title", "body"],
                },
            ),
            McpToolDecl(
                "delete2",
                "delete",
                "Delete a thing.",
                {"type": OBJ, "properties": {"id": {"type": "string"}}, "required": ["id"]},
            ),
            McpToolDecl("default2", "default", "", None),
            McpToolDecl("listAll", "list-all", "\n".join(f"line {n}" for n in range(30)), {"type": OBJ}),
        ),
        has_resources=True,
        has_prompts=False,
    ),
    McpServerDecl(
        "constructor2",
        "constructor",
        (
            McpToolDecl(
                "prototype2",
                "prototype",
                "Proto.",
                {
                    "type": OBJ,
                    "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "number"}]}},
                    "additionalProperties": {"type": "string"},
                },
            ),
            McpToolDecl("enum2", "enum", "Enum tool.", {"anyOf": [{"type": OBJ}, {"type": "string"}]}),
            McpToolDecl("order", "order", "Pydantic input.", Order.model_json_schema()),
            McpToolDecl("tree", "tree", "Recursive root.", Tree.model_json_schema()),
        ),
        has_resources=True,
        has_prompts=True,
    ),
    McpServerDecl("docs", "docs\nwith newline \u2028 and */", (), has_resources=True, has_prompts=True),
]

USAGE = """\
async function main(): Promise<void> {
    const listed = await automations({ action: "list" });
    const ids: string[] = listed.jobs.map((job) => job.id);
    const status = await automations({ action: "status" });
    const ready: boolean = status.ready;
    const removed = await automations({ action: "remove", jobId: "j1" });
    const cleanup: "pending" | undefined = removed.sessionCleanup;
    const pick: "list" | "status" = Math.random() > 0.5 ? "list" : "status";
    const either = await automations({ action: pick });
    // @ts-expect-error a union of two branches has no common `ready`
    either.ready;
    // @ts-expect-error an action outside the input enum is rejected
    await automations({ action: "bogus" });

    const polled = await process({ op: "poll" });
    const log: string = polled.log;
    const dashed = await process({ op: "a-b" });
    const dash: number = dashed.dash;
    const broadOp: string = String(Math.random());
    const broad = await process({ op: broadOp });
    // @ts-expect-error a broad selector gives the whole union
    broad.log;
    await process();

    const one = await odd_selector({ "the-mode": "one" });
    const oneValue: number = one.one;

    const last = await many_actions({ action: "action63" });
    const result63: number = last.result63;

    const huge: unknown = await huge_actions({ action: "action1" });

    const file = await read({ path: "README.md" });
    const text: string = file.text;
    // @ts-expect-error path is required
    await read({});
    // @ts-expect-error input is required
    await read();
    await empty_input();
    await no_schema();
    await nested();
    const row = await arrays_of_objects({ rows: [{ id: 1, tags: ["a", null] }] });
    const cell: string | number = row[0][0];
    const env = await maps({ env: { A: "1" }, mixed: { fixed: 1, other: "x" } });
    const envValues: string[][] = Object.values(env);
    const weird = await weird_keys({ "a-b": "x", ["__proto__"]: "y" });
    const proto: string = weird.__proto__;
    const dashKey: number = weird["x-y"];
    const maybe = await nullable({});
    const x: number | undefined = maybe === null ? undefined : maybe.x;
    await required_anyof({ x: "1" });
    await non_object_input("text");
    await client_lookup({ anything: [1, 2, 3] });
    await client_lookup();

    const ref = await results.save({ rows: [1, 2, 3] });
    const refId: string = ref.id;
    const refBytes: number = ref.bytes;
    const loaded: unknown = await results.load(refId);
    const deleted: boolean = await results.delete(refId);
    await store("key", { a: 1 });
    const stored: unknown = await load("key");

    const root = await MCP.$api();
    const toolCount: number = root.servers[0].toolCount;
    const issue = await MCP.github.createIssue({ title: "t", body: "" });
    const isError: boolean | undefined = issue.isError;
    await MCP.github.createIssue({ title: "t", body: "", "a-b": null, meta: { n: 1 } });
    await MCP.github.delete2({ id: "1" });
    await MCP.github.default2();
    await MCP.github.listAll();
    const header = await MCP.github.$api("createIssue", { schema: true });
    const headerText: string = header.header;
    await MCP.constructor2.prototype2({ x: 1, other: "s" });
    await MCP.constructor2.enum2("s");
    await MCP.docs.resources.read({ uri: "memo://one" });
    await MCP.docs.resources.read("memo://one");
    await MCP.docs.resources.list();
    await MCP.docs.prompts.get({ name: "brief", arguments: { topic: "release" } });
    await MCP.docs.prompts.get("brief", { topic: "release" });
    // @ts-expect-error MCP tools take one object argument with the required fields
    await MCP.github.delete2();

    const address: order_tree.Address = { street: "Main St 1", city: "Berlin" };
    const grown = await order_tree({ ship_to: address, lines: [{ home: address }], tree: { value: 1, children: [] } });
    const grandchild: number = grown.children![0].children![0].value;
    // @ts-expect-error a nested model keeps its field types
    await order_tree({ ship_to: { street: 1, city: "x" }, lines: [], tree: { value: 1 } });
    // @ts-expect-error a recursive model keeps its field types at every level
    await order_tree({ ship_to: address, lines: [], tree: { value: 1, children: [{ value: "deep" }] } });
    const odd = await odd_defs({ p0: { n: 0 }, p1: { n: 1 } });
    const oddRecord: odd_defs.Record_ = { n: 4 };
    // @ts-expect-error each odd definition keeps its own constant
    await odd_defs({ p0: { n: 1 }, p1: { n: 1 } });
    const missing = await missing_refs({ gone: { anything: true } });
    const json: string | unknown[] = missing.j;
    await MCP.constructor2.order({ ship_to: address, lines: [], tree: { value: 1 } });
    await MCP.constructor2.tree({ value: 2, children: [{ value: 3 }] });
    // @ts-expect-error MCP input types follow references too
    await MCP.constructor2.tree({ value: 2, children: [{ value: "3" }] });

    void [ids, ready, cleanup, log, dash, oneValue, result63, huge, text, cell, envValues, proto, dashKey, x];
    void [grandchild, odd, oddRecord, json];
    void [refBytes, loaded, deleted, stored, toolCount, isError, headerText];
}
void main;
"""


USE_ROOT = "async function f(): Promise<number> {\n    return (await MCP.$api()).servers.length;\n}\nvoid f;\n"


def _tools() -> list[ToolDecl]:
    return [ToolDecl(name, desc, inp, out, True) for name, desc, inp, out in CORPUS] + CLIENT_TOOLS


def _all_files(table: ApiFileTable) -> dict[str, str]:
    return {path: table.read(path)["content"] for path in table.paths()}


def test_corpus_is_large_and_varied():
    """The compile corpus holds at least 30 tool schemas plus client tools and three MCP servers."""
    assert len(CORPUS) >= 30
    assert len(MCP_SERVERS) >= 3


def test_every_generated_file_compiles_together_with_usage(tsc_check):
    """All tool, results and MCP declarations compile with `tsc --strict` and type real calls."""
    files = _all_files(ApiFileTable(_tools(), MCP_SERVERS))
    assert "mcp/constructor2.d.ts" in files and "tools/weird_keys.d.ts" in files
    tsc_check({**files, "usage.ts": USAGE})


def test_each_declaration_file_compiles_alone(tsc_check):
    """Each server file, results.d.ts and each tool file is self-contained."""
    table = ApiFileTable(_tools(), MCP_SERVERS)
    files = _all_files(table)
    for path, content in files.items():
        if path == "mcp/index.d.ts":
            continue
        tsc_check({path: content})


def test_mcp_index_compiles_with_its_references(tsc_check):
    """`mcp/index.d.ts` resolves its `/// <reference>` lines against the server files."""
    files = _all_files(ApiFileTable([], MCP_SERVERS))
    assert set(files) == {
        "results.d.ts",
        "mcp/index.d.ts",
        "mcp/github.d.ts",
        "mcp/constructor2.d.ts",
        "mcp/docs.d.ts",
    }
    mcp_only = {path: text for path, text in files.items() if path.startswith("mcp/")}
    tsc_check(
        {
            **mcp_only,
            "use.ts": USE_ROOT,
        }
    )


def test_usage_that_misuses_a_narrowed_branch_fails_to_compile(tsc_run):
    """The compile check really type-checks: reading another branch's field after narrowing is an error."""
    files = _all_files(ApiFileTable(_tools(), []))
    bad = "async function m(): Promise<boolean> {\n    return (await automations({ action: 'list' })).ready;\n}\n"
    completed = tsc_run({**files, "bad.ts": bad})
    assert completed.returncode != 0
    assert "bad.ts" in completed.stdout and "ready" in completed.stdout


def test_large_discriminated_output_falls_back_within_bounds():
    """64 large variants exceed the output allowance: the file stays < 34,000 chars, `Promise<unknown>`."""
    name, desc, inp, out = next(item for item in CORPUS if item[0] == "huge_actions")
    text = render_tool_declaration(name, desc, inp, out, True)
    assert len(text) < 34_000
    assert "Promise<unknown>" in text
    assert f"exceed {TOOL_OUTPUT_MAX_CHARS} characters" in text
    assert "__Codemode_huge_actions_OutputByInput" not in text


def test_small_discriminated_output_declares_overloads():
    """64 small variants keep one type per branch, the mapping and both overloads."""
    name, desc, inp, out = next(item for item in CORPUS if item[0] == "many_actions")
    text = render_tool_declaration(name, desc, inp, out, True)
    assert "type __Codemode_many_actions_Output63 = { result63: number; };" in text
    assert '"action63": __Codemode_many_actions_Output63;' in text
    assert text.count("declare function many_actions") == 2


def test_reference_bearing_variants_keep_the_union():
    """A discriminated schema containing `$ref` keeps the umbrella declaration with a comment."""
    name, desc, inp, out = next(item for item in CORPUS if item[0] == "ref_variants")
    text = render_tool_declaration(name, desc, inp, out, True)
    assert "Reference-bearing" in text
    assert "OutputByInput" not in text
    assert text.count("declare function ref_variants(") == 1
