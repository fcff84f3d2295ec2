"""TenantQuotas alone (no service, no worker): each cap refuses at its value, names its setting, and counts back."""

from __future__ import annotations

import contextlib

import pytest

from service.errors import TooManyRequests
from service.runtime.quotas import QuotaCaps, TenantQuotas

CAPS = QuotaCaps(
    max_parked_cells=3,
    tenant_max_parked_cells=2,
    tenant_max_concurrency=2,
    tenant_max_waits=1,
    tenant_held_bytes=100,
)


def _quotas() -> TenantQuotas:
    return TenantQuotas(CAPS)


@pytest.mark.parametrize(
    ("counter", "cap", "setting"),
    [
        ("running", CAPS.tenant_max_concurrency, "tenant_max_concurrency"),
        ("waiting", CAPS.tenant_max_waits, "tenant_max_waits"),
    ],
)
def test_a_counted_call_is_refused_at_its_cap_and_counts_back_on_exit(counter, cap, setting):
    """``cap`` calls of one tenant are admitted, the next is 429 naming ``setting``; another tenant is untouched."""
    quotas = _quotas()
    with contextlib.ExitStack() as held:
        for _ in range(cap):
            held.enter_context(getattr(quotas, counter)("a"))
        with pytest.raises(TooManyRequests, match=setting), getattr(quotas, counter)("a"):
            pass
        with getattr(quotas, counter)("b"):
            assert quotas.usage("b")[{"running": "running", "waiting": "waits"}[counter]] == 1
    assert quotas.usage("a") == {"running": 0, "parked": 0, "waits": 0, "held_bytes": 0}
    with getattr(quotas, counter)("a"):  # counted back: admitted again
        pass


def test_counted_is_never_refused():
    """A background cell's later legs count as running calls without the cap check (admitted at exec)."""
    quotas = _quotas()
    with contextlib.ExitStack() as held:
        for _ in range(CAPS.tenant_max_concurrency + 3):
            held.enter_context(quotas.counted("a"))
        assert quotas.usage("a")["running"] == CAPS.tenant_max_concurrency + 3
        with pytest.raises(TooManyRequests, match="tenant_max_concurrency"), quotas.running("a"):
            pass


@pytest.mark.parametrize(
    ("parked_before", "tenant", "expected", "setting"),
    [
        ({"a": 1}, "b", True, None),
        ({"a": 1}, "a", True, "tenant_max_parked_cells"),
        ({"a": 2}, "a", False, "tenant_max_parked_cells"),
        ({"a": 2}, "b", True, "max_parked_cells"),
        ({"a": 2, "b": 1}, "c", False, "max_parked_cells"),
    ],
)
def test_park_and_new_cells_against_the_parked_caps(parked_before, tenant, expected, setting):
    """A park is refused (nothing counted) at the tenant's or the server's cap; then a new exec of that tenant
    is admitted, or refused naming the cap it meets (``setting``)."""
    quotas = _quotas()
    for owner, n in parked_before.items():
        for i in range(n):
            assert quotas.park(f"{owner}{i}", owner)
    before = quotas.usage(tenant)["parked"]
    assert quotas.park("new", tenant) is expected
    assert quotas.usage(tenant)["parked"] == before + expected
    if setting is None:
        assert quotas.check_new_cell(tenant) is quotas.held_account(tenant)
    else:
        with pytest.raises(TooManyRequests, match=setting):
            quotas.check_new_cell(tenant)


def test_parking_twice_counts_once_and_unpark_forgets_the_tenant():
    """A cell parked again is one parked cell; unparking it empties the tenant's row (the table stays bounded)."""
    quotas = _quotas()
    assert quotas.park("c1", "a") and quotas.park("c1", "a")
    assert quotas.usage("a")["parked"] == 1 and quotas.parks == 2
    quotas.unpark("c1")
    quotas.unpark("c1")  # a second unpark changes nothing
    assert quotas.usage("a")["parked"] == 0 and quotas.stats()["parked"] == 0
    assert quotas.stats()["tenants_counted"] == 0


def test_hold_skips_the_check_but_counts_against_later_parks():
    """A background cell's slot is held without a check, and a later park of the tenant sees it."""
    quotas = _quotas()
    quotas.hold("bg1", "a")
    quotas.hold("bg2", "a")
    quotas.hold("bg3", "a")  # over the tenant cap: admitted at exec, never refused here
    assert quotas.usage("a")["parked"] == 3
    assert not quotas.park("x", "a")


@pytest.mark.parametrize(
    ("used", "incoming", "refused"),
    [(0, 0, False), (99, 0, False), (100, 0, True), (50, 50, False), (50, 51, True)],
)
def test_held_bytes_refuse_a_request_that_would_not_fit(used, incoming, refused):
    """A new cell needs room for a byte; a wait's tool results must fit what is left of tenant_held_bytes."""
    quotas = _quotas()
    account = quotas.held_account("a")
    if used:
        account.charge(used)
    if refused:
        with pytest.raises(TooManyRequests, match="tenant_held_bytes"):
            quotas.check_held("a", incoming)
    else:
        assert quotas.check_held("a", incoming) is account
    assert quotas.usage("a")["held_bytes"] == used


def test_a_counted_tenants_usage_record_is_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Looking up a tenant's counters makes its record only when it has none (not one per lookup)."""
    import service.runtime.quotas as quotas_module

    made: list[object] = []

    class Counted(quotas_module._Usage):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    monkeypatch.setattr(quotas_module, "_Usage", Counted)
    q = _quotas()
    with q.running("t"), q.waiting("t"):
        q.check_new_cell("t")
    assert len(made) == 1
