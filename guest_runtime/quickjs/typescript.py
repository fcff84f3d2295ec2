"""TypeScript in JavaScript cells: type syntax blanked in place before QuickJS compiles the cell.

A JavaScript cell may be written in TypeScript.  ``strip_types`` parses it with tree-sitter's
TypeScript grammar (PyPI ``tree-sitter`` and ``tree-sitter-typescript``; this module is their one
importer) and overwrites every piece of type syntax with whitespace of the same size: each ASCII
byte becomes a space, a 2-byte UTF-8 character U+00A0, a 3-byte one U+2002, a 4-byte one two
U+00A0, and line terminators stay.  So every byte offset, line and UTF-16 column is unchanged, and
the engine's error positions and stack frames point into the source the caller wrote.

What cannot be erased (enums, namespaces with values, parameter properties, ``import x =
require()``) needs a transform, and is refused with an ``invalid_input`` that names the construct
and its position, as Node's type stripping does.  Erasure follows TypeScript's reading where
blanking alone would change it:

* ``x as T`` / ``x satisfies T`` ending a line whose next line starts with ``(``, ``[`` or a
  template: TypeScript ends the statement there, so the first blanked byte becomes ``;``;
* a declaration that is only types (``interface``, ``type``, ``declare …``, an overload, a class
  member that is only a type) becomes ``;`` and spaces, so the lines around it cannot run together;
* an arrow function's return type that spans lines: ``=>`` must stay on the line of the ``)``
  before it, so the ``)`` moves to that line (its only byte that moves).

Which sources meet the parser at all, and what a source it cannot parse gets, is ``read_cell``'s
business: JavaScript that means the same in TypeScript is compiled as sent; past a syntax error only the
whole statements before it are stripped, and the engine reports the error where it is.

Hostile input: the parser and its query are native code that never recurse on the input's nesting;
the parse gives up at the cell's deadline (its progress callback), the query runs over 64 KiB slices
with the clock read between them, and a tree deeper than ``MAX_DEPTH`` is refused, so a pathological
source costs its own cell time and ends as a timeout or an ``invalid_input``.  The parser's memory is
the worker process's (outside the engine's heap cap): a few hundred MiB at most for the largest cell
the API takes, which the driver hands back to the kernel after a large source.

Where tree-sitter's grammar reads otherwise than TypeScript: a line that starts with ``[`` after
``x as T`` is read as part of the type (``T[...]``), where TypeScript starts a new statement; such a
statement needs its ``;``.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal, NoReturn, TypeVar

import tree_sitter_typescript
from tree_sitter import Language, Node, Parser, Point, Query, QueryCursor, Tree

from ..errors import GuestSyntaxError, GuestTimeout

_Compiled = TypeVar("_Compiled")

_LANGUAGE = Language(tree_sitter_typescript.language_typescript())

#: Each pattern's captures, by kind: ``type`` is blanked, ``declaration`` is blanked and starts with
#: ``;``, ``cast`` is blanked from the keyword to the end of its expression, the others are below.
_PATTERNS = """
[(interface_declaration) (type_alias_declaration) (ambient_declaration) (function_signature)
 (abstract_method_signature) (index_signature) (method_signature)] @declaration
(public_field_definition ["declare" "abstract"]) @declaration
[(internal_module) (module)] @namespace
[(type_annotation) (type_arguments) (type_parameters) (type_predicate_annotation) (asserts_annotation)
 (implements_clause)] @type
(optional_parameter "?" @type)
(public_field_definition ["?" "!"] @type)
(method_definition "?" @type)
(variable_declarator "!" @type)
(non_null_expression "!" @type)
(abstract_class_declaration "abstract" @type)
(_ [(accessibility_modifier) (override_modifier) "readonly"] @modifier) @member
(arrow_function parameters: (formal_parameters) @parameters return_type: (_) @arrow_return)
(type_assertion (type_arguments) @assertion)
(as_expression "as" @cast) @expression
(satisfies_expression "satisfies" @cast) @expression
(formal_parameters (required_parameter pattern: (this)) @this_parameter . ","? @comma)
(enum_declaration) @enum
(import_require_clause) @import_require
"""
_QUERY = Query(_LANGUAGE, _PATTERNS)
_PARSER = Parser(_LANGUAGE)

#: Class members and parameters: a modifier that begins one of the first gets a ``;`` (see ``_edits``);
#: on one of the others it makes a parameter property.
_PARAMETERS = frozenset(("required_parameter", "optional_parameter"))
#: What a namespace may hold and still be only types (it is then erased like an interface).
_TYPE_ONLY = frozenset(("interface_declaration", "type_alias_declaration", "ambient_declaration", "comment"))

_REFUSED = {
    "enum": ("enum", "use a plain object (`const Color = { Red: 0, Green: 1 } as const`)"),
    "namespace": ("namespace with values", "use a plain object, or keep only types in the namespace"),
    "import_require": ("`import … = require(…)`", "modules are not available in cells"),
    "parameter_property": (
        "parameter property",
        "declare the field in the class body and assign it in the constructor",
    ),
    "assertion": ("`<T>` type assertion spanning lines", "write `value as T`"),
    "arrow_return": ("arrow function return type spanning lines", "put it on the line of `=>`"),
}

#: Whitespace and comments after a ``x as T``, and the character after them if it starts a new
#: statement in TypeScript (possessive: the scan never backtracks over a long run of blanks).
_AFTER_CAST = re.compile(rb"(?:\s|//[^\n\r]*+|/\*(?:[^*]|\*(?!/))*+\*/)*+([(\[`])?")
_LINE_BREAK = re.compile(rb"[\n\r]|\xe2\x80[\xa8\xa9]")
#: Bytes of one non-ASCII character of UTF-8 (or a lone surrogate, written "surrogatepass").
_WIDE = re.compile(rb"[\xc0-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf7][\x80-\xbf]{3}")
#: The same size in UTF-8 and in UTF-16; U+2028 and U+2029 are line terminators, kept like "\n".
_SAME_SIZE_BLANK = {2: "\u00a0".encode(), 3: "\u2002".encode(), 4: "\u00a0\u00a0".encode()}
_LINE_TERMINATORS = frozenset(("\u2028".encode(), "\u2029".encode()))
_ASCII_BLANK = bytes(b if b in b"\n\r" else 0x20 for b in range(128)) + bytes(range(128, 256))

#: A match's kind is its first capture in this order (the one it is sorted by); at one span, the
#: earlier kind wins (an arrow's return type is a ``type`` match too, and moves its ``)``).
_KINDS = (
    "arrow_return",
    "declaration",
    "namespace",
    "enum",
    "import_require",
    "this_parameter",
    "assertion",
    "cast",
    "modifier",
    "type",
)
#: Syntax trees deeper than this are refused (``_check_depth``): the query cursor slows down
#: superlinearly past 2**15 levels, and is told to start no match deeper than this.  QuickJS itself
#: stops at about 2,000 levels of nested expressions, so only long flat chains (``a + b + …``, a
#: tree-sitter level per operand) come near it.
MAX_DEPTH = 20_000
#: How far past the place the engine stopped tree-sitter reads a long source before it is read whole.
_WINDOW_BYTES = 64 * 1024
#: Errors of the engine's tokenizer and stack (the pinned quickjs-ng's texts), which no erased type fixes.
_ENGINE_TOKEN_ERRORS = (
    "unexpected end of string",
    "unexpected end of regexp",
    "unexpected line terminator in regexp",
    "unexpected end of comment",
    "Invalid Unicode escape sequence",
    "invalid escape sequence",
    "invalid number literal",
    "Maximum call stack size exceeded",
)
#: A ``>`` (not of ``=>`` or ``>>``) that a call's ``(`` or a tagged template follows (possessive: one pass
#: over any run of blanks).
_CALL_AFTER_ANGLE = re.compile(r"(?<![=>])>\s*+[(`]")
_ENGINE_ERROR_AT = re.compile(r"at cell\.js:(\d+):(\d+):")
#: The query runs over slices of this many bytes of the source.
_CHUNK_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class _Edit:
    start: int
    end: int
    #: Written over the first blanked byte (``;``), or at ``paren`` (``)``); nothing when empty.
    head: bytes = b""
    paren: int = -1


def read_cell(code: str, deadline: float, compile: Callable[[str], _Compiled]) -> _Compiled:
    """``compile(code)``, with ``code``'s TypeScript types blanked where TypeScript reads it differently.

    ``compile`` raises GuestSyntaxError for a source that is not JavaScript.  JavaScript means the same
    in TypeScript unless it holds a ``<`` that a ``>`` and then a ``(`` or a template follow (the only
    type syntax that is also JavaScript is a call with type arguments, ``f<T>(x)``, ``new C<T>(x)``,
    ``` tag<T>`x` ```), so most JavaScript cells never meet the TypeScript parser.  A source that is not
    JavaScript is read as TypeScript unless that cannot help (``_typescript_may_help``): then it gets the
    engine's own error at once.
    """
    try:
        compiled = compile(code)
    except GuestSyntaxError as not_javascript:
        if not _typescript_may_help(code, str(not_javascript), deadline):
            raise
        stripped = strip_types(code, deadline)
        if stripped == code:
            raise
        return compile(stripped)
    if not _may_read_differently(code):
        return compiled
    try:
        stripped = strip_types(code, deadline)
    except GuestSyntaxError:  # too deep to read as TypeScript: it is JavaScript
        return compiled
    return compiled if stripped == code else compile(stripped)


def _may_read_differently(javascript: str) -> bool:
    """Whether TypeScript may read this JavaScript otherwise: a ``<``, later a ``>`` then ``(`` or a template."""
    first = javascript.find("<")
    return first >= 0 and _CALL_AFTER_ANGLE.search(javascript, first) is not None


def _typescript_may_help(code: str, engine_error: str, deadline: float) -> bool:
    """Whether reading a source the engine refused as TypeScript may let it compile.

    Not if the engine stopped in its tokenizer (an unclosed string, comment or regular expression:
    type syntax is made of JavaScript's tokens) or its stack; not if tree-sitter too fails to parse the
    source well before the end of a window of ``_WINDOW_BYTES`` past the place the engine stopped.  A
    long source that is neither language (pasted garbage, a missing quote) so costs one parse of that
    window, not tree-sitter's error recovery over all of it (ten microseconds a byte, and quadratic
    over an unclosed regular expression on one long line).
    """
    if any(text in engine_error for text in _ENGINE_TOKEN_ERRORS):
        return False
    source = code.encode("utf-8", "surrogatepass")
    at = _ENGINE_ERROR_AT.search(engine_error)
    line, column = (int(at.group(1)), int(at.group(2))) if at else (1, 1)
    starts = [0] + [m.end() for m in itertools.islice(re.finditer(rb"\n", source), line - 1)]
    window = starts[-1] + column + _WINDOW_BYTES
    if window >= len(source):
        return True  # a short source: reading it all costs no more than the window would
    root = _parse(memoryview(source)[:window], deadline).root_node
    # The cut makes an error at the window's end; one well before it is the source's own.
    return _first_error(root) >= window - _WINDOW_BYTES // 2


def strip_types(code: str, deadline: float) -> str:
    """``code`` with its TypeScript types blanked (the same text if it has none).

    Raises GuestSyntaxError for a construct that needs a transform, GuestTimeout past ``deadline``
    (a ``time.monotonic()``).
    """
    source = code.encode("utf-8", "surrogatepass")
    root = _parse(memoryview(source), deadline).root_node
    if root.has_error:
        # Past a syntax error the parser's reading is a guess (and its query can take quadratic time
        # over a wide stretch of error recovery): the whole statements before the one that holds the
        # first error are read again on their own, the rest goes to the engine as written, and the
        # engine reports the error where it is.
        end = _statements_before_error(root, deadline)
        root = _parse(memoryview(source)[:end], deadline).root_node
        if end == 0 or root.has_error:
            return code
    if root.descendant_count > MAX_DEPTH:  # else the tree cannot be that deep
        _check_depth(root, deadline)
    edits = list(_edits(root, source, deadline))
    return _apply(source, edits).decode("utf-8", "surrogatepass") if edits else code


def _parse(source: memoryview, deadline: float) -> Tree:
    """The syntax tree of ``source``; GuestTimeout past ``deadline``."""
    try:
        return _PARSER.parse(
            lambda offset, _point: source[offset:],
            progress_callback=lambda _offset, _has_error: time.monotonic() > deadline,
        )
    except ValueError:  # the binding's word for a parse its progress callback stopped
        _PARSER.reset()  # else the next parse would resume this one
        raise GuestTimeout("cell timeout exceeded") from None


def _statements_before_error(root: Node, deadline: float) -> int:
    """Where the top-level statement that holds a tree's first syntax error starts."""
    cursor = root.walk()
    more = cursor.goto_first_child()
    steps = 0
    while more:
        node = cursor.node
        # A stray token at the top (no statement around it) is the parser's error recovery too.
        if node is None or node.has_error or node.is_missing or not node.is_named:
            return 0 if node is None else node.start_byte
        steps += 1
        if steps % 65536 == 0 and time.monotonic() > deadline:
            raise GuestTimeout("cell timeout exceeded")
        more = cursor.goto_next_sibling()
    return root.end_byte


def _edits(root: Node, source: bytes, deadline: float) -> Iterator[_Edit]:
    """The edits of the tree's matches, in order."""
    cursor = QueryCursor(_QUERY)
    cursor.set_max_start_depth(MAX_DEPTH)
    covered = 0  # the end of the last span blanked: matches inside it are gone already
    # One slice of the source at a time: the matches held at once, and the time between two readings
    # of the clock, stay bounded whatever the source holds.  (Not the cursor's own progress callback:
    # the pinned binding hands the C library a pointer to options that live on its stack only while it
    # sets the query up, and the first callback after that crashed the process.)
    for chunk in range(0, root.end_byte, _CHUNK_BYTES):
        if time.monotonic() > deadline:
            raise GuestTimeout("cell timeout exceeded")
        cursor.set_byte_range(chunk, chunk + _CHUNK_BYTES)
        found = []
        for index, (_pattern, captures) in enumerate(cursor.matches(root, _no_predicate)):
            kind = next(k for k in _KINDS if k in captures)
            node = captures[kind][0]
            if node.start_byte >= chunk:  # one that starts before the slice was met in an earlier one
                # At one start, the longer span first (it swallows the others), then the kind that must win.
                found.append((node.start_byte, -node.end_byte, _KINDS.index(kind), index, kind, captures))
        found.sort()
        for start, _end, _rank, _index, kind, captures in found:
            if start >= covered:
                edit = _EDITS[kind](captures[kind][0], captures, source)
                covered = edit.end
                yield edit


def _first_error(root: Node) -> int:
    """Where a tree's first ERROR or MISSING node starts (the end of the source if it has none)."""
    node = root
    while node.has_error and not (node.is_error or node.is_missing):
        cursor = node.walk()
        more = cursor.goto_first_child()
        while more and cursor.node is not None and not cursor.node.has_error and not cursor.node.is_missing:
            more = cursor.goto_next_sibling()
        if not more or cursor.node is None:
            break
        node = cursor.node
    return node.start_byte if node.has_error or node.is_missing else root.end_byte


def _check_depth(root: Node, deadline: float) -> None:
    """Refuse a tree deeper than MAX_DEPTH (a walk over every node, at a few hundred ns each)."""
    cursor = root.walk()
    depth = steps = 0
    while True:
        steps += 1
        if steps % 65536 == 0 and time.monotonic() > deadline:
            raise GuestTimeout("cell timeout exceeded")
        if cursor.goto_first_child():
            depth += 1
            if depth > MAX_DEPTH:
                where = _where(root.start_point if cursor.node is None else cursor.node.start_point)
                raise GuestSyntaxError(
                    f"SyntaxError at cell.js:{where}: the cell's syntax nests deeper "
                    f"than {MAX_DEPTH:,} levels. No tools were dispatched; split the expression and submit it again."
                )
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return
            depth -= 1


def _no_predicate(
    predicate: str,
    args: list[tuple[str, Literal["capture", "string"]]],
    pattern_index: int,
    captures: dict[str, list[Node]],
) -> bool:
    return True  # the patterns have no predicates; the binding wants a callable all the same


_Captures = dict[str, list[Node]]


def _type(node: Node, _captures: _Captures, _source: bytes) -> _Edit:
    return _Edit(node.start_byte, node.end_byte)


def _declaration(node: Node, _captures: _Captures, _source: bytes) -> _Edit:
    return _Edit(node.start_byte, node.end_byte, head=b";")


def _namespace(node: Node, captures: _Captures, source: bytes) -> _Edit:
    if not _only_types(node):
        _refuse("namespace", node)
    return _declaration(node, captures, source)


def _refused(kind: str) -> Callable[[Node, _Captures, bytes], _Edit]:
    def refuse(node: Node, _captures: _Captures, _source: bytes) -> _Edit:
        _refuse(kind, node)

    return refuse


def _modifier(node: Node, captures: _Captures, _source: bytes) -> _Edit:
    member = captures["member"][0]
    if member.type in _PARAMETERS:
        _refuse("parameter_property", member)
    # A member that loses its first word starts a new member on its own (`x = a` then `[k] = 1`).
    return _Edit(node.start_byte, node.end_byte, head=b";" if node.start_byte == member.start_byte else b"")


def _cast(node: Node, captures: _Captures, source: bytes) -> _Edit:
    """`x as T`: from the keyword to the end of the expression; a `;` first if TypeScript ends the statement."""
    end = captures["expression"][0].end_byte
    following = _AFTER_CAST.match(source, end)
    new_statement = (
        following is not None
        and following.group(1) is not None
        and _LINE_BREAK.search(source, end, following.start(1)) is not None
    )
    return _Edit(node.start_byte, end, head=b";" if new_statement else b"")


def _this_parameter(node: Node, captures: _Captures, _source: bytes) -> _Edit:
    comma = captures.get("comma")
    return _Edit(node.start_byte, comma[0].end_byte if comma else node.end_byte)


def _assertion(node: Node, captures: _Captures, source: bytes) -> _Edit:
    if _LINE_BREAK.search(source, node.start_byte, node.end_byte):
        _refuse("assertion", node)  # `return <T>` then a line break would return undefined
    return _type(node, captures, source)


def _arrow_return(node: Node, captures: _Captures, source: bytes) -> _Edit:
    """`(a): T => a`; with a line break inside `: T`, the `)` moves to T's last line."""
    breaks = list(_LINE_BREAK.finditer(source, node.start_byte, node.end_byte))
    if not breaks:
        return _type(node, captures, source)
    paren = breaks[-1].end()
    if source[paren] >= 0x80:  # no room for a one-byte `)` there
        _refuse("arrow_return", node)
    return _Edit(captures["parameters"][0].end_byte - 1, node.end_byte, paren=paren)


#: The edit of each kind of match (``_KINDS``), from the node the match is sorted by.
_EDITS: dict[str, Callable[[Node, _Captures, bytes], _Edit]] = {
    "arrow_return": _arrow_return,
    "declaration": _declaration,
    "namespace": _namespace,
    "enum": _refused("enum"),
    "import_require": _refused("import_require"),
    "this_parameter": _this_parameter,
    "assertion": _assertion,
    "cast": _cast,
    "modifier": _modifier,
    "type": _type,
}


def _only_types(namespace: Node) -> bool:
    """Whether a namespace (and every namespace in it) holds only types."""
    pending = [namespace]
    while pending:
        body = pending.pop().child_by_field_name("body")
        for statement in body.named_children if body is not None else ():
            if statement.type == "export_statement":
                statement = statement.child_by_field_name("declaration") or statement
            if statement.type == "expression_statement" and statement.named_child_count == 1:
                inner = statement.named_children[0]
                if inner.type in ("internal_module", "module"):
                    pending.append(inner)
                    continue
            if statement.type not in _TYPE_ONLY:
                return False
    return True


def _refuse(kind: str, node: Node) -> NoReturn:
    what, instead = _REFUSED[kind]
    raise GuestSyntaxError(
        f"SyntaxError at cell.js:{_where(node.start_point)}: TypeScript {what} is not supported: it needs a "
        f"transform, and cells only erase types ({instead}). No tools were dispatched; correct the source and "
        "submit it again."
    )


def _where(point: Point) -> str:
    # The engine's columns count UTF-8 bytes from 1, as tree-sitter's count them from 0.
    return f"{point.row + 1}:{point.column + 1}"


def _apply(source: bytes, edits: list[_Edit]) -> bytes:
    out = bytearray(source)
    for edit in edits:
        span = source[edit.start : edit.end]
        if span.isascii():
            blank = span.translate(_ASCII_BLANK)
        else:
            blank = _WIDE.sub(_wide_blank, span)
            blank = blank.translate(_ASCII_BLANK)
        out[edit.start : edit.end] = blank
        if edit.head:
            out[edit.start : edit.start + len(edit.head)] = edit.head
        if edit.paren >= 0:
            out[edit.paren] = 0x29  # ")"
    return bytes(out)


def _wide_blank(match: re.Match[bytes]) -> bytes:
    character = match.group()
    return character if character in _LINE_TERMINATORS else _SAME_SIZE_BLANK[len(character)]
