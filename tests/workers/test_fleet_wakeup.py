"""Real worker processes on one FileStore: a start, a signal and a child's end wake
idle workers at once (their poll is a minute: only the wake-up explains a pickup);
a SIGKILLed worker's runs are taken by the live workers' next looks (its lease is ten
minutes: only the dead pid explains a takeover) -- no run lost, none run twice.

The workers are shared by the module's tests (started once, one store)."""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable_steps as ds

from ..helpers.clitools import CLEAN, SCRIPT
from ..helpers.waiting import wait_until

FLOWS = textwrap.dedent(
    """
    import os, time
    from pathlib import Path
    import durable_steps as ds

    EFFECTS = Path(os.environ["EFFECTS"])

    def effect(line):
        with EFFECTS.open("a") as f:  # (one short append: lines do not interleave)
            f.write(line + "\\n")

    def quick(state):
        effect(f"quick {state['id']}")
        return {"began": time.time()}

    def signalled(state):
        return {"got": ds.wait_for_signal("go")}

    def child(state):
        return {"x": state["x"] * 2}

    def parent(state):
        ds.start_child("child", state["id"] + ".c", {"x": 21})
        return {"child": ds.await_child(state["id"] + ".c", poll=3600)}

    def hold(state):
        effect(f"began {state['id']} {os.getpid()}")
        while not Path(os.environ["RELEASE"]).exists():
            time.sleep(0.02)
        effect(f"done {state['id']}")
        return {}

    FLOWS = [
        ds.Workflow("quick", [ds.Step("q", quick)]),
        ds.Workflow("signalled", [ds.Step("s", signalled)]),
        ds.Workflow("child", [ds.Step("c", child)]),
        ds.Workflow("parent", [ds.Step("p", parent)]),
        ds.Workflow("hold", [ds.Step("h", hold)]),
    ]
    """
)
QUICK = ds.Workflow("quick", [])
SIGNALLED = ds.Workflow("signalled", [])
PARENT = ds.Workflow("parent", [])
HOLD = ds.Workflow("hold", [])


class Fleet:
    def __init__(self, base: Path) -> None:
        self.base, self.store_path = base, base / "store"
        (base / "flows.py").write_text(FLOWS)
        self.effects, self.release = base / "effects", base / "release"
        self.env = {
            **CLEAN,
            "DURABLE_STORE": "file",
            "DURABLE_FILE_PATH": str(self.store_path),
            "EFFECTS": str(self.effects),
            "RELEASE": str(self.release),
        }
        self.store = ds.FileStore(self.store_path)
        self.procs: list[subprocess.Popen[bytes]] = []

    def worker(self, *args: str) -> subprocess.Popen[bytes]:
        # A poll of a minute and a lease of ten: neither explains what the tests see.
        command = [SCRIPT, "worker", "flows:FLOWS", "--lease", "600", *args]
        with (self.base / f"worker-{len(self.procs)}.err").open("w") as err:
            proc = subprocess.Popen(
                command, cwd=self.base, env=self.env, stdout=subprocess.DEVNULL, stderr=err
            )
        self.procs.append(proc)
        return proc

    def lines(self) -> list[str]:
        return self.effects.read_text().splitlines() if self.effects.exists() else []

    def registered(self) -> int:
        procs = self.store_path / "procs"
        return sum(1 for p in procs.iterdir() if not p.name.startswith(".") and p.read_text())

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        self.store.close()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    f = Fleet(tmp_path_factory.mktemp("fleet"))
    try:
        for _ in range(2):
            f.worker("--interval", "60", "--concurrency", "8")
        wait_until(lambda: (f.store_path / "procs").is_dir() and f.registered() == 2, "workers")
        yield f
    finally:
        f.close()


def _result(store: ds.Store, run_id: str) -> dict[str, object]:
    return ds.wait_for_result(store, run_id, timeout=50, interval=0.01)


def test_a_started_run_is_picked_up_at_once_not_at_the_next_poll(fleet: Fleet) -> None:
    """Workers that poll every 60 s (and looked when they began) take each of several
    started runs well before their next poll: the start woke them."""
    for i in range(5):
        started = time.time()
        QUICK.start(f"wake-{i}", fleet.store, input={"id": f"wake-{i}"})
        began = _result(fleet.store, f"wake-{i}")["began"]
        assert isinstance(began, float)
        assert began - started < 30, "picked up by a poll, not a wake-up"


def test_a_signal_and_a_childs_end_wake_the_waiting_run(fleet: Fleet) -> None:
    """A run waiting for a signal resumes as soon as it is sent; a parent waiting for
    its child (whose own poll is an hour) resumes as soon as the child ends."""
    SIGNALLED.start("sig", fleet.store, input={"id": "sig"})
    wait_until(lambda: (cp := fleet.store.load("sig")) and cp.status == "waiting", "waiting")
    sent = time.time()
    ds.send_signal(fleet.store, "sig", "go", 7)
    assert _result(fleet.store, "sig")["got"] == 7
    assert time.time() - sent < 30
    started = time.time()
    PARENT.start("parent", fleet.store, input={"id": "parent"})
    assert _result(fleet.store, "parent")["child"] == {"x": 42}
    assert time.time() - started < 40  # (three pickups and the parent's wake-up)


def test_every_run_of_a_burst_runs_once_across_the_workers(fleet: Fleet) -> None:
    """60 runs started at once through two workers: each runs exactly once."""
    ids = [f"burst-{i}" for i in range(60)]
    for run_id in ids:
        QUICK.start(run_id, fleet.store, input={"id": run_id})
    for run_id in ids:
        _result(fleet.store, run_id)
    ran = Counter(line.split()[1] for line in fleet.lines() if line.startswith("quick burst-"))
    assert ran == dict.fromkeys(ids, 1)


def test_a_sigkilled_workers_runs_are_taken_by_a_live_workers_look(
    tmp_path: Path,
) -> None:
    """Worker A holds six runs in their steps (it is full); worker B, up and looking
    already (it ran a run A had no room for), sees A SIGKILLed at its next look -- A's
    leases have ten minutes to go, and B's first (full) look is long past -- and takes
    the six; released, each completes exactly once, none lost."""
    f = Fleet(tmp_path)
    try:
        a = f.worker("--interval", "0.5", "--concurrency", "6")
        ids = [f"hold-{i}" for i in range(6)]
        for run_id in ids:
            HOLD.start(run_id, f.store, input={"id": run_id})

        def began(run_id: str) -> list[str]:
            return [p.split()[2] for p in f.lines() if p.startswith(f"began {run_id} ")]

        wait_until(lambda: all(began(r) == [str(a.pid)] for r in ids), "A holds the six")
        b = f.worker("--interval", "0.5", "--concurrency", "8")
        for run_id in ("b-looks", "b-looks-again"):  # (A is full: B takes them)
            QUICK.start(run_id, f.store, input={"id": run_id})
            _result(f.store, run_id)  # the second through a look past B's first, full one
        os.kill(a.pid, signal.SIGKILL)
        a.wait()
        wait_until(
            lambda: all(began(r) == [str(a.pid), str(b.pid)] for r in ids),
            "A's runs begun again by B",
            timeout=60,
        )
        f.release.touch()
        for run_id in ids:
            _result(f.store, run_id)
        done = Counter(line.split()[1] for line in f.lines() if line.startswith("done hold"))
        assert done == dict.fromkeys(ids, 1)
        assert b.poll() is None
    finally:
        f.close()
