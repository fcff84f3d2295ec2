"""API keys -> tenants, and who may call at all.  Without configured keys every caller is the
tenant ``local``, only loopback peers are served, and only requests whose Host and Origin name this
service (service/hosts.py: no DNS rebinding)."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Sequence

from service.errors import Forbidden, HostNotAllowed, Unauthorized
from service.hosts import MAX_AUTHORITY_CHARS, HostCheck
from service.settings import ApiKey, Settings

LOCAL_TENANT = "local"
#: The caller of a server without keys, and the operator of the command line (``codemode exec``/``mcp``).
LOCAL_KEY = ApiKey(key="", tenant=LOCAL_TENANT)

# Starlette's TestClient names its in-process peer this way; no network socket can.
IN_PROCESS_PEER = "testclient"
#: Peer texts answered without parsing an address (the ones every local request carries).
_LOOPBACK_TEXTS = frozenset((IN_PROCESS_PEER, "127.0.0.1", "::1"))

# Header bytes read for the Host and Origin check: one more than any value that can be allowed.
_HOST_READ = MAX_AUTHORITY_CHARS + 1
_ORIGIN_READ = MAX_AUTHORITY_CHARS + len("https://") + 1

NO_KEYS_REMOTE_PEER = (
    "this service has no API keys configured, so it only answers callers on this machine (loopback); "
    "configure [[api_keys]] in the config file to serve other addresses"
)


class KeyRing:
    """Resolves ``Authorization: Bearer <key>`` to the key's record."""

    def __init__(self, settings: Settings) -> None:
        self._keys = settings.api_keys
        self._encoded = tuple(entry.key.encode() for entry in settings.api_keys)
        self._local = LOCAL_KEY
        self._hosts = HostCheck(settings.allowed_hosts)

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def check_peer(self, client: object) -> None:
        """Without keys, refuse any peer that is not on this machine (whatever server runs the app)."""
        if not self._keys and not is_loopback_peer(client):
            raise Forbidden(NO_KEYS_REMOTE_PEER)

    def check_addressed(self, headers: Sequence[tuple[bytes, bytes]], client: object) -> None:
        """Without keys, refuse a request whose Host or Origin names no allowed host (a rebound page's)."""
        if self._keys:
            return  # a page cannot present a key it does not know
        # Cut before anything reads them: a longer value is refused by its length alone.
        hosts = tuple(value[:_HOST_READ] for name, value in headers if name == b"host")
        origins = tuple(value[:_ORIGIN_READ] for name, value in headers if name == b"origin")
        reason = self._hosts.refusal_of_headers(hosts, origins, _peer_host(client) == IN_PROCESS_PEER)
        if reason is not None:
            raise HostNotAllowed(reason)

    def resolve(self, authorization: str | None) -> ApiKey:
        if not self._keys:
            return self._local
        if not authorization:
            raise Unauthorized("missing Authorization header: send 'Authorization: Bearer <api key>'")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Authorization header must be 'Bearer <api key>'")
        presented = token.strip().encode()
        found: ApiKey | None = None
        # Every key is compared, each in constant time: neither the time nor the number of
        # comparisons depends on which key (if any) matched.
        for entry, encoded in zip(self._keys, self._encoded):
            if hmac.compare_digest(encoded, presented) and found is None:
                found = entry
        if found is None:
            raise Unauthorized("unknown API key: check the key or ask the operator for one")
        return found


def is_loopback_peer(client: object) -> bool:
    """True for a loopback address, a server without network peers (None) or the in-process test peer."""
    if client is None:
        return True
    host = _peer_host(client)
    if isinstance(host, str) and host in _LOOPBACK_TEXTS:
        return True
    try:
        address = ipaddress.ip_address(str(host).split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool((mapped or address).is_loopback)


def _peer_host(client: object) -> object:
    # The ASGI scope's client: (host, port), or whatever a server puts there (checked, not trusted).
    return client[0] if isinstance(client, (tuple, list)) and client else client
