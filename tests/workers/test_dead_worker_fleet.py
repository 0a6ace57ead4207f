"""A SIGKILLed worker's runs, on the file store and cosmos-local, with real worker
processes whose leases are ten minutes (only the dead pid explains a takeover):

- they are taken by the live workers' looks at once -- not only by a worker's first
  look (each live worker here is past it, shown by a run it took after) -- none lost,
  none run twice;
- a queue takes them back in the order their runs were started, before every run
  started after them (their claims did not move their place)."""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import uuid
from collections import Counter
from pathlib import Path

import pytest

import durable_steps as ds

from ..helpers.waiting import wait_until
from ..helpers.worker_process import stderr_of, worker, workers_die_with_their_test  # noqa: F401

FLOWS = textwrap.dedent(
    """
    import os, time
    from pathlib import Path
    import durable_steps as ds

    EFFECTS, RELEASE = Path(os.environ["EFFECTS"]), Path(os.environ["RELEASE"])

    def effect(line):
        with EFFECTS.open("a") as f:  # (one short append: lines do not interleave)
            f.write(line + "\\n")

    def hold(state):
        effect(f"began {state['id']} {os.getpid()}")
        while not RELEASE.exists():
            time.sleep(0.02)
        effect(f"done {state['id']}")
        return {}

    FLOWS = [
        ds.Workflow("hold", [ds.Step("h", hold)]),
        ds.Workflow("lined", [ds.Step("h", hold)], queue=ds.Queue("line", concurrency=2)),
        ds.Workflow("probe", [ds.Step("p", lambda s: effect(f"probe {s['id']} {os.getpid()}"))]),
    ]
    """
)
HOLD, LINED, PROBE = ds.Workflow("hold", []), ds.Workflow("lined", []), ds.Workflow("probe", [])


class Machine:
    """Worker processes of one store in one directory, and what their runs did."""

    def __init__(self, env: dict[str, str], base: Path) -> None:
        self.base, self.tag = base, uuid.uuid4().hex[:8]  # (cosmos-local: a shared container)
        (base / "flows.py").write_text(FLOWS)
        self.effects, self.release = base / "effects", base / "release"
        self.env = {**env, "EFFECTS": str(self.effects), "RELEASE": str(self.release)}
        self.store = ds.store_from_env(env)
        self.n, self.probes = 0, 0

    def worker(self, *args: str) -> subprocess.Popen[str]:
        cwd = self.base / f"w{self.n}"
        self.n += 1
        cwd.mkdir()
        (cwd / "flows.py").write_text(FLOWS)
        # A lease of ten minutes: only the dead pid explains a takeover.
        proc = worker(self.env, cwd, "flows:FLOWS", "--lease", "600", "--interval", "0.5", *args)
        wait_until(lambda: "recovering runs of" in stderr_of(cwd), "the worker", timeout=120)
        return proc

    def lines(self, kind: str) -> list[list[str]]:
        text = self.effects.read_text() if self.effects.exists() else ""
        return [line.split()[1:] for line in text.splitlines() if line.startswith(kind + " ")]

    def began(self, run_id: str) -> list[str]:
        return [pid for r, pid in self.lines("began") if r == run_id]

    def past_first_looks(self, *procs: subprocess.Popen[str]) -> None:
        """Quick runs started one after another until each of ``procs`` took two: the
        second through a look past its first (full) one (the others have no room)."""
        pids = {str(p.pid) for p in procs}
        for i in range(60):
            run_id = f"{self.tag}-probe-{i}"
            PROBE.start(run_id, self.store, input={"id": run_id})
            wait_until(lambda: any(r == run_id for r, _ in self.lines("probe")), "the probe")  # noqa: B023
            took = Counter(pid for _, pid in self.lines("probe"))
            if all(took[pid] >= 2 for pid in pids):
                self.probes = i + 1
                return
        raise AssertionError(f"the workers did not take two probes each: {took}")

    def kill(self, proc: subprocess.Popen[str]) -> None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()

    def finish(self, ids: list[str], quick: list[str] | None = None) -> None:
        """Release the runs: each completes, exactly once (and the ``quick`` ones)."""
        self.release.touch()
        for run_id in ids + (quick or []):
            ds.wait_for_result(self.store, run_id, timeout=120, interval=0.02)
        assert Counter(r for (r,) in self.lines("done")) == dict.fromkeys(ids, 1)
        self.store.close()


def test_a_killed_queued_run_keeps_its_place(env: dict[str, str], tmp_path: Path) -> None:
    """20 runs on a queue of concurrency 2; the worker holding the two oldest is
    SIGKILLed; the live worker begins those two again before any of the 18 others."""
    m = Machine(env, tmp_path)
    ids = [f"{m.tag}-q{i:02}" for i in range(20)]
    for run_id in ids:
        LINED.start(run_id, m.store, input={"id": run_id}, queue="line")
    a = m.worker("--concurrency", "2")
    wait_until(lambda: all(m.began(r) == [str(a.pid)] for r in ids[:2]), "A holds the oldest")
    b = m.worker("--concurrency", "4")
    m.past_first_looks(b)
    m.kill(a)
    wait_until(
        lambda: all(m.began(r) == [str(a.pid), str(b.pid)] for r in ids[:2]),
        "the oldest begun again by B",
        timeout=60,
    )
    m.finish(ids)
    order = [r for r, _ in m.lines("began")]
    again = max(i for i, r in enumerate(order) if r in ids[:2])  # the later of the two
    assert all(r in ids[:2] for r in order[: again + 1]), order
    assert sorted(order[again + 1 :]) == ids[2:]  # the 18 others, once each, after them


def test_every_live_workers_look_takes_a_dead_workers_runs(
    cosmos_env: dict[str, str], tmp_path: Path
) -> None:
    """Cosmos DB's filter sees leases, not processes: A holds four runs and is
    SIGKILLed; B and C, both past their first look, take the four long before the
    lease's ten minutes, each completes exactly once."""
    m = Machine(cosmos_env, tmp_path)
    ids = [f"{m.tag}-h{i}" for i in range(4)]
    a = m.worker("--concurrency", "4")
    for run_id in ids:
        HOLD.start(run_id, m.store, input={"id": run_id})
    wait_until(lambda: all(m.began(r) == [str(a.pid)] for r in ids), "A holds the four")
    b, c = m.worker("--concurrency", "3"), m.worker("--concurrency", "3")
    m.past_first_looks(b, c)
    m.kill(a)
    live = {str(b.pid), str(c.pid)}
    wait_until(
        lambda: all(len(p := m.began(r)) == 2 and p[1] in live for r in ids),
        "A's runs begun again by B and C",
        timeout=240,  # well inside the 600 s lease: a takeover that waited for it fails
    )
    m.finish(ids, [f"{m.tag}-probe-{i}" for i in range(m.probes)])
    assert b.poll() is None and c.poll() is None


@pytest.fixture
def cosmos_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """cosmos-local's environment (the store whose filter cannot see a dead process)."""
    from ..conftest import store_env

    return store_env(request, tmp_path, "cosmos-local")
