"""Who a confined process may serve: the principal a cell (or a request body) belongs to.

A worker or helper process that an attacker took over (a memory bug in QuickJS, Monty or a JSON
decoder) acts with everything that passes through it afterwards.  So a process serves one principal
for its whole life: the pool never hands it a cell, nor a helper a job, of any other.  How wide a
principal is, is the operator's choice (``worker_isolation``), from widest to narrowest:

``tenant``   every cell of the tenant (the keys of one tenant trust each other)
``key``      the tenant and the key's tool policy: keys of one tenant with the same policy share
             processes, a narrower key never shares one with a wider key (the default)
``session``  as ``key``, and one session id; a cell without a session gets a process of its own
``cell``     nobody: a fresh process per cell, never reused

The principal is an opaque string (None: a process of its own) that only the pool compares.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from bridge import jsoncodec
from service.settings import ApiKey

Isolation = Literal["tenant", "key", "session", "cell"]
_SEPARATOR = "\x00"


def policy_fingerprint(key: ApiKey) -> str:
    """A digest of what the key lets its cells do (its tool narrowing), equal for equal policies."""
    policy = jsoncodec.dumps(dict(key.tools), sort_keys=True, default=repr)
    return hashlib.sha256(policy).hexdigest()[:32]


def cell_principal(isolation: Isolation, key: ApiKey, session_id: str | None) -> str | None:
    """The principal of a cell run with ``key`` (None: it shares its process with no other cell)."""
    if isolation == "tenant":
        return key.tenant
    if isolation == "cell" or (isolation == "session" and not session_id):
        return None
    principal = _SEPARATOR.join((key.tenant, "key", policy_fingerprint(key)))
    if isolation == "session":
        principal = _SEPARATOR.join((principal, "session", str(session_id)))
    return principal


def helper_principal(isolation: Isolation, key: ApiKey) -> str | None:
    """The principal of a request body's helper job (None: a fresh helper for this job alone).

    Bodies are decoded before their session id is read, so ``session`` and ``cell`` isolation give
    each job a helper of its own, ``tenant`` and ``key`` the same principal as the key's cells.
    """
    if isolation in ("session", "cell"):
        return None
    return cell_principal(isolation, key, None)
