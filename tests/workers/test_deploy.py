"""A deploy with runs in flight: two real worker processes from one image, one serving
version 1 of a workflow and one version 2 (``durable-steps worker --version``), side by
side on one store. Runs of both versions are started; each completes on its own
version's code (its side effects say which), a run of a version no worker serves is
left alone and ``runs list --version`` shows it."""

from __future__ import annotations

import signal
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

import durable_steps as ds

from ..helpers.clitools import Cli
from ..helpers.waiting import wait_until
from ..helpers.worker_process import stderr_of, worker, workers_die_with_their_test  # noqa: F401

FLOWS = textwrap.dedent(
    """
    import os
    import durable_steps as ds

    def effect(version, name):
        def fn(state):
            with open(os.environ["EFFECTS"], "a") as f:
                f.write(f"{ds.current_step().run_id} {version} {name}\\n")
            return {name: version}
        return ds.Step(name, fn)

    V1 = ds.Workflow("deploy", [effect("1", "a"), effect("1", "b")], version="1")
    V2 = ds.Workflow("deploy", [effect("2", "a"), effect("2", "b"), effect("2", "c")], version="2")
    V3 = ds.Workflow("deploy", [effect("3", "a")], version="3")
    WORKFLOWS = [V1, V2]
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("env", ["file"], indirect=True)  # cosmos-local: test_versions
def test_old_and_new_workers_each_finish_the_runs_of_their_version(
    env: dict[str, str], tmp_path: Path
) -> None:
    """Each run's side effects are its own version's steps, each once; neither worker
    ever claimed a run of the other version (no refusal in their output: the listing
    filters by version); the version-3 run is untouched."""
    effects = tmp_path / "effects"
    namespace: dict[str, object] = {}
    exec(FLOWS, namespace)  # noqa: S102 (this file's own source: the workers' workflows, to start runs)
    v1, v2, v3 = (namespace[n] for n in ("V1", "V2", "V3"))
    assert isinstance(v1, ds.Workflow) and isinstance(v2, ds.Workflow)
    assert isinstance(v3, ds.Workflow)
    runs = {f"old-{tmp_path.name}-{k}": v1 for k in range(3)}
    runs |= {f"new-{tmp_path.name}-{k}": v2 for k in range(3)}
    orphan = f"v3-{tmp_path.name}"
    with ds.store_from_env(env) as store:
        for rid, w in runs.items():
            assert w.start(rid, store)
        assert v3.start(orphan, store)

        workers = []
        for version in ("1", "2"):
            cwd = tmp_path / f"worker-{version}"
            cwd.mkdir()
            (cwd / "flows.py").write_text(FLOWS)
            extra = {"EFFECTS": str(effects)}
            args = ("flows:WORKFLOWS", "--version", version, "--interval", "0.2")
            workers.append((worker(env, cwd, *args, **extra), cwd))

        def finished() -> bool:
            return all(store.load_head(rid).status == "completed" for rid in runs)

        wait_until(finished, "every run of versions 1 and 2 completed")
        for proc, _ in workers:
            proc.send_signal(signal.SIGTERM)
        for proc, cwd in workers:
            out, _ = proc.communicate(timeout=60)
            assert proc.returncode == 0, stderr_of(cwd)
            assert out.count(": completed") == 3, out
            assert "failed" not in out, out

        made: dict[str, list[str]] = defaultdict(list)
        for line in effects.read_text().splitlines():
            rid, version, name = line.split()
            made[rid].append(f"{version}{name}")
        for rid, w in runs.items():
            steps = [f"{w.version}{s.name}" for s in w.steps]
            assert made[rid] == steps, rid  # its own version's code, each step once
            assert store.load(rid).state == {s.name: w.version for s in w.steps}
        assert orphan not in made  # no worker serves version 3: left alone
        assert store.load_head(orphan).status == "running"

    listed = Cli(env).json("runs", "list", "--version", "3")
    assert [(r["run_id"], r["version"]) for r in listed] == [(orphan, "3")]
