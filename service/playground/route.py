"""``GET /playground`` and its files, served from this package (no CDN, no build step at run time).

The page calls the HTTP API of the server that served it, same origin, so it obeys every rule of the
API: it sends the API key the user gives it (kept in the tab's ``sessionStorage``), and its requests
carry the page's own origin.  The files are read once, at import, from a fixed list: a request
names one of them or gets 404, and nothing a caller names is read from disk.  The page's Content
Security Policy allows scripts, styles and connections to this origin only.
"""

from __future__ import annotations

import secrets
from importlib import resources

from fastapi import APIRouter
from starlette.responses import Response

from service.errors import NotFound

PLAYGROUND_PATH = "/playground"
_FILES = {
    "": ("index.html", "text/html; charset=utf-8"),
    "playground.js": ("playground.js", "text/javascript; charset=utf-8"),
    "playground.css": ("playground.css", "text/css; charset=utf-8"),
    # CodeMirror 6 and the page's editor module, bundled by ../editor/build.sh from its locked packages.
    "editor.js": ("editor.js", "text/javascript; charset=utf-8"),
}
_STATIC = resources.files(__package__) / "static"
_CONTENT = {name: (_STATIC / file).read_bytes() for name, (file, _) in _FILES.items()}
#: The page's style elements (CodeMirror writes its themes as <style> at run time) carry this per-answer
#: nonce, which the page's CSP names; the placeholder is in index.html.
STYLE_NONCE_PLACEHOLDER = b"__STYLE_NONCE__"
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'{nonce}; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": POLICY.format(nonce=""),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-cache",
}

playground_router = APIRouter()


def _file(name: str) -> Response:
    if name not in _FILES:
        raise NotFound(f"no playground file {name[:64]!r}: open {PLAYGROUND_PATH}")
    return Response(_CONTENT[name], media_type=_FILES[name][1], headers=HEADERS)


@playground_router.get("/", include_in_schema=False)
async def front_page() -> Response:
    """The server's address leads to the playground (the API's own pages are /docs and /openapi.json)."""
    return Response(status_code=307, headers={"Location": PLAYGROUND_PATH})


@playground_router.get(PLAYGROUND_PATH, include_in_schema=False)
async def playground() -> Response:
    """The playground page, with a fresh style nonce in its CSP and in the page."""
    nonce = secrets.token_urlsafe(18)
    page = _CONTENT[""].replace(STYLE_NONCE_PLACEHOLDER, nonce.encode("ascii"))
    headers = {**HEADERS, "Content-Security-Policy": POLICY.format(nonce=f" 'nonce-{nonce}'")}
    return Response(page, media_type=_FILES[""][1], headers=headers)


@playground_router.get(PLAYGROUND_PATH + "/{name}", include_in_schema=False)
async def playground_file(name: str) -> Response:
    """The page's script or style sheet."""
    return _file(name)
