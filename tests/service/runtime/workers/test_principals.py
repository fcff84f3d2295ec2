"""Who may share a confined process, by ``worker_isolation``: a table of keys, sessions and modes."""

from __future__ import annotations

import pytest

from service.principals import cell_principal, helper_principal, policy_fingerprint
from service.settings import ApiKey

NARROW = ApiKey(key="k1", tenant="acme", tools={"deny": ["send_email"]})
NARROW_TWIN = ApiKey(key="k2", tenant="acme", tools={"deny": ["send_email"]})
ADMIN = ApiKey(key="k3", tenant="acme")
OTHER_TENANT = ApiKey(key="k4", tenant="globex", tools={"deny": ["send_email"]})


def test_equal_policies_have_equal_fingerprints_whatever_the_key_order():
    """The fingerprint is of the policy, not of the key's secret or the order of its table."""
    reordered = ApiKey(key="k5", tenant="acme", tools={"approve": ["a"], "deny": ["b"]})
    same = ApiKey(key="k6", tenant="acme", tools={"deny": ["b"], "approve": ["a"]})
    assert policy_fingerprint(reordered) == policy_fingerprint(same)
    assert policy_fingerprint(NARROW) != policy_fingerprint(ADMIN)


@pytest.mark.parametrize(
    ("isolation", "a", "a_session", "b", "b_session", "shared"),
    [
        ("tenant", NARROW, None, ADMIN, None, True),
        ("tenant", NARROW, None, OTHER_TENANT, None, False),
        ("key", NARROW, None, NARROW_TWIN, None, True),
        ("key", NARROW, None, ADMIN, None, False),
        ("key", NARROW, "s1", NARROW, "s2", True),
        ("key", NARROW, None, OTHER_TENANT, None, False),
        ("session", NARROW, "s1", NARROW, "s1", True),
        ("session", NARROW, "s1", NARROW, "s2", False),
        ("session", NARROW, "s1", ADMIN, "s1", False),
        ("cell", NARROW, "s1", NARROW, "s1", False),
    ],
)
def test_two_cells_share_a_process_only_when_their_principals_are_equal(isolation, a, a_session, b, b_session, shared):
    pa = cell_principal(isolation, a, a_session)
    pb = cell_principal(isolation, b, b_session)
    assert (pa is not None and pa == pb) is shared


def test_a_cell_without_a_session_under_session_isolation_shares_with_nobody():
    assert cell_principal("session", NARROW, None) is None
    assert cell_principal("cell", NARROW, "s1") is None


@pytest.mark.parametrize("isolation", ["session", "cell"])
def test_helpers_get_a_fresh_process_per_job_when_the_principal_is_narrower_than_a_key(isolation):
    """A body is decoded before its session id is read: no helper may be shared then."""
    assert helper_principal(isolation, NARROW) is None


def test_helpers_follow_the_cells_principal_for_tenant_and_key_isolation():
    assert helper_principal("tenant", NARROW) == cell_principal("tenant", ADMIN, None)
    assert helper_principal("key", NARROW) == cell_principal("key", NARROW_TWIN, "s1")
    assert helper_principal("key", NARROW) != helper_principal("key", ADMIN)
