"""CellStoreWrites: the per-cell buffer behind store()/load()."""

from __future__ import annotations

import pytest

from service.stores import StoreKeyError, StoreLimitError, StoreLimits, StoreTypeError, charged_total
from service.stores.cell_writes import CellStoreWrites

LIMITS = StoreLimits()
KIB = 1024


def json_of_bytes(total: int) -> str:
    """Return a JSON string literal whose compact text is exactly ``total`` bytes."""
    return '"' + "a" * (total - 2) + '"'


INVALID_KEYS = [
    "",
    "x" * 257,
    "é" * 257,
    "😀" * 129,  # 129 code points but 258 UTF-16 units, as JS key.length counts
    "\ud800",
    1,
    1.5,
    None,
    True,
    ["a"],
    {"a": 1},
]


@pytest.mark.parametrize("key", INVALID_KEYS, ids=repr)
def test_invalid_keys_are_type_errors(key: object) -> None:
    """Keys that are not strings of 1-256 UTF-16 units raise StoreKeyError (TypeError) on set and get."""
    writes = CellStoreWrites({}, LIMITS)
    with pytest.raises(StoreKeyError) as caught:
        writes.set(key, "1")
    assert isinstance(caught.value, StoreTypeError)
    assert caught.value.code == "store_type"
    with pytest.raises(StoreKeyError):
        writes.get(key)
    assert writes.pending() == ({}, ())


@pytest.mark.parametrize("key", ["k", "x" * 256, "é" * 256, "😀" * 128, "__proto__"], ids=len)
def test_boundary_keys_are_accepted(key: str) -> None:
    """Keys of 1 and exactly 256 UTF-16 units are accepted."""
    writes = CellStoreWrites({}, LIMITS)
    writes.set(key, "true")
    assert writes.get(key) == "true"


def test_non_text_value_is_type_error() -> None:
    """A value that is not JSON text is refused as a type error."""
    with pytest.raises(StoreTypeError):
        CellStoreWrites({}, LIMITS).set("k", b"1")  # type: ignore[arg-type]


def test_get_sees_snapshot_then_buffer() -> None:
    """load sees committed values, then the cell's own writes and deletes at once."""
    writes = CellStoreWrites({"a": "1", "b": "2"}, LIMITS)
    assert writes.get("a") == "1"
    assert writes.get("missing") is None
    writes.set("a", '"new"')
    writes.set("b", None)
    writes.set("c", "null")
    assert (writes.get("a"), writes.get("b"), writes.get("c")) == ('"new"', None, "null")


def test_pending_lists_sets_and_deletes() -> None:
    """pending() returns final sets and deletes; a set then delete of a key the session did not hold
    leaves nothing to commit."""
    writes = CellStoreWrites({"a": "1"}, LIMITS)
    assert not writes.has_pending()
    writes.set("a", None)
    writes.set("b", "2")
    writes.set("tmp", "3")
    writes.set("tmp", None)
    writes.set("b", "4")
    assert writes.pending() == ({"b": "4"}, ("a",))
    assert writes.has_pending()


def test_deleting_absent_keys_buffers_nothing() -> None:
    """However many keys the session never held a cell deletes, the buffer does not grow."""
    writes = CellStoreWrites({"kept": "1"}, LIMITS)
    for i in range(10_000):
        writes.set("k" * 250 + str(i), None)
    assert not writes.has_pending() and writes.pending() == ({}, ())
    writes.set("kept", None)
    assert writes.pending() == ({}, ("kept",)) and writes.get("kept") is None


def test_snapshot_is_not_mutated() -> None:
    """Buffered writes never change the snapshot mapping the buffer was built from."""
    snapshot = {"a": "1"}
    writes = CellStoreWrites(snapshot, LIMITS)
    writes.set("a", None)
    writes.set("b", "2")
    assert snapshot == {"a": "1"}


def test_oversized_value_is_range_error_and_buffer_unchanged() -> None:
    """A value over 256 KiB raises StoreLimitError (guest RangeError) and leaves the buffer as it was."""
    writes = CellStoreWrites({"a": "1"}, LIMITS)
    writes.set("a", "2")
    with pytest.raises(StoreLimitError) as caught:
        writes.set("a", json_of_bytes(256 * KIB + 1))
    assert caught.value.code == "store_range"
    assert writes.get("a") == "2"
    assert writes.pending() == ({"a": "2"}, ())
    writes.set("a", json_of_bytes(256 * KIB))


def test_total_over_one_mib_is_range_error() -> None:
    """A write that takes committed + buffered state past 1 MiB is refused; nothing changes."""
    snapshot = {f"k{i}": json_of_bytes(250 * KIB) for i in range(3)}
    writes = CellStoreWrites(snapshot, LIMITS)
    writes.set("k3", json_of_bytes(250 * KIB))
    before = (writes.pending(), writes.total_bytes)
    with pytest.raises(StoreLimitError):
        writes.set("k4", json_of_bytes(30 * KIB))
    assert (writes.pending(), writes.total_bytes) == before
    assert writes.get("k4") is None


def test_delete_frees_room() -> None:
    """Deleting a key (committed or buffered) makes room for a write that did not fit."""
    snapshot = {f"k{i}": json_of_bytes(250 * KIB) for i in range(4)}
    writes = CellStoreWrites(snapshot, LIMITS)
    with pytest.raises(StoreLimitError):
        writes.set("extra", json_of_bytes(100 * KIB))
    writes.set("k0", None)
    writes.set("extra", json_of_bytes(100 * KIB))
    writes.set("extra", None)
    writes.set("extra2", json_of_bytes(250 * KIB))
    assert writes.pending() == ({"extra2": json_of_bytes(250 * KIB)}, ("k0",))


def test_total_counts_key_and_value_bytes() -> None:
    """The running total equals UTF-8 key bytes plus value bytes, and fills exactly to 1 MiB."""
    writes = CellStoreWrites({"é": '"ü"'}, LIMITS)
    assert writes.total_bytes == 2 + 4
    for i in range(3):
        writes.set(f"k{i}", json_of_bytes(256 * KIB))
    room = LIMITS.max_total_bytes - writes.total_bytes
    with pytest.raises(StoreLimitError):
        writes.set("z", json_of_bytes(room))
    writes.set("z", json_of_bytes(room - 1))
    assert writes.total_bytes == LIMITS.max_total_bytes
    sets, _ = writes.pending()
    sizes = {"é": 4} | {key: len(text.encode()) for key, text in sets.items()}
    assert charged_total(sizes) == writes.total_bytes


def test_overwrite_charges_only_the_difference() -> None:
    """Replacing a large value with another large value fits when the session is nearly full."""
    snapshot = {f"k{i}": json_of_bytes(255 * KIB) for i in range(4)}
    writes = CellStoreWrites(snapshot, LIMITS)
    writes.set("k0", json_of_bytes(256 * KIB))
    assert writes.get("k0") == json_of_bytes(256 * KIB)


def test_custom_limits_apply() -> None:
    """Limits passed in (not module defaults) govern key length and sizes."""
    writes = CellStoreWrites({}, StoreLimits(max_key_chars=3, max_value_bytes=10, max_total_bytes=20))
    writes.set("abc", "1234567890")
    with pytest.raises(StoreKeyError):
        writes.set("abcd", "1")
    with pytest.raises(StoreLimitError):
        writes.set("x", "12345678901")
    with pytest.raises(StoreLimitError):
        writes.set("y", "1234567")


def test_tenant_quotas_are_checked_at_the_call_site() -> None:
    """With the tenant's usage known, a write over tenant_store_bytes or tenant_max_sessions is refused
    (StoreQuotaError, a StoreLimitError) and the buffer is unchanged; shrinking is always allowed."""
    from service.stores import StoreQuotaError

    limits = StoreLimits(max_tenant_bytes=2000, max_tenant_sessions=2)
    snapshot = {"k": json_of_bytes(499)}  # this session: 500 bytes of the tenant's 1500
    writes = CellStoreWrites(snapshot, limits, tenant_usage=(1500, 2))
    writes.set("k2", json_of_bytes(500 - 2))
    with pytest.raises(StoreQuotaError, match="tenant_store_bytes"):
        writes.set("k3", "1")
    assert writes.get("k3") is None and writes.total_bytes == 1000
    writes.set("k", None)
    fresh = CellStoreWrites({}, limits, tenant_usage=(10, 2))
    with pytest.raises(StoreLimitError, match="tenant_max_sessions"):
        fresh.set("a", "1")
    assert not fresh.has_pending()
