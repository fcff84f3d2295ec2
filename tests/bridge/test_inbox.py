"""Inbox allowance: whole replies charged at settlement and released after consumption."""

from __future__ import annotations

import pytest

from bridge.inbox import INBOX_EXCEEDED_MESSAGE, InboxAllowance, arguments_exceeded_message

KIB, MIB = 1024, 1024 * 1024


def test_sequential_pages_reuse_the_allowance() -> None:
    """36 sequential 512 KiB pages fit a 16 MiB inbox because each is released after use."""
    inbox = InboxAllowance(16 * MIB)
    for _ in range(36):
        assert inbox.admit(512 * KIB)
        inbox.release(512 * KIB)
    assert inbox.used == 0


def test_concurrent_replies_over_capacity_refuse_the_second() -> None:
    """Two pending 6 MiB replies under 10 MiB: the first is admitted, the second refused."""
    inbox = InboxAllowance(10 * MIB)
    assert inbox.admit(6 * MIB)
    assert not inbox.admit(6 * MIB)
    assert inbox.used == 6 * MIB and inbox.remaining == 4 * MIB


def test_refused_reply_charges_nothing_and_room_returns_after_release() -> None:
    """A refusal leaves the charge unchanged; after release the same reply fits."""
    inbox = InboxAllowance(100)
    assert inbox.admit(60)
    assert not inbox.admit(41)
    assert inbox.used == 60
    inbox.release(60)
    assert inbox.admit(41)


@pytest.mark.parametrize(
    ("capacity", "sizes", "admitted"),
    [
        (100, [100], [True]),
        (100, [0, 100, 1], [True, True, False]),
        (100, [50, 50, 1], [True, True, False]),
        (0, [0, 1], [True, False]),
    ],
)
def test_admission_table(capacity: int, sizes: list[int], admitted: list[bool]) -> None:
    """An exact fit is admitted; anything past capacity is not."""
    inbox = InboxAllowance(capacity)
    assert [inbox.admit(n) for n in sizes] == admitted
    assert inbox.capacity == capacity


def test_release_all_frees_everything_and_late_releases_do_not_go_negative() -> None:
    """Cancel/expiry releases all; a late consumer release cannot drive usage below zero."""
    inbox = InboxAllowance(10 * MIB)
    assert inbox.admit(3 * MIB) and inbox.admit(4 * MIB)
    inbox.release_all()
    assert inbox.used == 0
    inbox.release(3 * MIB)
    assert inbox.used == 0 and inbox.admit(10 * MIB)


@pytest.mark.parametrize("call", ["admit", "release"])
def test_negative_sizes_are_refused(call: str) -> None:
    """Negative byte counts are a programming error."""
    with pytest.raises(ValueError):
        getattr(InboxAllowance(10), call)(-1)


def test_exceeded_message_tells_what_to_do() -> None:
    """The fixed refusal names the budget and says to paginate or narrow."""
    assert "program-data budget exceeded" in INBOX_EXCEEDED_MESSAGE
    assert "paginate or narrow" in INBOX_EXCEEDED_MESSAGE.lower()


def test_forced_charge_counts_past_capacity_and_releases_exactly() -> None:
    """Data too small to refuse is still counted, so the counter always says what is held."""
    inbox = InboxAllowance(10)
    assert inbox.admit(10)
    inbox.charge(4)
    assert inbox.used == 14 and inbox.remaining == -4
    assert not inbox.admit(1)
    inbox.release(14)
    assert inbox.used == 0


def test_arguments_message_names_sizes_and_what_to_do() -> None:
    """The refusal of oversized arguments gives the sizes and the way out."""
    message = arguments_exceeded_message(7_000_000, 150_000_000, 10_485_760, 7_000_019)
    assert message.startswith("program-data budget exceeded")
    assert "7000000 bytes" in message and "about 150000000 bytes" in message
    assert "10485760 bytes" in message and "7000019 bytes" in message
    assert "less data per call" in message
    assert "held as more than 7000000 bytes" in arguments_exceeded_message(7_000_000, None, 10_485_760, 7_000_019)
