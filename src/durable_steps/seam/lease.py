"""Who owns a run, and whether that owner can be seen to have ended.

A run's lease is two fields of its checkpoint: ``owner`` and ``lease_expires``.
Another worker may take the run over when the lease has expired, or at once
when it can *see* that the owner has ended. The default owner id says where it
lives so that a process on the same machine can tell:

    ds1:<host>:<boot>:<pid>:<process start>:<random>

``boot`` identifies this boot of this machine (and, on Linux, the process's pid
namespace, so that two containers on one kernel never judge each other's
processes). An owner is gone when host and boot are ours and no process with
that pid and start time runs: the pid is free, a zombie, or reused by a later
process. Anything else -- another host, an explicit owner string, a platform
that cannot tell -- counts as alive, and its lease is waited out: a live
process's lease is never taken.

Linux reads /proc; other platforms use psutil (a dependency there) when it
imports, and otherwise cannot tell.

What keeps a lease alive while a step runs is the runner's (``runner.heartbeat``,
``runner.lease_keeper``).
"""

from __future__ import annotations

import functools
import os
import secrets
import socket
import sys
from typing import Any

OWNER_PREFIX = "ds1"


def default_owner() -> str:
    """A new owner id for one call of ``run``: this process, and a random part."""
    host, boot = _here()
    pid = os.getpid()
    return f"{OWNER_PREFIX}:{host}:{boot}:{pid}:{_own_start(pid)}:{secrets.token_hex(4)}"


@functools.cache
def _own_start(pid: int) -> str | None:
    return _started(pid)  # per pid: a forked child has its own


def owner_gone(owner: str) -> bool:
    """True only when ``owner`` is a default owner id of this machine's boot whose
    process has ended; False whenever that cannot be told for sure."""
    parts = owner.split(":")
    if len(parts) != 6 or parts[0] != OWNER_PREFIX:
        return False
    _, host, boot, pid_text, started, _ = parts
    here, my_boot = _here()
    if host != here or not _same_boot(boot, my_boot) or not pid_text.isdigit() or started == "?":
        return False
    now = _started(int(pid_text))
    return now is None or now not in ("?", started)


def lease_holder(cp: Any, me: str, now: float) -> str | None:
    """The owner that holds a live lease on ``cp`` against ``me``; None when the run
    is free for ``me``: no lease, ``me``'s own, expired, or its owner visibly gone."""
    owner, expires = cp.owner, cp.lease_expires
    if owner is None or owner == me or expires is None or expires <= now:
        return None
    return None if owner_gone(owner) else owner


def _same_boot(theirs: str, mine: str) -> bool:
    """Whether two boot ids name this boot. Linux's are exact. psutil's boot time is
    recomputed in each process as now minus uptime (psutil #1007), so two processes of
    one boot may see it a second apart; two boots are never that close, and the pid and
    start time still tell processes apart."""
    if "?" in theirs or "?" in mine:
        return False
    if theirs == mine:
        return True
    if theirs[:1] == mine[:1] == "t" and theirs[1:].isdigit() and mine[1:].isdigit():
        return abs(int(theirs[1:]) - int(mine[1:])) <= _BOOT_WOBBLE
    return False


_BOOT_WOBBLE = 2
"""Seconds two processes of one boot may disagree on psutil's boot time."""


@functools.cache
def _here() -> tuple[str, str]:
    host = (socket.gethostname() or "?").replace(":", "_")
    return host, _boot()


def _boot() -> str:
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/sys/kernel/random/boot_id") as f:
                boot = f.read().strip()
            pidns = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
            return f"{boot}.{pidns.removeprefix('pid:[').rstrip(']')}"
        except OSError:
            return "?"
    psutil = _psutil()
    return "?" if psutil is None else f"t{int(psutil.boot_time())}"


def _started(pid: int) -> str | None:
    """The start time of process ``pid`` as text ('?' if it cannot be read), None if
    no such process runs (or only its zombie remains)."""
    if not sys.platform.startswith("linux"):
        return _started_psutil(pid)
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return None
    except OSError:
        return "?"
    fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) "
    if fields[0] in (b"Z", b"X"):
        return None
    return fields[19].decode()  # field 22: start time in clock ticks since boot


def _started_psutil(pid: int) -> str | None:
    psutil = _psutil()
    if psutil is None:
        return "?"
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return f"{proc.create_time():.3f}"
    except psutil.NoSuchProcess:
        return None
    except psutil.Error:
        return "?"


def _psutil() -> Any:
    try:
        import psutil
    except ImportError:
        return None
    return psutil


def owner_process(owner: str) -> tuple[str, str, int, str] | None:
    """The process a default owner id names -- ``(host, boot, pid, start)`` -- so that
    the leases of one worker process group together whatever their random parts; None
    for an owner id given explicitly (``--owner``)."""
    parts = owner.split(":")
    if len(parts) != 6 or parts[0] != OWNER_PREFIX or not parts[3].isdigit():
        return None
    return parts[1], parts[2], int(parts[3]), parts[4]


def owner_label(owner: str) -> str:
    """An owner id as people read it: ``host pid N`` for a default one (its boot id,
    process start and random part tell machines apart, not people); others as given."""
    process = owner_process(owner)
    return owner if process is None else f"{process[0]} pid {process[2]}"
