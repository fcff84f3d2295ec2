"""API keys -> tenants.  Without configured keys every caller is the tenant ``local``."""

from __future__ import annotations

import hmac

from .errors import Unauthorized
from .settings import ApiKey, Settings

LOCAL_TENANT = "local"


class KeyRing:
    """Resolves ``Authorization: Bearer <key>`` to the key's record."""

    def __init__(self, settings: Settings) -> None:
        self._keys = settings.api_keys

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def resolve(self, authorization: str | None) -> ApiKey:
        if not self._keys:
            return ApiKey(key="", tenant=LOCAL_TENANT)
        if not authorization:
            raise Unauthorized("missing Authorization header: send 'Authorization: Bearer <api key>'")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Authorization header must be 'Bearer <api key>'")
        token = token.strip()
        for entry in self._keys:
            # Constant-time comparison: a key must not leak through response timing.
            if hmac.compare_digest(entry.key.encode(), token.encode()):
                return entry
        raise Unauthorized("unknown API key: check the key or ask the operator for one")
