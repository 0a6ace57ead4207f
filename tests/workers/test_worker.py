"""`durable-steps worker`: a real worker process recovering runs, stopped by SIGTERM."""

from __future__ import annotations

import base64
import os
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.seam.codec import from_env
from durable_steps.workers.loop import serve

from ..helpers.waiting import wait_until
from ..helpers.worker_process import stderr_of, worker, workers_die_with_their_test  # noqa: F401

FLOWS = textwrap.dedent(
    """
    import os, time
    import durable_steps as ds

    def effect(name):
        def fn(state):
            ctx = ds.current_step()
            with open(os.environ["EFFECTS"], "a") as f:
                f.write(f"{ctx.run_id}:{name}:{ctx.attempt}\\n")
            release = os.environ.get("RELEASE")
            while name == "slow" and release and not os.path.exists(release):
                time.sleep(0.01)
            return {name: True}
        return ds.Step(name, fn)

    REPORT = ds.Workflow("report", [effect("a"), effect("slow"), effect("c")])
    OTHER = ds.Workflow("other", [effect("x")])
    WORKFLOWS = [REPORT, OTHER]
    """
)


@pytest.fixture
def env(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The shared store's environment (conftest's ``env``), with the workflows of FLOWS
    importable in the test's directory and their side effects in a file there."""
    (tmp_path / "flows.py").write_text(FLOWS)
    return {"EFFECTS": str(tmp_path / "effects"), **env}


def seed(store: Any, run_id: str, workflow: str | None, **kw: Any) -> None:
    """A run whose worker died after step 0 (its lease long expired)."""
    fields = {"owner": "dead-worker", "lease_expires": time.time() - 60, **kw}
    store.save(ds.Checkpoint(run_id, 0, {"a": True}, steps=("a",), workflow=workflow, **fields))


def test_worker_once_recovers_orphans_and_leaves_the_rest(
    env: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """`worker flows:WORKFLOWS --once` resumes the orphaned runs of its workflows, prints a
    line per run, exits 0, and leaves waiting, failed and unknown-workflow runs alone."""
    store = ds.store_from_env(env)
    for i in range(3):
        seed(store, f"{run_id}-{i}", "report")
    seed(store, f"{run_id}-waiting", "report", status="waiting", waiting_for="ok")
    seed(store, f"{run_id}-failed", "report", status="failed")
    seed(store, f"{run_id}-unknown", "somebody-else")
    proc = worker(env, tmp_path, "flows:WORKFLOWS", "--once", "--concurrency", "2")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr_of(tmp_path)
    for i in range(3):
        assert f"run {run_id}-{i} (report): completed" in out
        assert store.load(f"{run_id}-{i}").status == "completed"
    for rest in ("waiting", "failed", "unknown"):
        assert f"{run_id}-{rest}" not in out
        assert store.load(f"{run_id}-{rest}").step == 0
    effects = (tmp_path / "effects").read_text().split()
    expected = [f"{run_id}-{i}:{s}" for i in range(3) for s in ("slow:2", "c:1")]
    assert sorted(effects) == sorted(expected)  # slow: resumed after its worker died


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_lets_the_step_finish_releases_the_lease_and_exits_0(
    env: dict[str, str], tmp_path: Path, run_id: str, signum: signal.Signals
) -> None:
    """SIGTERM (or SIGINT) while a run is in a step: the worker starts nothing new, lets
    that step finish, saves it, releases the lease at the step boundary and exits 0; a
    later worker completes the run, starting the next step as its first attempt."""
    store = ds.store_from_env(env)
    seed(store, run_id, "report")
    release = tmp_path / "release"
    proc = worker(env, tmp_path, "flows:REPORT", "--interval", "0.2", RELEASE=str(release))
    effects = tmp_path / "effects"
    wait_until(lambda: effects.exists() and f"{run_id}:slow" in effects.read_text(), "the step")
    proc.send_signal(signum)
    wait_until(lambda: f"{signum.name}: stopping" in stderr_of(tmp_path), "the worker to see it")
    assert proc.poll() is None  # still finishing the step
    release.touch()
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr_of(tmp_path)
    assert f"run {run_id}: released at a step boundary" in out
    cp = store.load(run_id)
    assert (cp.step, cp.status, cp.owner, cp.lease_expires) == (1, "running", None, None)
    assert cp.next_words() == "next: step 2, attempt 1 (not started yet: a worker takes it)"
    assert [(a.number, a.how) for a in cp.attempts_of(1)] == [(2, "completed")]
    again = worker(env, tmp_path, "flows:REPORT", "--once")
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 0, stderr_of(tmp_path)
    assert f"run {run_id} (report): completed" in out
    assert effects.read_text().split() == [f"{run_id}:slow:2", f"{run_id}:c:1"]


def test_concurrency_bounds_the_runs_in_progress(
    env: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """With --concurrency 2 and three orphaned runs whose step blocks, two run at once and
    the third waits for a free slot; all three complete."""
    store = ds.store_from_env(env)
    ids = [f"{run_id}-{i}" for i in range(3)]
    for rid in ids:
        seed(store, rid, "report")
    release = tmp_path / "release"
    proc = worker(
        env, tmp_path, "flows:REPORT", "--once", "--concurrency", "2", RELEASE=str(release)
    )
    effects = tmp_path / "effects"

    def in_slow() -> list[str]:
        text = effects.read_text() if effects.exists() else ""
        return [rid for rid in ids if f"{rid}:slow" in text]

    wait_until(lambda: len(in_slow()) == 2, "two runs to be in their slow step")
    (waiting,) = [rid for rid in ids if rid not in in_slow()]
    assert store.load(waiting).owner == "dead-worker"  # not claimed: no free slot
    release.touch()
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr_of(tmp_path)
    assert all(f"run {rid} (report): completed" in out for rid in ids)


def test_the_worker_keeps_looking_for_runs_to_recover(
    env: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """Without --once the worker lists again every --interval seconds: a run orphaned
    after it started is recovered too; SIGTERM then stops it with exit 0."""
    store = ds.store_from_env(env)
    seed(store, f"{run_id}-early", "report")
    proc = worker(env, tmp_path, "flows:WORKFLOWS", "--interval", "0.2")
    wait_until(lambda: store.load(f"{run_id}-early").status == "completed", "the first run")
    seed(store, f"{run_id}-late", "report")
    wait_until(lambda: store.load(f"{run_id}-late").status == "completed", "the later run")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr_of(tmp_path)
    assert out.splitlines() == [
        f"run {run_id}-early (report): completed",
        f"run {run_id}-late (report): completed",
    ]


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("flows", "is not MODULE:ATTR"),
        ("no_such_module:X", "cannot import 'no_such_module'"),
        ("flows:NOPE", "has no attribute 'NOPE'"),
        ("flows:effect", "not a Workflow"),
    ],
)
def test_a_bad_target_is_one_clear_line(tmp_path: Path, target: str, says: str) -> None:
    """A target that is not MODULE:ATTR of Workflows exits 1 with one line saying why."""
    (tmp_path / "flows.py").write_text(FLOWS)
    proc = worker({"DURABLE_FILE_PATH": str(tmp_path / "s")}, tmp_path, target, "--once")
    proc.communicate(timeout=60)
    err = stderr_of(tmp_path)
    assert proc.returncode == 1
    assert says in err
    assert len(err.strip().splitlines()) == 1, err


def test_a_look_lists_each_workflows_runs_once_and_wakes_at_a_timer_it_saw(
    run_id: str,
) -> None:
    """One look of the worker is two listings per workflow -- its running runs, its
    waiting runs due within the interval -- and a sleep that comes due before the next
    look is resumed at its time, seen in that same listing."""
    nap = ds.Workflow("nap", [ds.Step("s", lambda s: ds.sleep(1.0) or {"woke": True})])
    store = ds.MemoryStore()
    with pytest.raises(ds.RunWaiting):
        nap.run(run_id, store)
    listed: list[str] = []
    listing = store.listing

    def counted(filters: Any) -> Any:
        listed.append(filters.status)
        return listing(filters)

    store.listing = counted  # type: ignore[method-assign]
    stop, ended = threading.Event(), []
    options: dict[str, Any] = {"once": False, "concurrency": 2, "interval": 600.0}
    options |= {"lease": 60.0, "owner": None, "echo": ended.append, "stop": stop}
    workflows = [nap, ds.Workflow("idle", [ds.Step("x", lambda s: {})])]
    serving = threading.Thread(target=serve, args=(store, workflows), kwargs=options)
    serving.start()
    try:
        wait_until(lambda: store.load(run_id).status == "completed", "the nap's wake")
    finally:
        stop.set()
        serving.join(60)
    assert store.load(run_id).state == {"woke": True}
    assert listed[:8] == ["running", "waiting"] * 4  # two looks, two workflows


def keyed(key: str) -> Any:
    """The codec of ``DURABLE_CODEC=aes256gcm DURABLE_KEY=key`` (its id: ``k1``)."""
    return from_env({"DURABLE_CODEC": "aes256gcm", "DURABLE_KEY": key})


def test_a_worker_without_the_runs_key_says_so_once_and_leaves_it(
    tmp_path: Path, run_id: str
) -> None:
    """A worker configured with another key under the run's key id (``k1``) cannot
    decode the run: one line naming the key id and the run, no "failed", nothing
    written, and it does not take the run again on its later looks; a worker with the
    right key then completes it."""
    right, wrong = (base64.b64encode(os.urandom(32)).decode() for _ in range(2))
    flow = ds.Workflow("keyed", [ds.Step("a", lambda s: {"seen": s["secret"]})])
    path = tmp_path / "store"
    with ds.FileStore(path, codec=keyed(right)) as s:
        assert flow.start(run_id, s, input={"secret": "TOPSECRET"})
        before = s.load(run_id)
    store = ds.FileStore(path, codec=keyed(wrong))
    looks, takeable = [], store.takeable

    def counted(*args: Any, **kw: Any) -> Any:
        looks.append(1)
        return takeable(*args, **kw)

    store.takeable = counted  # type: ignore[method-assign]
    stop, said = threading.Event(), []
    options: dict[str, Any] = {"once": False, "concurrency": 2, "interval": 0.05}
    options |= {"lease": 60.0, "owner": None, "echo": said.append, "stop": stop}
    serving = threading.Thread(target=serve, args=(store, [flow]), kwargs=options)
    serving.start()
    try:
        wait_until(lambda: said, "the worker's line about the run")
        seen = len(looks)
        wait_until(lambda: len(looks) >= seen + 5, "five more looks")
    finally:
        stop.set()
        serving.join(60)
    assert len(said) == 1, said
    line = str(said[0])
    assert run_id in line and "'k1'" in line and "cannot be decoded" in line
    assert "failed" not in line and "delete" not in line
    with ds.FileStore(path, codec=keyed(right)) as s:
        after = s.load(run_id)
        assert after is not None and after.etag == before.etag  # nothing was written
        assert flow.run(run_id, s) == {"secret": "TOPSECRET", "seen": "TOPSECRET"}


@pytest.mark.parametrize(("missing", "extra"), [("croniter", "schedules"), ("zstandard", "zstd")])
def test_a_module_that_needs_a_missing_extra_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str, extra: str
) -> None:
    """A workflows module that imports an optional dependency that is not installed: the
    worker says which extra installs it, not "cannot import" the user's module."""
    from durable_steps.workers.loop import load_workflows

    name = f"needs_{missing}_{tmp_path.name}"
    (tmp_path / f"{name}.py").write_text(f"import {missing}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, missing, None)  # (as if not installed)
    with pytest.raises(ds.MissingExtraError, match=rf"durable-steps\[{extra}\]"):
        load_workflows(f"{name}:FLOWS")


def test_a_schedule_without_croniter_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workflows module that declares a Schedule where croniter is not installed (the
    image's worker before it had the extra): the worker names the extra to install."""
    from durable_steps.workers.loop import load_workflows

    name = f"schedules_{tmp_path.name}"
    (tmp_path / f"{name}.py").write_text(
        "import durable_steps as ds\n"
        "W = ds.Workflow('w', [ds.Step('a', lambda s: {})])\n"
        "FLOWS = [W, ds.Schedule(W, '*/5 * * * *')]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "croniter", None)  # (as if not installed)
    with pytest.raises(ds.MissingExtraError, match=r"durable-steps\[schedules\]"):
        load_workflows(f"{name}:FLOWS")
