"""HTTP for both clients: the one module that talks to httpx.

Requests go out as compact JSON (``NaN`` refused: the service accepts only JSON); a 200 answer is
parsed, any other becomes the ``ApiError`` subclass for its status; httpx's own failures become
``TransportError`` / ``RequestTimeoutError`` with the URL in the message and the original as
``__cause__``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx

from .errors import CodemodeError, ProtocolError, RequestTimeoutError, TransportError, api_error

#: Connecting never needs the long read allowance a wait does.
CONNECT_TIMEOUT_S = 10.0
EVENT_STREAM = "text/event-stream"


def _base(base_url: str) -> str:
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise ValueError(
            f"base_url must be an http:// or https:// URL, like http://127.0.0.1:8000, not {base_url!r:.80}"
        )
    return base_url.rstrip("/")


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": "codemode-client"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def _timeout(seconds: float | None) -> httpx.Timeout:
    if seconds is None:
        return httpx.Timeout(None, connect=CONNECT_TIMEOUT_S)
    return httpx.Timeout(seconds, connect=min(seconds, CONNECT_TIMEOUT_S))


def _encode(body: Any) -> bytes:
    return json.dumps(body, allow_nan=False, separators=(",", ":")).encode("ascii")


def _wrapped(exc: httpx.HTTPError, method: str, url: str) -> CodemodeError:
    what = f"{method} {url}"
    if isinstance(exc, httpx.TimeoutException):
        return RequestTimeoutError(f"{what}: no answer in time ({type(exc).__name__}: {exc})")
    return TransportError(f"{what} failed: {type(exc).__name__}: {exc}")


def _answer(response: httpx.Response) -> Any:
    if response.status_code != 200:
        raise api_error(response.status_code, response.headers, response.content)
    try:
        return json.loads(response.content)
    except ValueError:
        raise ProtocolError(
            f"{response.request.method} {response.request.url}: HTTP 200 whose body is not JSON: "
            f"{response.content[:200]!r}"
        ) from None


def _stream_answer(response: httpx.Response) -> None:
    if response.status_code != 200:
        raise api_error(response.status_code, response.headers, response.content)
    kind = response.headers.get("content-type", "")
    if not kind.startswith(EVENT_STREAM):
        raise ProtocolError(f"GET {response.request.url}: expected {EVENT_STREAM}, got {kind or 'no content type'}")


class _Http:
    """What both transports share: the base URL, the headers and each request's arguments."""

    def __init__(self, base_url: str, api_key: str | None, client: Any) -> None:
        self.base_url = _base(base_url)
        self.headers = _headers(api_key)
        self._owned = client is None
        self._client = client

    def _request_args(
        self, path: str, body: Any, params: Mapping[str, str] | None, timeout: float | None
    ) -> tuple[str, dict[str, Any]]:
        """The URL and the httpx arguments of one JSON request."""
        headers = dict(self.headers)
        content = None
        if body is not None:
            content = _encode(body)
            headers["Content-Type"] = "application/json"
        return self.base_url + path, {
            "content": content,
            "params": params,
            "headers": headers,
            "timeout": _timeout(timeout) if timeout is not None else httpx.USE_CLIENT_DEFAULT,
        }

    def _stream_args(
        self, path: str, headers: Mapping[str, str], read_timeout: float | None
    ) -> tuple[str, dict[str, Any]]:
        """The URL and the httpx arguments of one event stream."""
        return self.base_url + path, {
            "headers": {**self.headers, "Accept": EVENT_STREAM, **headers},
            "timeout": _timeout(read_timeout),
        }


class SyncHttp(_Http):
    """Blocking JSON requests and event streams against one service."""

    def __init__(
        self, base_url: str, api_key: str | None, timeout: float | None, http_client: httpx.Client | None = None
    ) -> None:
        super().__init__(base_url, api_key, http_client)
        if http_client is None:
            self._client = httpx.Client(timeout=_timeout(timeout))

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Any:
        url, args = self._request_args(path, body, params, timeout)
        try:
            response = self._client.request(method, url, **args)
        except httpx.HTTPError as exc:
            raise _wrapped(exc, method, url) from exc
        return _answer(response)

    @contextmanager
    def stream(self, path: str, *, headers: Mapping[str, str], read_timeout: float | None) -> Iterator[Iterator[bytes]]:
        """An open event stream's bytes as they arrive (raises before yielding if the answer is not a stream)."""
        url, args = self._stream_args(path, headers, read_timeout)
        try:
            with self._client.stream("GET", url, **args) as response:
                if response.status_code != 200:
                    response.read()
                _stream_answer(response)
                yield self._chunks(response, url)
        except httpx.HTTPError as exc:
            raise _wrapped(exc, "GET", url) from exc

    @staticmethod
    def _chunks(response: httpx.Response, url: str) -> Iterator[bytes]:
        try:
            yield from response.iter_bytes()
        except httpx.HTTPError as exc:
            raise _wrapped(exc, "GET", url) from exc

    def close(self) -> None:
        if self._owned:
            self._client.close()


class AsyncHttp(_Http):
    """``SyncHttp`` for asyncio."""

    def __init__(
        self, base_url: str, api_key: str | None, timeout: float | None, http_client: httpx.AsyncClient | None = None
    ) -> None:
        super().__init__(base_url, api_key, http_client)
        if http_client is None:
            self._client = httpx.AsyncClient(timeout=_timeout(timeout))

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Any:
        url, args = self._request_args(path, body, params, timeout)
        try:
            response = await self._client.request(method, url, **args)
        except httpx.HTTPError as exc:
            raise _wrapped(exc, method, url) from exc
        return _answer(response)

    @asynccontextmanager
    async def stream(
        self, path: str, *, headers: Mapping[str, str], read_timeout: float | None
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        url, args = self._stream_args(path, headers, read_timeout)
        try:
            async with self._client.stream("GET", url, **args) as response:
                if response.status_code != 200:
                    await response.aread()
                _stream_answer(response)
                yield self._chunks(response, url)
        except httpx.HTTPError as exc:
            raise _wrapped(exc, "GET", url) from exc

    @staticmethod
    async def _chunks(response: httpx.Response, url: str) -> AsyncIterator[bytes]:
        try:
            async for chunk in response.aiter_bytes():
                yield chunk
        except httpx.HTTPError as exc:
            raise _wrapped(exc, "GET", url) from exc

    async def aclose(self) -> None:
        if self._owned:
            await self._client.aclose()
