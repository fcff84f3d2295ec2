"""Helper pools for the tests: real helper processes, confined as the service confines them."""

from __future__ import annotations

from service.helpers.pool import HelperPool
from service.helpers.protocol import HelperOptions
from service.principals import Isolation
from service.runtime.workers.sandbox import sandbox_options
from service.settings import ApiKey

MiB = 1024 * 1024
ALPHA = ApiKey("ck_alpha_0123456789", "alpha")
ALPHA_NARROW = ApiKey("ck_alpha_narrow_0123", "alpha", {"deny": ["send_email"]})
BETA = ApiKey("ck_beta_01234567890", "beta")


def helper_options() -> HelperOptions:
    return {"sandbox": sandbox_options("auto", "nobody"), "rlimit_as_bytes": 4096 * MiB}


def helper_pool(isolation: Isolation = "key", *, max_live: int = 4, **kwargs: int) -> HelperPool:
    """A pool like the service's (create it, and ``start`` it, inside the event loop that uses it)."""
    return HelperPool(helper_options(), isolation, max_live=max_live, **kwargs)
