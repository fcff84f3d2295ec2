"""TypeScript in JavaScript cells: the type stripper on its own, then what the real engine makes of its output."""

from __future__ import annotations

import time
from typing import Any

import pytest

from bridge import jsoncodec
from guest_runtime.errors import GuestSyntaxError, GuestTimeout
from guest_runtime.quickjs import typescript
from guest_runtime.quickjs.engine import GuestEngine
from guest_runtime.quickjs.typescript import MAX_DEPTH, strip_types

MiB = 1024 * 1024


def strip(code: str) -> str:
    out = strip_types(code, time.monotonic() + 30)
    # Every byte stays where it was: the engine's lines and columns (UTF-8 bytes) point into the source.
    assert len(out.encode("utf-8", "surrogatepass")) == len(code.encode("utf-8", "surrogatepass"))
    assert len(out.encode("utf-16-le", "surrogatepass")) == len(code.encode("utf-16-le", "surrogatepass"))
    assert _line_starts(out) == _line_starts(code)
    return out


def _line_starts(text: str) -> list[int]:
    """UTF-16 offsets of the line terminators of ``text``."""
    units = text.encode("utf-16-le", "surrogatepass")
    return [i for i in range(0, len(units), 2) if units[i : i + 2].decode("utf-16-le", "replace") in "\n\r\u2028\u2029"]


def _engine() -> GuestEngine:
    engine = GuestEngine()
    engine.configure(jsoncodec.dumps_text({"tools": [], "mcp": [], "maxRequestBytes": MiB}), 32 * MiB)
    return engine


def run(code: str) -> Any:
    """The value of ``code`` as a cell of the real engine (compile strips its types)."""
    engine = _engine()
    engine.compile(code, 5.0)
    deadline = time.monotonic() + 5.0
    engine.call_cell(deadline)
    engine.pump(deadline)
    done = engine.take()["done"]
    assert done == {"ok": True}, done
    return jsoncodec.loads(engine.final_value(MiB, deadline))


def refusal(code: str) -> str:
    with pytest.raises(GuestSyntaxError) as caught:
        strip_types(code, time.monotonic() + 30)
    return str(caught.value)


# ---- what is blanked -------------------------------------------------------------------------------

ERASED = [
    ("const x: number = 1", "const x         = 1"),
    ("let y!: string", "let y         "),
    ("return await f<Bar>({ a: 1 }) as Baz", "return await f     ({ a: 1 })       "),
    ("f(x!)", "f(x )"),
    ("a!.b!.c", "a .b .c"),
    ("x = y as unknown as string[]", "x = y                       "),
    ("ok(v satisfies T)", "ok(v            )"),
    ("let a = b as const", "let a = b         "),
    ("let v = <T>x", "let v =    x"),
    ("let g = f<string>;", "let g = f        ;"),
    ("function f<T>(a: T, b?: number): T { return a }", "function f   (a   , b         )    { return a }"),
    ("function f(this: Foo, a) {}", "function f(           a) {}"),
    ("function g(this: Foo) {}", "function g(         ) {}"),
    ("function h(a): asserts a is string {}", "function h(a)                      {}"),
    ("const is = (a): a is number => true", "const is = (a)              => true"),
    ("const f = async <T,>(x: T): Promise<T> => x", "const f = async     (x   )             => x"),
    ("try {} catch (e: unknown) {}", "try {} catch (e         ) {}"),
    ("let { a }: { a: number } = o", "let { a }                = o"),
    ("const o = { m<T>(x: T): T { return x } }", "const o = { m   (x   )    { return x } }"),
    ("for (const x of xs as number[]) {}", "for (const x of xs            ) {}"),
    # Declarations that are only types become an empty statement (the `;`) and blanks.
    ("interface A { x: number }", ";                        "),
    ("type B = A | null", ";                "),
    ("declare const g: number;", ";                       "),
    ("declare namespace N { const y: number }", ";                                      "),
    ("function o(x: string): void;", ";                           "),
    ("namespace T { export interface X {} }", ";                                    "),
    ("declare enum E { A }", ";                   "),
    # Classes: modifiers, fields and members that are only types, heritage that is only types.
    ("abstract class Q<T> extends B<T> implements I {}", "         class Q    extends B                 {}"),
    (
        "class A { private x = 1; readonly y!: number; declare z: string; m?(): void {} }",
        "class A { ;       x = 1; ;        y         ; ;                ; m ()       {} }",
    ),
    (
        "class A { abstract q(): void; [k: string]: any; f(x: string): void; f(x) {} override g() {} }",
        "class A { ;                 ; ;               ; ;                 ; f(x) {} ;        g() {} }",
    ),
    ("class A { static readonly w = 2 }", "class A { static          w = 2 }"),
]


@pytest.mark.parametrize(("source", "blanked"), ERASED)
def test_type_syntax_is_blanked_in_place(source: str, blanked: str):
    """Each piece of type syntax becomes spaces of its own size; the JavaScript around it is untouched."""
    assert strip(source) == blanked


JAVASCRIPT = [
    "return 1",
    "const t = a ? (b) : c => d",
    "const u = a ? (b) : (c) => d",
    "if (a < b && c > d) {}",
    "let x = a < b, y = c > (d)",
    "label: for (;;) { break label }",
    "const o = { a: 1, 'b': [2, 3], [k]: v, ...rest }",
    "const r = /[a-z]+<T>/g.test(s) ? `${a}: ${b}` : null",
    "x = a < b ? c : d > (e)",
    "class C extends D { #p = 1; static s = 2; get v() { return this.#p } }",
    "async function* g() { for await (const x of xs) yield x }",
    "const { a = 1, b: [c] } = obj; const f = (x = 1, ...ys) => x ?? ys",
    "// a: comment <T>\n/* interface X {} */ return a?.b?.[c]?.(d)",
]


@pytest.mark.parametrize("source", JAVASCRIPT)
def test_javascript_without_types_comes_back_unchanged(source: str):
    """Plain JavaScript (comparisons, ternaries, labels, regexes, classes) is returned as it came."""
    assert strip(source) == source


def test_multibyte_characters_inside_types_keep_every_byte_and_utf16_offset():
    """A type holding é (2 bytes), → (3) and 😀 (4) blanks to whitespace of the same sizes in UTF-8 and UTF-16."""
    source = 'let s: "é→😀" = "x"\ns.x.y'
    out = strip(source)
    assert out == 'let s   \u00a0\u2002\u00a0\u00a0  = "x"\ns.x.y'


def test_line_terminators_inside_types_stay():
    """A type spanning lines (\\n, \\r\\n, U+2028) keeps its line terminators, so every later line keeps its number."""
    source = "let t: {\r\n  a: number,\u2028  b: string\n} = { a: 1, b: 'x' }"
    assert strip(source) == "let t   \r\n            \u2028           \n  = { a: 1, b: 'x' }"


# ---- where blanking alone would read differently from TypeScript ---------------------------------------


def test_a_cast_ending_a_line_ends_its_statement_as_typescript_reads_it():
    """`a = b as T` then `(c)` on the next line: TypeScript ends the statement (ASI), so the cast's first byte is `;`."""
    assert strip("a = b as T\n(c)") == "a = b ;   \n(c)"
    assert strip("a = b as T /* why */\n(c)") == "a = b ;    /* why */\n(c)"
    # `+` continues the expression in TypeScript too: no `;`.
    assert strip("a = b as T\n+ c") == "a = b     \n+ c"
    assert run("let a; const b = 1; const c = 2\na = b as number\n(c)\nreturn a") == 1


def test_a_declaration_that_is_only_types_keeps_the_lines_around_it_apart():
    """Without its `;`, `let x = 1` then a blanked interface then `(…)()` would call 1."""
    assert run("let x = 1\ninterface A { a: number }\n(() => { x = 2 })()\nreturn x") == 2


def test_a_class_member_losing_its_modifier_starts_a_new_member():
    """`x = a` then `private [k] = 1`: without the `;` the blanked member would read `x = a[k] = 1`."""
    out = strip("class B { x = a\n  private [k] = 1 }")
    assert out == "class B { x = a\n  ;       [k] = 1 }"
    assert run("const a = {}; const k = 'k'\nclass B { x = a\n  private [k] = 1 }\nreturn new B()") == {"x": {}, "k": 1}


def test_an_arrow_return_type_spanning_lines_moves_its_paren_to_the_arrow_line():
    """`=>` may not follow a line break: the `)` moves to the line of `=>`, its only byte that moves."""
    assert strip("const f = (a):\n  number => a") == "const f = (a  \n)        => a"
    assert run("const f = (a: number):\n  number => a + 1\nreturn f(1)") == 2


def test_typed_code_runs_as_typescript_means_it():
    """Generics, classes with modifiers, overloads, casts and non-null assertions run in the real engine."""
    code = """
interface Flight { id: string; price: number; stops?: number }
type Pick2 = Pick<Flight, "id" | "price">
abstract class Base<T> { abstract name(): string; describe(): string { return `${this.name()}` } }
class Cheapest extends Base<Flight> implements Iterable<number> {
  private readonly flights: Flight[]
  static readonly label: string = "cheapest"
  declare note: string
  constructor(flights: Flight[]) { super(); this.flights = flights }
  name(): string { return Cheapest.label }
  pick(): Pick2 | undefined { return [...this.flights].sort((a, b) => a.price - b.price)[0]! }
  *[Symbol.iterator](): Iterator<number> { for (const f of this.flights) yield f.price }
}
function total(items: Iterable<number>): number;
function total(items: any): number { let s: number = 0; for (const n of items) s += n as number; return s }
const c = new Cheapest([{ id: "a", price: 3 }, { id: "b", price: 2 }] satisfies Flight[])
return { name: c.describe(), pick: c.pick()!.id, total: total(c), generic: ((x: number) => x)<number>(4) }
"""
    assert run(code) == {"name": "cheapest", "pick": "b", "total": 5, "generic": 4}


def test_a_generic_call_reads_as_typescript_not_as_two_comparisons():
    """`f<T>(x)` is a call with a type argument (TypeScript's reading), as in every TypeScript cell."""
    assert run("const f = (x) => x * 2; const T = 1\nreturn f<T>(21)") == 42


# ---- what is refused -------------------------------------------------------------------------------------

REFUSED = [
    ("enum Color { Red, Green }", "1:1", "TypeScript enum is not supported"),
    ("const a = 1\nconst enum E { A }", "2:1", "TypeScript enum is not supported"),
    ("namespace N { export const x = 1 }", "1:1", "TypeScript namespace with values is not supported"),
    ("module M { const y = 2 }", "1:1", "TypeScript namespace with values is not supported"),
    ("class P {\n  constructor(private p: number) {} }", "2:15", "TypeScript parameter property is not supported"),
    ("class P { constructor(readonly p) {} }", "1:23", "TypeScript parameter property is not supported"),
    ('import fs = require("fs")', "1:8", "TypeScript `import … = require(…)` is not supported"),
    ("return <T\n>x", "1:8", "TypeScript `<T>` type assertion spanning lines is not supported"),
]


@pytest.mark.parametrize(("source", "where", "what"), REFUSED)
def test_constructs_that_need_a_transform_are_refused_naming_the_construct_and_its_place(
    source: str, where: str, what: str
):
    """Enums, namespaces with values, parameter properties, `import =` need code written for them: refused."""
    message = refusal(source)
    assert message.startswith(f"SyntaxError at cell.js:{where}: {what}: it needs a transform"), message
    assert "No tools were dispatched" in message


def test_a_construct_inside_a_declare_block_is_erased_not_refused():
    """`declare` makes everything inside it a type: an enum or namespace there needs no transform."""
    assert strip("declare enum E { A }\ndeclare namespace N { const x: number }").startswith(";")


# ---- sources tree-sitter cannot parse -------------------------------------------------------------------


def test_a_syntax_error_keeps_its_position_for_the_engine_to_report():
    """The statements before the one that holds the error are stripped; the engine names the error's own place."""
    engine = _engine()
    with pytest.raises(GuestSyntaxError) as caught:
        engine.compile("const x: number = 1\nconst y = ;\nconst z: string = 'z'", 5.0)
    assert str(caught.value).startswith("SyntaxError at cell.js:2:11:"), str(caught.value)


def test_past_a_syntax_error_the_source_goes_to_the_engine_as_written():
    """The statement that holds the error, and all after it, keep their types: the parser's reading there
    is a guess. Even a flat stretch of 40,000 stray tokens (whose query would take quadratic time) costs one
    parse of the statements before it."""
    source = "const a: number = 1\nconst b: string = (" + "(" * 40_000
    assert strip(source) == "const a         = 1\nconst b: string = (" + "(" * 40_000
    assert strip("let s: string = 'abc") == "let s: string = 'abc"


def test_a_runtime_error_after_types_names_the_column_the_caller_wrote():
    """Stack frames count the source the caller sent: blanked types move nothing on the line."""
    engine = _engine()
    typed = 'const s: Record<string, "é"> = {}\nconst v = (s as any).a.b as number; throw new Error("x")'
    plain = 'const s                  \u00a0   = {}\nconst v = (s       ).a.b          ; throw new Error("x")'
    assert strip(typed) == plain
    engine.compile(typed, 5.0)
    deadline = time.monotonic() + 5.0
    engine.call_cell(deadline)
    engine.pump(deadline)
    error = engine.take()["done"]["error"]
    assert error.startswith("TypeError: cannot read property 'b' of undefined"), error
    column = typed.split("\n")[1].index("s as any") + 1  # where the engine points: the object read from
    assert f"<input>:4:{column}" in error, error  # cell line 2 (the wrapper's two lines come first)


# ---- hostile sources ----------------------------------------------------------------------------------


def test_deep_nesting_within_the_limit_is_stripped():
    """10,000 nested parentheses around a cast: a linear parse and query, blanked like any other."""
    source = "(" * 10_000 + "x as T" + ")" * 10_000
    assert strip(source) == "(" * 10_000 + "x     " + ")" * 10_000


@pytest.mark.parametrize(
    "source",
    [
        "let x: " + "A<" * (MAX_DEPTH // 2 + 10) + "B" + ">" * (MAX_DEPTH // 2 + 10) + " = 1",
        "x" + "!" * (MAX_DEPTH + 10),
    ],
    ids=["nested generics", "non-null chain"],
)
def test_a_tree_deeper_than_the_limit_is_refused_as_invalid_input(source: str):
    """Past MAX_DEPTH levels the query cursor slows down superlinearly: such a tree is refused, with its place."""
    message = refusal(source)
    assert f"nests deeper than {MAX_DEPTH:,} levels" in message, message


def test_a_source_past_its_deadline_stops_with_a_timeout():
    """The parse gives up at the cell's deadline (its progress callback): the cell ends as a timeout."""
    source = "let x: = ; ) ( " * 20_000  # error recovery: the slowest parse per byte
    with pytest.raises(GuestTimeout):
        strip_types(source, time.monotonic() - 1)


def test_a_parse_stopped_at_its_deadline_leaves_nothing_for_the_next_cell():
    """The parser forgets a stopped parse (it would resume it on the next call, with the next cell's source)."""
    with pytest.raises(GuestTimeout):
        strip_types("let x: = ; ) ( " * 20_000, time.monotonic() - 1)
    assert strip("const y: number = 2") == "const y         = 2"


def test_the_query_reads_the_clock_between_slices(monkeypatch: pytest.MonkeyPatch):
    """A source past one slice checks the deadline between slices, after a parse that finished in time."""
    readings = iter([0.0] * 1000 + [100.0] * 1000)
    monkeypatch.setattr(typescript.time, "monotonic", lambda: next(readings))
    source = "a as T;\n" * (typescript._CHUNK_BYTES // 8 + 1000)
    with pytest.raises(GuestTimeout):
        strip_types(source, 50.0)


# ---- which sources meet the TypeScript parser at all (read_cell) ---------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "const a = [1, 2].map((x) => x * 2); return a.length > 1 ? a : null",
        "let n = 0; for (let i = 0; i < 10; i++) n += i; return n > 3 ? [n] : null",
        "return 1 < 2",
        "const xs = [3, 1]; return xs.filter((x) => x < 2).map((x) => ({ x })).map(x => (x))",
    ],
)
def test_javascript_that_reads_the_same_never_meets_the_parser(monkeypatch: pytest.MonkeyPatch, source: str):
    """Valid JavaScript with no `<` followed by a `>` and a call or template is compiled as sent, unparsed."""

    def refuse(code: str, deadline: float) -> str:
        raise AssertionError(f"parsed: {code!r}")

    monkeypatch.setattr(typescript, "strip_types", refuse)
    _engine().compile(source, 5.0)


@pytest.mark.parametrize("source", ["const f = (x) => x; const T = 1\nreturn f<T>(2)", "return a < b > (c)", "t<T>`x`"])
def test_javascript_that_typescript_reads_as_a_call_with_type_arguments_meets_the_parser(
    monkeypatch: pytest.MonkeyPatch, source: str
):
    """A `<`, a `>`, then `(` or a template: TypeScript may read a call with type arguments there."""

    def refuse(code: str, deadline: float) -> str:
        raise AssertionError("parsed")

    monkeypatch.setattr(typescript, "strip_types", refuse)
    with pytest.raises(AssertionError, match="parsed"):
        _engine().compile(source, 5.0)


@pytest.mark.parametrize(
    "source",
    [
        "x=1;" + "'\\u0041" * 100_000,  # not JavaScript, and tree-sitter's error recovery is slow over it
        "x=1;" + "[/" * 400_000,  # an unclosed regex on one line: tree-sitter lexes it in quadratic time
        "ls " + "a " * 500_000,
    ],
    ids=["garbage", "unclosed regex", "shell"],
)
def test_a_long_source_that_is_neither_language_gets_the_engines_error_without_a_full_reading(
    monkeypatch: pytest.MonkeyPatch, source: str
):
    """The engine's error comes back after at most one parse of a window past where the engine stopped."""
    parsed: list[int] = []
    parse = typescript._parse
    monkeypatch.setattr(typescript, "_parse", lambda view, deadline: parsed.append(len(view)) or parse(view, deadline))
    with pytest.raises(GuestSyntaxError) as caught:
        _engine().compile(source, 30.0)
    assert str(caught.value).startswith("SyntaxError at cell.js:1:"), str(caught.value)
    assert all(n <= 100 + typescript._WINDOW_BYTES for n in parsed), parsed


def test_a_long_typescript_source_is_read_whole():
    """Past the window a long typed source parses cleanly: it is read whole, and runs."""
    source = "const xs: number[] = [1];\n" + "xs[0] = (xs[0]! + 1) as number;\n" * 5_000 + "return xs[0]"
    assert len(source) > 2 * typescript._WINDOW_BYTES
    assert run(source) == 5001


def test_a_source_that_is_not_javascript_still_ends_at_the_cells_own_deadline():
    """The reading budget is capped by the cell's deadline: a cell out of time ends as a timeout."""

    def not_javascript(code: str) -> None:  # what the engine answers this source, at once
        raise GuestSyntaxError("SyntaxError at cell.js:1:7: unexpected token ':'")

    with pytest.raises(GuestTimeout):
        typescript.read_cell("let x: = ; ) ( " * 20_000, time.monotonic() - 1, not_javascript)
