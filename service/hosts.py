"""Which ``Host`` and ``Origin`` a server without API keys answers: the defence against DNS rebinding.

Without keys, anyone whose page this machine's browser opens can make it send requests to a loopback
port; a page whose name is rebound to 127.0.0.1 is even same-origin with itself and reads the answers.
Such a request still names the attacker's host in ``Host`` (and ``Origin``), so a server without keys
answers only requests addressed to a loopback name or address (any port) or to a host the operator
listed in ``allowed_hosts``, and only pages of those hosts (a present ``Origin`` must name one).

Everything here is pure text work, bounded by ``MAX_AUTHORITY_CHARS`` before anything is parsed, so a
hostile header of any size costs a length check.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

#: Longer than any DNS name (253) or bracketed IPv6 address with zone and port: refused unread.
MAX_AUTHORITY_CHARS = 300
LOOPBACK_NAME = "localhost"
#: Starlette's TestClient addresses the app as this host; only the in-process peer may (no socket can be it).
IN_PROCESS_HOST = "testserver"
_NAME = re.compile(r"^[a-z0-9_-]+(?:\.[a-z0-9_-]+)*$")
_PORT = re.compile(r"^[0-9]{1,5}$")
_DEFAULT_PORTS = {"http": 80, "https": 443}
SETTING_HINT = (
    "this service has no API keys, so it answers only requests addressed to a loopback name or address "
    "(localhost, 127.0.0.1, [::1]) or to a host listed in the allowed_hosts setting (CODEMODE_ALLOWED_HOSTS); "
    "list the name you reach it by there, or configure [[api_keys]]"
)


@dataclass(frozen=True)
class Authority:
    """A host (lower case, no trailing dot, IPv6 without brackets) and its port, if one was given."""

    host: str
    port: int | None

    @property
    def is_loopback(self) -> bool:
        if self.host == LOOPBACK_NAME:
            return True
        try:
            address = ipaddress.ip_address(self.host)
        except ValueError:
            return False
        mapped = getattr(address, "ipv4_mapped", None)
        return bool((mapped or address).is_loopback)


def parse_authority(text: str) -> Authority | None:
    """``name``, ``name:port``, ``1.2.3.4[:port]``, ``[v6][:port]`` -> Authority; None when malformed."""
    if not text or len(text) > MAX_AUTHORITY_CHARS:
        return None
    text = text.lower()
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or "%" in host:  # zone ids name an interface, never a server's host
            return None
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
        host = str(ipaddress.IPv6Address(host))  # one spelling: [0:0::1] is [::1]
    else:
        host, colon, port_text = text.partition(":")
        rest = colon + port_text
        if host.endswith("."):
            host = host[:-1]  # "localhost." is "localhost"
        if not _NAME.match(host):
            return None
    if not rest or rest == ":":
        return Authority(host, None)
    if rest[0] != ":" or not _PORT.match(rest[1:]) or int(rest[1:]) > 65535:
        return None
    return Authority(host, int(rest[1:]))


def parse_origin(text: str) -> Authority | None:
    """``http://host[:port]`` or ``https://…`` -> Authority with the scheme's port filled in; else None."""
    scheme, sep, authority = text.partition("://")
    if not sep or scheme.lower() not in _DEFAULT_PORTS:
        return None  # "null" (sandboxed frames, file pages), extensions and anything else name no allowed host
    parsed = parse_authority(authority)
    if parsed is None or parsed.port is not None:
        return parsed
    return Authority(parsed.host, _DEFAULT_PORTS[scheme.lower()])


def parse_allowed_host(entry: str) -> Authority:
    """One ``allowed_hosts`` entry: a host name or address, with a port to allow that port only."""
    parsed = parse_authority(entry.strip()) if isinstance(entry, str) else None
    if parsed is None:
        raise ValueError(
            f"allowed_hosts entry {str(entry)[:100]!r} is not a host name or address with an optional port "
            "(e.g. codemode.internal, codemode.internal:8000, 10.0.0.5, [fd00::5]:8000)"
        )
    return parsed


class HostCheck:
    """Decides whether a request's ``Host`` and ``Origin`` name this service (``refusal`` says why not)."""

    def __init__(self, allowed_hosts: Iterable[str]) -> None:
        self._allowed = tuple(parse_allowed_host(entry) for entry in allowed_hosts)
        # Every request of a client names the same Host (and Origin): the verdict is computed once per
        # spelling.  Bounded, so varying spellings cost their parse and nothing more.
        self.refusal_of_headers = functools.lru_cache(maxsize=1024)(self._refusal_of_headers)

    def _refusal_of_headers(self, hosts: tuple[bytes, ...], origins: tuple[bytes, ...], in_process: bool) -> str | None:
        """``refusal`` of raw header values (each cut to just over ``MAX_AUTHORITY_CHARS`` by the caller)."""
        return self.refusal(
            [v.decode("latin-1") for v in hosts], [v.decode("latin-1") for v in origins], in_process=in_process
        )

    def allows(self, authority: Authority, *, in_process: bool = False) -> bool:
        if authority.is_loopback or (in_process and authority.host == IN_PROCESS_HOST):
            return True
        return any(
            entry.host == authority.host and (entry.port is None or entry.port == authority.port)
            for entry in self._allowed
        )

    def refusal(self, hosts: list[str], origins: list[str], *, in_process: bool = False) -> str | None:
        """Why a request with these ``Host`` and ``Origin`` header values is refused, or None to serve it.

        A request without ``Host`` is served: browsers always send one, so its absence is no page's doing.
        """
        if len(hosts) > 1 or len(origins) > 1:
            return "the request has more than one Host or Origin header; send one of each at most"
        for name, values, parse in (("Host", hosts, parse_authority), ("Origin", origins, parse_origin)):
            if not values:
                continue
            parsed = parse(values[0])
            if parsed is None or not self.allows(parsed, in_process=in_process):
                what = "is malformed" if parsed is None and name == "Host" else "is not allowed"
                return f"{name} {_shown(values[0])} {what}: {SETTING_HINT}"
        return None


def _shown(value: str) -> str:
    return repr(value if len(value) <= 100 else value[:100] + "…")
