"""The generated parts of the reference pages, made from the code so they cannot drift from it.

Each page holds its generated part between ``<!-- generated: NAME -->`` and ``<!-- end generated -->``:

* ``docs/reference/settings.md`` (``settings``): every field of ``Settings``: TOML key, environment
  variable, default and allowed range, description;
* ``docs/reference/errors.md`` (``service-errors``, ``call-errors``): the service's exception tree
  (code, HTTP status, error type) and the error trees of the subpackages whose codes reach the guest;
* ``docs/reference/http-api.md`` (``operations``): every operation of the OpenAPI document.

``python scripts/docs_reference.py`` rewrites the pages; ``--check`` only says which are stale (exit 1).
``tests/docs/test_reference_pages.py`` runs the check, so a change to a setting, an error or a route
that is not regenerated fails the suite.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MARKER = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)


def _cell(text: str) -> str:
    """Table-cell text: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _first_line(doc: str | None) -> str:
    return _cell((inspect.cleandoc(doc).split("\n\n", 1)[0]) if doc else "")


def settings_table() -> str:
    from service.settings import ENV_PREFIX, Settings

    rows = ["| Setting (TOML key, environment variable) | Default | Description |", "|---|---|---|"]
    for name, info in Settings.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if "table" in extra:
            where = f"`{extra['table']}.{name}`<br>`{ENV_PREFIX}{name.upper()}`"
        else:
            where = f"`{extra['path']}`<br>(file only)"
        default = info.default
        if isinstance(default, tuple):
            default = list(default)
        shown = "`" + json.dumps(default, default=str) + "`" if default not in ("", None, [], {}) else "—"
        bounds = [getattr(m, attr) for m in info.metadata for attr in ("ge", "le") if hasattr(m, attr)]
        if len(bounds) == 2:
            shown += f"<br>{bounds[0]:,}..{bounds[1]:,}"
        rows.append(f"| {where} | {shown} | {_cell(info.description or '')} |")
    return "\n".join(rows) + "\n"


def _subclasses(root: type) -> Iterator[type]:
    for sub in sorted(root.__subclasses__(), key=lambda c: (c.__module__, c.__qualname__)):
        yield sub
        yield from _subclasses(sub)


def service_errors_table() -> str:
    from service import errors

    rows = ["| Exception | `code` | HTTP status | `error_type` | Meaning |", "|---|---|---|---|---|"]
    for cls in [errors.ServiceError, *_subclasses(errors.ServiceError)]:
        if cls.__module__ != errors.__name__:
            continue
        never_http = ("runtime_unavailable", "config_error", "server_unreachable", "server_refused")
        status = cls.status if cls.code not in never_http else "—"
        rows.append(f"| `{cls.__name__}` | `{cls.code}` | {status} | `{cls.error_type}` | {_first_line(cls.__doc__)} |")
    return "\n".join(rows) + "\n"


def call_errors_table() -> str:
    from service.api_files import errors as api_files
    from service.mcp import errors as mcp
    from service.stores import errors as stores
    from service.tools import errors as tools

    rows = ["| Area | Exception | `code` | Meaning |", "|---|---|---|---|"]
    for area, module in (("tools", tools), ("MCP", mcp), ("stores", stores), ("declarations", api_files)):
        roots = [c for c in vars(module).values() if inspect.isclass(c) and c.__module__ == module.__name__]
        for cls in sorted(roots, key=lambda c: inspect.getsourcelines(c)[1]):
            code = getattr(cls, "code", None)
            if isinstance(code, str) and issubclass(cls, Exception):
                rows.append(f"| {area} | `{cls.__name__}` | `{code}` | {_first_line(cls.__doc__)} |")
    return "\n".join(rows) + "\n"


def openapi_document() -> dict[str, Any]:
    from service.app import create_app
    from service.assembly import build_components
    from service.settings import Settings

    settings = Settings(workers=1)
    document: dict[str, Any] = create_app(settings, build_components(settings, store=False)).openapi()
    return document


def operations_table() -> str:
    document = openapi_document()
    rows = ["| Operation | `operationId` | Summary | Answers |", "|---|---|---|---|"]
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            summary = _cell(op.get("summary", ""))
            detail = _first_line(op.get("description"))
            answers = ", ".join(sorted(op.get("responses", {})))
            rows.append(f"| `{method.upper()} {path}` | `{op['operationId']}` | **{summary}**: {detail} | {answers} |")
    return "\n".join(rows) + "\n"


PAGES: dict[str, dict[str, Callable[[], str]]] = {
    "docs/reference/settings.md": {"settings": settings_table},
    "docs/reference/errors.md": {"service-errors": service_errors_table, "call-errors": call_errors_table},
    "docs/reference/http-api.md": {"operations": operations_table},
}


def render(page: str, text: str) -> str:
    """``text`` with each generated part of ``page`` made afresh; a marker the page lacks is an error."""
    makers = PAGES[page]
    found = set()

    def fill(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in makers:
            raise SystemExit(f"{page}: unknown generated part {name!r} (known: {sorted(makers)})")
        found.add(name)
        return m.group(1) + makers[name]() + m.group(4)

    out = MARKER.sub(fill, text)
    if missing := set(makers) - found:
        raise SystemExit(f"{page}: no <!-- generated: NAME --> marker for {sorted(missing)}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="say which pages are stale; change nothing")
    args = parser.parse_args(argv)
    stale = []
    for page in PAGES:
        path = ROOT / page
        text = path.read_text(encoding="utf-8")
        new = render(page, text)
        if new != text:
            stale.append(page)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if args.check and stale:
        print("stale (run python scripts/docs_reference.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
