"""Owner ids and "has this owner ended?": the check that lets a crashed local run resume at
once while a live process's lease is never taken."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from durable_steps.seam import lease

SPAWN = [
    sys.executable,
    "-c",
    "import sys; from durable_steps.seam import lease; print(lease.default_owner())",
]


def owner_of_ended_process() -> str:
    done = subprocess.run(SPAWN, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_default_owner_names_host_boot_process_and_a_random_part() -> None:
    """Each call gets its own id; the id names this host, boot and process."""
    a, b = lease.default_owner(), lease.default_owner()
    assert a != b
    prefix, host, boot, pid, started, _ = a.split(":")
    assert (prefix, pid) == ("ds1", str(os.getpid()))
    assert (host, boot) == lease._here()
    assert started == lease._started(os.getpid())


def test_a_live_process_is_never_gone() -> None:
    """This process, and another live one, are not gone: their leases are waited out."""
    assert not lease.owner_gone(lease.default_owner())
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from durable_steps.seam import lease\n"
            "print(lease.default_owner(), flush=True); input()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None
        owner = child.stdout.readline().strip()
        assert not lease.owner_gone(owner)
        child.communicate("\n")
    assert lease.owner_gone(owner)


def test_an_ended_process_is_gone_even_if_its_pid_is_reused() -> None:
    """A process that exited is gone; an id naming a live pid with another start time
    (the pid reused by a later process) is gone too."""
    assert lease.owner_gone(owner_of_ended_process())
    prefix, host, boot, pid, started, rand = lease.default_owner().split(":")
    assert lease.owner_gone(":".join([prefix, host, boot, pid, started + "1", rand]))


@pytest.mark.parametrize(
    "owner",
    [
        "worker-7",  # an explicit owner string: nobody can tell
        "ds1:other-host:{boot}:1:1:ab",  # another host
        "ds1:{host}:another-boot:1:1:ab",  # this host, another boot or pid namespace
        "ds1:{host}:{boot}:notapid:1:ab",
        "ds1:{host}:{boot}:1:?:ab",  # a start time the owner could not read
        "ds1:too:few",
    ],
)
def test_when_in_doubt_the_owner_is_alive(owner: str) -> None:
    """Anything this machine cannot judge for sure counts as alive."""
    host, boot = lease._here()
    assert not lease.owner_gone(owner.format(host=host, boot=boot))


def test_a_zombie_counts_as_ended() -> None:
    """A killed child not yet reaped by its parent is gone (both implementations)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 60
    while lease._started(child.pid) is not None:  # exited, not reaped: a zombie
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert lease._started_psutil(child.pid) is None
    child.wait()


def test_the_psutil_path_agrees_with_proc() -> None:
    """The implementation used off Linux (psutil) tells live from ended the same way."""
    me = lease._started_psutil(os.getpid())
    assert me is not None and me != "?"
    assert lease._started_psutil(os.getpid()) == me  # stable for one process
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert lease._started_psutil(int(done.stdout)) is None


def test_processes_that_disagree_on_boot_time_by_a_second_agree_an_owner_is_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Off Linux the boot part of an owner id comes from psutil.boot_time(). Where that
    wobbles between processes (Windows), an ended owner of this machine must still be
    seen as gone by another process of the same boot."""
    import psutil

    boots = iter([1_700_000_000.9996, 1_700_000_001.0004])  # one boot, seen by two processes
    fake = type(
        "FakePsutil",
        (),
        {
            "boot_time": staticmethod(lambda: next(boots)),
            "Process": psutil.Process,
            "STATUS_ZOMBIE": psutil.STATUS_ZOMBIE,
            "NoSuchProcess": psutil.NoSuchProcess,
            "Error": psutil.Error,
        },
    )
    monkeypatch.setattr(lease.sys, "platform", "win32")
    monkeypatch.setattr(lease, "_psutil", lambda: fake)
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    try:
        lease._here.cache_clear()  # the owner's process
        prefix, host, boot, _, _, rand = lease.default_owner().split(":")
        owner = ":".join([prefix, host, boot, ended.stdout.strip(), "1700000123.456", rand])
        lease._here.cache_clear()  # another process of the same boot
        assert lease.owner_gone(owner)
    finally:
        lease._here.cache_clear()
