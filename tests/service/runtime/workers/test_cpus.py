"""The default number of running slots follows the CPUs the service may use: affinity, then a cgroup's quota."""

from __future__ import annotations

import os

import pytest

from service.cpus import CGROUP_ROOT, cgroup_cpu_quota, idle_halt, usable_cpus
from service.settings import Settings
from tests.conftest import make_client


def _v2(root, text):
    (root / "cpu.max").write_text(text)
    return root


def _v1(root, quota, period):
    (root / "cpu").mkdir()
    (root / "cpu" / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (root / "cpu" / "cpu.cfs_period_us").write_text(f"{period}\n")
    return root


@pytest.mark.parametrize(
    "text,expected",
    [
        ("200000 100000\n", 2),  # docker run --cpus 2
        ("150000 100000\n", 2),  # 1.5 CPUs of time: two guests can use it
        ("50000 100000\n", 1),
        ("max 100000\n", None),  # no quota
        ("garbage\n", None),
    ],
)
def test_a_cgroup_v2_quota_is_read_as_whole_cpus(tmp_path, text, expected):
    """``cpu.max`` of cgroup v2: ``ceil(quota / period)``, none for ``max`` or text it cannot read."""
    assert cgroup_cpu_quota(_v2(tmp_path, text)) == expected


@pytest.mark.parametrize("quota,period,expected", [(300000, 100000, 3), (-1, 100000, None), (0, 100000, None)])
def test_a_cgroup_v1_quota_is_read_as_whole_cpus(tmp_path, quota, period, expected):
    """``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` of cgroup v1; -1 means no quota."""
    assert cgroup_cpu_quota(_v1(tmp_path, quota, period)) == expected


def test_no_cgroup_files_means_no_quota(tmp_path):
    assert cgroup_cpu_quota(tmp_path) is None


def test_usable_cpus_is_this_machines_affinity_capped_by_its_quota():
    """On the machine the suite runs on: the affinity mask, capped by the real cgroup's quota if any."""
    affinity = len(os.sched_getaffinity(0))
    quota = cgroup_cpu_quota(CGROUP_ROOT)
    assert usable_cpus() == (min(affinity, quota) if quota else affinity)


def test_running_slots_default_to_one_per_usable_cpu_and_at_least_two():
    """``running_slots = 0`` (the default) resolves to the usable CPUs, never below 2; a set value is kept."""
    assert Settings().running_slots == 0
    assert Settings().running_slot_count == max(2, usable_cpus())
    assert Settings(running_slots=3).running_slot_count == 3


def test_the_pool_keeps_its_warm_workers_and_one_running_slot_per_cpu(tmp_path):
    """The default service's pool keeps ``workers`` (4) fresh processes, and admits one running leg per
    usable CPU (at least 2) before the burst slots; a set ``running_slots`` is used as it is."""
    from service.assembly import build_components

    svc = build_components(Settings(data_dir=str(tmp_path)).check())
    assert (svc.pool.size, svc.pool.admission.size, svc.pool.admission.burst) == (4, max(2, usable_cpus()), 4)
    svc = build_components(Settings(data_dir=str(tmp_path), running_slots=5).check())
    assert svc.pool.admission.size == 5


def _sysfs(root, driver: str | None, poll_ns: str | None):
    if driver is not None:
        (root / "devices/system/cpu/cpuidle").mkdir(parents=True)
        (root / "devices/system/cpu/cpuidle/current_driver").write_text(f"{driver}\n")
    if poll_ns is not None:
        (root / "module/haltpoll/parameters").mkdir(parents=True)
        (root / "module/haltpoll/parameters/guest_halt_poll_ns").write_text(f"{poll_ns}\n")
    return root


@pytest.mark.parametrize(
    "driver,poll_ns,noted",
    [
        ("haltpoll", "0", True),  # a guest whose idle CPUs halt at once
        ("haltpoll", "200000", False),  # it polls 200 us first
        ("intel_idle", None, False),  # bare metal
        (None, None, False),  # no cpuidle at all
        ("haltpoll", "garbage", False),
    ],
)
def test_a_guest_whose_idle_cpus_halt_at_once_is_named(tmp_path, driver, poll_ns, noted):
    note = idle_halt(_sysfs(tmp_path, driver, poll_ns))
    assert (note is not None) == noted
    if noted:
        assert "guest_halt_poll_ns = 0" in note and "docs/operations/deploy.md" in note


def test_the_service_says_so_at_start_on_such_a_machine(tmp_path, caplog):
    """Where this machine's guest halts at once, the service's start logs why its wake-ups are dear."""
    note = idle_halt()
    with caplog.at_level("INFO", logger="codemode"), make_client(tmp_path):
        pass
    logged = [r.getMessage() for r in caplog.records if "halt" in r.getMessage()]
    assert logged == ([note] if note is not None else [])
