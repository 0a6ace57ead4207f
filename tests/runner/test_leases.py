"""One worker per run, proven with real processes: leases, heartbeats, takeover, recovery,
on the file store and on CosmosStore (cosmos-local)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds

from ..helpers import lease_child  # the workflows the children run, for recover() here
from ..helpers.waiting import wait_until

CHILD = str(Path(__file__).parents[1] / "helpers" / "lease_child.py")


@dataclass
class Workers:
    """Child processes sharing one store, configured by environment."""

    env: dict[str, str]
    tmp: Path
    started: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def effects(self) -> Path:
        return self.tmp / "effects.log"

    def spawn(self, *args: str, **extra: str) -> subprocess.Popen[str]:
        env = {**os.environ, **self.env, "SIDE_EFFECTS": str(self.effects), **extra}
        proc = subprocess.Popen(
            [sys.executable, CHILD, *args],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.started.append(proc)
        return proc

    def kill_the_rest(self) -> None:
        """A test that failed early must not leave children waiting forever."""
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()

    def run(self, *args: str, **extra: str) -> dict[str, Any]:
        proc = self.spawn(*args, **extra)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        return json.loads(out.splitlines()[-1])  # type: ignore[no-any-return]

    def log(self) -> list[str]:
        return self.effects.read_text().split() if self.effects.exists() else []

    def store(self) -> Any:
        return ds.store_from_env(self.env)


@pytest.fixture
def workers(env: dict[str, str], tmp_path: Path) -> Iterator[Workers]:
    children = Workers(env, tmp_path)
    yield children
    children.kill_the_rest()


def test_second_worker_is_refused_while_the_first_runs(workers: Workers, run_id: str) -> None:
    """Worker A is inside a step; worker B, started meanwhile, gets RunLeasedError naming A,
    runs nothing and writes nothing; A then completes, and its step ran once."""
    release = workers.tmp / "release"
    a = workers.spawn("hold", run_id, RELEASE=str(release))
    wait_until(lambda: f"{run_id}:hold:1" in workers.log(), "A to start its step")
    store = workers.store()
    before = store.load(run_id)
    b = workers.run("hold", run_id, RELEASE=str(release))
    assert b["error"] == "RunLeasedError"
    assert b["owner"] == before.owner
    assert store.load(run_id) == before  # B wrote nothing
    release.touch()
    out, err = a.communicate(timeout=120)
    assert a.returncode == 0, err
    assert json.loads(out)["result"] == {"hold": 1, "after": 1}
    assert workers.log() == [f"{run_id}:hold:1", f"{run_id}:after:1"]
    cp = store.load(run_id)
    assert (cp.status, cp.owner, cp.lease_expires) == ("completed", None, None)


def test_heartbeat_keeps_a_step_longer_than_the_lease(workers: Workers, run_id: str) -> None:
    """A step runs past the end of the lease it was claimed with: its heartbeat renewed the
    lease meanwhile, so workers trying after that first lease expired are all refused
    and the step runs once. (The lease is 6 s, renewed every 2 s: a loaded machine may
    delay a heartbeat by up to 4 s before a takeover would be right.)"""
    release = workers.tmp / "release"
    a = workers.spawn("hold", run_id, RELEASE=str(release), LEASE="6")
    wait_until(lambda: f"{run_id}:hold:1" in workers.log(), "A to start its step")
    store = workers.store()
    first = store.load(run_id).lease_expires
    wait_until(lambda: time.time() > first, "the lease A claimed the run with to expire")
    for _ in range(2):
        assert workers.run("hold", run_id, RELEASE=str(release))["error"] == "RunLeasedError"
    assert store.load(run_id).lease_expires > first  # renewed by the heartbeat
    release.touch()
    out, _ = a.communicate(timeout=120)
    assert json.loads(out)["result"] == {"hold": 1, "after": 1}
    assert workers.log() == [f"{run_id}:hold:1", f"{run_id}:after:1"]


def test_crashed_worker_with_default_owner_is_taken_over_at_once(
    workers: Workers, run_id: str
) -> None:
    """SIGKILL a worker mid-step (default owner, 60 s lease): this machine can see the
    process is gone, so an immediate run in another process resumes at attempt 2."""
    a = workers.spawn("hold", run_id)
    wait_until(lambda: f"{run_id}:hold:1" in workers.log(), "A to start its step")
    a.send_signal(signal.SIGKILL)
    a.communicate()
    release = workers.tmp / "release"
    release.touch()
    b = workers.run("hold", run_id, RELEASE=str(release))
    assert b["result"] == {"hold": 2, "after": 1}
    assert workers.log() == [f"{run_id}:hold:1", f"{run_id}:hold:2", f"{run_id}:after:1"]


def test_crashed_worker_with_explicit_owner_waits_for_expiry_then_recovers(
    workers: Workers, run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL a worker that runs with an explicit owner and a 5 s lease: nobody can tell
    it is gone, so a run right after is refused; once the lease expired, recover() resumes
    the run to completion with attempt 2."""
    a = workers.spawn("hold", run_id, OWNER="worker-a", LEASE="5")
    wait_until(lambda: f"{run_id}:hold:1" in workers.log(), "A to start its step")
    a.send_signal(signal.SIGKILL)
    a.communicate()
    store = workers.store()
    with pytest.raises(ds.RunLeasedError) as refused:
        lease_child.HOLD.run(run_id, store)
    assert refused.value.owner == "worker-a"
    wait_until(lambda: time.time() > refused.value.expires_at, "the lease to expire")
    monkeypatch.setenv("RELEASE", str(workers.tmp / "release"))
    monkeypatch.setenv("SIDE_EFFECTS", str(workers.effects))
    (workers.tmp / "release").touch()
    done = ds.recover(store, [lease_child.HOLD, lease_child.RACE])
    mine = [r for r in done if r.run_id == run_id]
    assert [(r.outcome, r.workflow) for r in mine] == [("completed", "hold")]
    assert workers.log() == [f"{run_id}:hold:1", f"{run_id}:hold:2", f"{run_id}:after:1"]


@pytest.mark.slow
def test_eight_processes_racing_on_the_same_runs_run_each_step_once(
    workers: Workers, run_id: str
) -> None:
    """8 processes run the same 12 runs at once, without a crash: every step's side effect
    happens exactly once; every other attempt got RunLeasedError or a completed run. (Run
    0's first step waits until some worker was refused, so the workers do meet.)"""
    go, ready = workers.tmp / "go", workers.tmp / "ready"
    ready.mkdir()
    extra = {"GO": str(go), "READY": str(ready), "REFUSED": str(workers.tmp / "refused")}
    procs = [workers.spawn("race", run_id, "12", **extra) for _ in range(8)]
    wait_until(lambda: len(list(ready.iterdir())) == 8, "the 8 workers to be ready")
    go.touch()
    outcomes: list[dict[str, Any]] = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outcomes += [json.loads(line) for line in out.splitlines()]
    assert len(outcomes) == 8 * 12
    assert {o.get("error") for o in outcomes} <= {None, "RunLeasedError"}
    counts = Counter(workers.log())
    expected = {f"{run_id}-{i}:{s}:1" for i in range(12) for s in "abc"}
    assert set(counts) == expected
    assert set(counts.values()) == {1}
    store = workers.store()
    for i in range(12):
        assert store.load(f"{run_id}-{i}").status == "completed"
    assert any(o.get("error") == "RunLeasedError" for o in outcomes)


def test_a_kill_between_retry_attempts_counts_and_resumes_with_the_next(
    workers: Workers, run_id: str
) -> None:
    """A retrying step is killed during its backoff: the attempt is durable, so the run
    resumes (at once: the owner is gone) with the next attempt number, and the crash
    counts against the retries."""
    a = workers.spawn("retry", run_id, BACKOFF="60")
    store = workers.store()
    wait_until(lambda: (cp := store.load(run_id)) and cp.attempt == 2, "attempt 1 to fail")
    a.send_signal(signal.SIGKILL)
    a.communicate()
    b = workers.run("retry", run_id, BACKOFF="0")
    assert b["error"] is not None
    attempts = [int(line.split(":")[-1]) for line in workers.log()]
    assert attempts == [1, 3, 4, 5]  # attempt 2 was the crash
    cp = store.load(run_id)
    assert (cp.status, cp.error["type"], cp.error["attempt"]) == ("failed", "TimeoutError", 5)


# -- the heartbeat's scheduler ---------------------------------------------------------------

SCHEDULER = """
import threading, time
from durable_steps.runner.heartbeat import Heartbeat

waits = 0

class Counting(threading.Condition):
    def wait(self, timeout=None):
        global waits
        waits += 1
        return super().wait(timeout)

Heartbeat._cond = Counting()  # before the scheduler thread exists
slow = Heartbeat(lambda: None, 60)
slow.arm()  # the scheduler now sleeps for up to 60 s
deadline = time.monotonic() + 60
while not waits and time.monotonic() < deadline:
    time.sleep(0.001)
time.sleep(0.05)
settled = waits
for _ in range(200):
    slow.disarm()
    time.sleep(0.0005)  # a step
    slow.arm()
slow.disarm()
time.sleep(0.05)
idle = waits - settled
beats = []
fast = Heartbeat(lambda: beats.append(1), 0.05)
fast.arm()  # due long before the scheduler's wake-up: it must be woken
while len(beats) < 2 and time.monotonic() < deadline:
    time.sleep(0.005)
print(idle, len(beats))
"""


def test_arming_a_heartbeat_each_step_does_not_wake_the_scheduler_each_time() -> None:
    """A run arms and disarms its heartbeat around every step: a beat due later than the
    scheduler's planned wake-up does not wake it (that would be a thread switch per
    step), yet a beat due sooner does, and is made. (In a fresh process, so that the
    scheduler's condition can be counted from its start.)"""
    done = subprocess.run(
        [sys.executable, "-c", SCHEDULER],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    idle_wakes, beats = map(int, done.stdout.split())
    assert idle_wakes <= 2  # not one per arm
    assert beats >= 2
