"""The journal kill loop: a fork server that imports durable-steps once and forks one
worker per trial, so a thousand real SIGKILLs fit in seconds.

    python tests/helpers/runfile_server.py STORE_DIR SEED TRIALS

Each worker runs a 60-step workflow (new keys, an extended list, replaced values; a
compaction every few saves) from where the last one died, and is SIGKILLed either by
itself at a chosen point of the save path or by the server at a random moment after it
said it is ready. Before each step the worker acknowledges the save before it through a
pipe; after each death the server loads the run and checks it is the last acknowledged
step or the one after, with exactly the state those steps make. Prints a JSON report;
nothing here asserts, so the test sees every failure.

Points (the k-th time the worker reaches them): ``write`` a random part of a record or of
a temp file (a torn append, a torn snapshot), ``sync`` before / ``synced`` after the
append's fdatasync, ``temp-synced`` a whole temp file not yet renamed, ``replaced``
renamed but its directory not synced, ``truncate`` just after cutting a torn tail off,
``random`` a kill from outside.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sys
import time
from collections import Counter
from typing import Any

import durable_steps as ds
from durable_steps.runner import telemetry
from durable_steps.stores.file import platform, runfile

N = 60
NAMES = [f"s{i}" for i in range(N)]
# compact every few saves whatever the state's size, so kills land inside compactions
runfile.COMPACT_MIN, runfile.COMPACT_RATIO = 1000, 1.5
telemetry._tracing()  # its lazy imports, done once here instead of in every worker


def text(i: int) -> str:
    return f"ü{i}-" * ((i * 37) % 40 + 1)


def updates(i: int, state: Any) -> dict[str, Any]:
    if i % 3 == 0:
        return {f"k{i}": text(i)}
    if i % 3 == 1:
        return {"messages": [*state["messages"], text(i)]}
    return {"counter": i, "last": text(i)}


def expected(step: int) -> dict[str, Any]:
    state: dict[str, Any] = {"messages": []}
    for i in range(step + 1):
        state.update(updates(i, state))
    return state


def workflow(ack: int) -> ds.Workflow:
    def step(i: int) -> ds.Step:
        def fn(state: Any) -> dict[str, Any]:
            os.write(ack, b"%d\n" % (i - 1))  # step i runs: the save of step i-1 returned
            return updates(i, state)

        return ds.Step(NAMES[i], fn)

    return ds.Workflow("kills", [step(i) for i in range(N)])


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def is_temp(fd: int) -> bool:
    """Whether ``fd`` is a temp file of the store (a snapshot being written)."""
    runs = os.path.join(sys.argv[1], "runs")
    inode = os.fstat(fd).st_ino
    return any(
        os.stat(os.path.join(runs, n)).st_ino == inode
        for n in os.listdir(runs)
        if n.startswith(".tmp-")
    )


def arm(point: str, k: int, pipes: tuple[int, ...]) -> None:
    """Make this worker SIGKILL itself the k-th time it reaches ``point``."""
    seen = Counter[str]()
    rng = random.Random(k * 7919 + os.getpid())
    current = platform.current

    def reached(name: str) -> bool:
        seen[name] += 1
        return name == point and seen[name] == k

    real_write, real_pwrite = os.write, os.pwrite

    def write(fd: int, data: Any) -> int:
        if fd not in pipes and reached("write"):
            torn(fd, data, real_write)
        return real_write(fd, data)

    def pwrite(fd: int, data: Any, offset: int) -> int:
        if reached("write"):
            torn(fd, data, lambda fd, part: real_pwrite(fd, part, offset))
        return real_pwrite(fd, data, offset)

    def torn(fd: int, data: Any, write_part: Any) -> None:
        write_part(fd, bytes(data)[: rng.randrange(len(data))])
        temp = is_temp(fd)
        real_write(pipes[0], b"T\n" if temp else b"A\n")  # a snapshot's or an append's
        die()

    def around(name: str, before: str | None, after: str | None) -> None:
        real = getattr(current, name)

        def call(*args: Any) -> Any:
            if before and reached(before):
                die()
            result = real(*args)
            if after and reached(after):
                die()
            return result

        setattr(current, name, call)

    os.write = write  # type: ignore[assignment]
    os.pwrite = pwrite  # type: ignore[assignment]
    around("sync_data", "sync", "synced")
    around("sync_file", None, "temp-synced")  # a temp file, or (after it) its directory
    around("replace", None, "replaced")
    real_truncate = os.ftruncate

    def truncate(fd: int, length: int) -> None:
        real_truncate(fd, length)
        if reached("truncate"):
            die()

    os.ftruncate = truncate  # type: ignore[assignment]


def worker(path: str, run_id: str, point: str, k: int, pipes: tuple[int, int]) -> None:
    ack, ready = pipes
    try:
        arm(point, k, pipes)
        store = ds.FileStore(path)
        os.write(ready, b"r")
        workflow(ack).run(run_id, store, input={"messages": []})
        code = 0
    except BaseException as exc:  # reported by the server as a failure
        sys.stderr.write(f"worker: {type(exc).__name__}: {exc}\n")
        code = 3
    os._exit(code)


def trial(path: str, run_id: str, point: str, k: int, delay: float) -> tuple[int, list[Any]]:
    """Fork a worker; return its wait status and what it wrote to the ack pipe: the steps
    it acknowledged, and "T" or "A" when it tore a temp file or an append."""
    ack_r, ack_w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ack_r)
        os.close(ready_r)
        worker(path, run_id, point, k, (ack_w, ready_w))
    os.close(ack_w)
    os.close(ready_w)
    if point == "random" and os.read(ready_r, 1):
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):  # it finished first
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    acks = b""
    while chunk := os.read(ack_r, 65536):
        acks += chunk
    os.close(ack_r)
    os.close(ready_r)
    return status, [int(a) if a.lstrip(b"-").isdigit() else a.decode() for a in acks.split()]


def check(cp: ds.Checkpoint, last: int, stored: int | None, label: str) -> list[str]:
    """What is wrong with ``cp`` after a kill, when ``last`` was the last acknowledged step
    and ``stored`` the step loaded after the kill before."""
    wrong = []
    if cp.step not in (last, last + 1):
        wrong.append(f"{label}: step {cp.step}, acknowledged {last}")
    if (stored is not None and cp.step < stored) or cp.steps != tuple(NAMES[: cp.step + 1]):
        wrong.append(f"{label}: steps went back or differ: {cp.steps}")
    if cp.state != expected(cp.step):
        wrong.append(f"{label}: the state of step {cp.step} differs")
    return wrong


def main() -> None:
    path, seed, trials = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    store = ds.FileStore(path)  # the server only loads: no runner, no threads to fork
    kills, missed, failures = Counter[str](), Counter[str](), []
    runs, run_id, stored, completed = 0, "run-0", None, 0
    torn = False
    points = ["random"] * 3 + ["write"] * 4 + ["sync", "synced"] + ["temp-synced", "replaced"] * 2
    started = time.monotonic()
    for t in range(trials):
        point = "truncate" if torn and rng.random() < 0.5 else rng.choice(points)
        k = rng.randint(1, {"truncate": 1, "replaced": 1, "temp-synced": 3}.get(point, 8))
        status, out = trial(path, run_id, point, k, rng.uniform(0, 0.004))
        acks = [a for a in out if isinstance(a, int)]
        torn = out[-1:] == ["A"]  # it tore an append: the next worker finds a torn tail
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            kills[point + {"T": "-temp", "A": "-append"}.get(out[-1] if out else "", "")] += 1
        elif os.WEXITSTATUS(status) == 0:
            missed[point] += 1  # the run ended before the point was reached
        else:
            failures.append(f"trial {t}: worker exited with {os.WEXITSTATUS(status)}")
        label = f"trial {t} ({point} #{k})"
        try:
            cp = store.load(run_id)
        except ds.DurableError as exc:
            failures.append(f"{label}: load raised {exc!r}")
            break
        if cp is None:
            if stored is not None or acks:
                failures.append(f"{label}: the checkpoint vanished")
            continue
        failures += check(cp, max(acks, default=-2 if stored is None else stored), stored, label)
        stored = cp.step
        if cp.done:
            completed += 1
            runs += 1
            run_id, stored = f"run-{runs}", None
    status, _ = trial(path, run_id, "none", 1, 0)  # the last run, to its end, unharmed
    try:
        final = store.load(run_id)
    except ds.DurableError as exc:
        final = None
        failures.append(f"the last run: load raised {exc!r}")
    if status != 0 or final is None or not final.done or final.state != expected(N - 1):
        failures.append(f"the last run did not complete as expected (status {status})")
    list(store.list_runs())  # sweeps the temp files of killed compactions
    left = [n for n in os.listdir(os.path.join(path, "runs")) if n.startswith(".tmp-")]
    print(
        json.dumps(
            {
                "trials": trials,
                "kills": dict(kills),
                "missed": dict(missed),
                "completed_runs": completed + 1,
                "failures": failures[:20],
                "failed": len(failures),
                "temp_files_left": left,
                "seconds": round(time.monotonic() - started, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
