"""TypeScript source text: literals, keys, doc comments, object blocks and namespaces of named types."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from service.api_files.schema_refs import type_name_hint

__all__ = [
    "TsDeclaration",
    "TsMember",
    "TsNamespace",
    "TsObject",
    "TsType",
    "doc_text",
    "member_doc",
    "object_block",
    "one_line",
    "property_key",
    "ts_string",
]

_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")


@dataclass(frozen=True)
class TsMember:
    """One property of a rendered object type (`key` is `name` as TypeScript source)."""

    name: str
    key: str
    optional: bool
    type_text: str
    description: str | None
    has_default: bool
    default: object


@dataclass(frozen=True)
class TsObject:
    """The members and index signature of a top-level object schema (and the named types they use)."""

    members: tuple[TsMember, ...]
    index_type: str | None
    closed: bool
    declarations: tuple[TsDeclaration, ...] = ()


@dataclass(frozen=True)
class TsType:
    """A rendered type expression and the named types it refers to."""

    text: str
    declarations: tuple[TsDeclaration, ...] = ()


@dataclass(frozen=True)
class TsDeclaration:
    """One named type of a namespace: the target of a local `$ref`."""

    name: str
    body: str | TsObject
    description: str | None

    def lines(self, indent: str) -> list[str]:
        doc = one_line(self.description or "")[:400]
        head = [f"{indent}/** {doc_text(doc)} */"] if doc else []
        body = object_block(self.body, indent) if isinstance(self.body, TsObject) else self.body
        return [*head, f"{indent}type {self.name} = {body};"]


class TsNamespace:
    """The named types of one declared function, in a type-only namespace of the function's name.

    TypeScript merges a namespace with a function of the same name, so `ship.Address` names a type of
    the tool `ship` and can clash with no other file's names. Local `$ref` targets become these types,
    which is how recursive schemas keep their types.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._taken = {name}
        self._declarations: list[TsDeclaration] = []

    def allocate(self, ref: str) -> str:
        """A fresh member name for the target of `ref`."""
        base = type_name_hint(ref)
        name, suffix = base, 2
        while name in self._taken:
            name, suffix = f"{base}{suffix}", suffix + 1
        self._taken.add(name)
        return name

    def add(self, declarations: tuple[TsDeclaration, ...]) -> None:
        """Keep declarations a caller decided to emit."""
        self._declarations.extend(declarations)

    def release(self, declarations: tuple[TsDeclaration, ...]) -> None:
        """Free the names of declarations a caller dropped, so the next rendering reuses them."""
        self._taken.difference_update(declaration.name for declaration in declarations)

    def chars(self, declarations: tuple[TsDeclaration, ...], indent: str = "") -> int:
        """How many characters `declarations` add to this namespace's block."""
        return sum(len(line) + 1 for declaration in declarations for line in declaration.lines(indent + "    "))

    def block(self, indent: str = "", *, declare: bool = True) -> list[str]:
        """The namespace's lines, or none when it declares nothing."""
        if not self._declarations:
            return []
        inner = indent + "    "
        keyword = "declare namespace" if declare else "namespace"
        lines = [f"{indent}{keyword} {self.name} {{"]
        for declaration in self._declarations:
            lines.extend(declaration.lines(inner))
        return [*lines, f"{indent}}}"]


def property_key(name: str) -> str:
    """A property name as TypeScript source: bare when an identifier, else a string literal."""
    return name if _IDENTIFIER.match(name) else ts_string(name)


def ts_string(value: str) -> str:
    """A TypeScript string literal (JSON escaping, ASCII-only so any encoding round-trips)."""
    return json.dumps(value, ensure_ascii=True)


def doc_text(text: str) -> str:
    """Text made safe inside a `/** */` comment (a literal `*/` would end it early)."""
    return text.replace("*/", "*\\/")


def object_block(shape: TsObject, indent: str) -> str:
    """A multi-line object type with a doc comment per described or defaulted member."""
    inner = indent + "    "
    lines = ["{"]
    for member in shape.members:
        doc = member_doc(member)
        if doc:
            lines.append(f"{inner}/** {doc_text(doc)} */")
        lines.append(f"{inner}{member.key}{'?' if member.optional else ''}: {member.type_text};")
    if shape.index_type is not None:
        lines.append(f"{inner}[key: string]: {shape.index_type};")
    lines.append(f"{indent}}}")
    return "\n".join(lines)


def member_doc(member: TsMember, max_chars: int = 400) -> str:
    """One-line documentation of a member: its description and, when present, its default."""
    text = one_line(member.description or "")
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "\u2026"
    if member.has_default:
        rendered = json.dumps(member.default, ensure_ascii=False, separators=(",", ":"), default=str)
        if len(rendered) <= 200:
            text = f"{text} Default: {rendered}." if text else f"Default: {rendered}."
    return text


def one_line(text: str) -> str:
    """Collapse every run of whitespace (including Unicode line separators) to one space."""
    return " ".join(text.split())
