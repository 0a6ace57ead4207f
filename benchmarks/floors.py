"""Parts 1 and 2: what durability costs on this disk, and trivial steps against it.

The floors are the two ways to make bytes durable that a file store can use, timed
with nothing else around them, in the same directory the store writes to:

- append + ``fdatasync``: a journal's cost per record;
- write a temporary file + ``fsync`` + ``rename`` + ``fsync`` of the directory: the
  atomic replace of a whole file.

Trivial steps: 20 steps that each set one ~1 KB value (the state stays ~1 KB). The
floor is DESIGN's: appending the step's record (what a save passes to write(),
measured: about 1.4 KB, the value plus the checkpoint's fields and the framing)
and ``fdatasync``, in the same rounds. Beside it, in the same rounds too, the
runner over that floor alone (``BareAppend``): what is left of a step's cost
when the file store's own work is taken away.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import durable_steps as ds

from .common import (
    KB,
    Metered,
    StepClock,
    Table,
    io_counters,
    median,
    median_time,
    ms,
    size,
    step_costs,
    text,
)

SIZES = (("1 KB", KB), ("100 KB", 100 * KB), ("1 MB", 1024 * KB))
TRIVIAL_STEPS = 20


def append_floor(directory: Path, data: bytes, repeat: int) -> float:
    """Median seconds of one append + fdatasync of ``data``."""
    fd = os.open(directory / f"append-{len(data)}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def append() -> None:
        os.write(fd, data)
        os.fdatasync(fd)

    try:
        return median_time(append, repeat)
    finally:
        os.close(fd)


def replace_floor(directory: Path, data: bytes, repeat: int) -> float:
    """Median seconds of write temp + fsync + rename + fsync(dir) of ``data``."""
    target, tmp = directory / f"replace-{len(data)}", directory / f"replace-{len(data)}.tmp"
    dir_fd = os.open(directory, os.O_RDONLY)

    def replace() -> None:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
        os.fsync(dir_fd)

    try:
        return median_time(replace, repeat)
    finally:
        os.close(dir_fd)


def floors(table: Table, base: Path, quick: bool) -> None:
    """Part 1: both floors at 1 KB, 100 KB and 1 MB."""
    directory = base / "floors"
    directory.mkdir()
    for label, n in SIZES:
        repeat = (10 if quick else 40) if n < 1024 * KB else (4 if quick else 15)
        data = os.urandom(n // 2).hex().encode()
        table.add(
            "1", f"floor: append + fdatasync, {label}", ms(append_floor(directory, data, repeat))
        )
        table.add(
            "1",
            f"floor: write+fsync+rename+fsync(dir), {label}",
            ms(replace_floor(directory, data, repeat)),
        )


def trivial(table: Table, base: Path, quick: bool) -> None:
    """Part 2: run() per step on FileStore, steps that each write ~1 KB, against the
    1 KB append floor measured in the same rounds (so that a busy disk slows both)."""
    clock = StepClock()

    def note(i: int) -> Callable[[Any], dict[str, str]]:
        data = text(i, KB)
        return lambda state: {"note": data}

    steps = [ds.Step(f"s{i:02d}", clock(note(i))) for i in range(TRIVIAL_STEPS)]
    floor_dir = base / "trivial-floor"
    floor_dir.mkdir()
    per_step, fixed, floor, bare = [], [], [], []
    with ds.FileStore(base / "trivial") as inner:
        # The floor appends what a step's save writes (DESIGN: "the step's record"),
        # measured once in a run of its own: write() bytes per save, the median.
        sized = Metered(inner, io_counters)
        ds.run(f"t-{secrets.token_hex(4)}", steps, sized)
        record = b"x" * int(median([c.delta["wchar"] for c in sized.calls if c.name == "save"]))
        with BareAppend(floor_dir / "bare", record) as appender:
            for _ in range(5 if quick else 25):
                costs, total = timed_run(clock, steps, inner)
                per_step.append(median(costs))
                fixed.append(total - sum(costs))
                floor.append(append_floor(floor_dir, record, TRIVIAL_STEPS))
                bare.append(median(timed_run(clock, steps, appender)[0]))
    step, floor_1kb = median(per_step), median(floor)
    table.judge(
        "2",
        f"FileStore per step, {TRIVIAL_STEPS} trivial steps (1 KB each)",
        ms(step),
        step / floor_1kb,
        2.0,
        note=f"vs append + fdatasync of {size(len(record))} (a step's record), "
        f"same rounds: {ms(floor_1kb)}",
    )
    table.add(
        "2",
        "  the runner + the floor (no store of ours)",
        ms(median(bare)),
        note=f"{median(bare) / floor_1kb:.2f}x the floor; FileStore is "
        f"{step / median(bare):.2f}x this",
    )
    table.add(
        "2",
        "  + once per run() call (load, claim, return)",
        ms(median(fixed)),
        note=f"{median(fixed) / TRIVIAL_STEPS * 1000:.2f} ms a step over {TRIVIAL_STEPS} steps",
    )


def timed_run(clock: StepClock, steps: list[ds.Step], inner: Any) -> tuple[list[float], float]:
    """One run of ``steps`` on ``inner``: each step's cost, and the run's total."""
    store = Metered(inner)
    clock.entered.clear()
    clock.returned.clear()
    t0 = time.perf_counter()
    ds.run(f"t-{secrets.token_hex(4)}", steps, store)
    total = time.perf_counter() - t0
    return step_costs(clock, store.calls, t0), total


class BareAppend(ds.MemoryStore):
    """The runner's own cost over the floor: a MemoryStore whose every save also does
    the floor's work (append ``record`` + ``fdatasync``) -- what any store that writes a
    step's record durably must do, with none of durable-steps' file store around it."""

    def __init__(self, path: Path, record: bytes) -> None:
        super().__init__()
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._record = record

    def save(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        saved = super().save(checkpoint)
        os.write(self._fd, self._record)
        os.fdatasync(self._fd)
        return saved

    def close(self) -> None:
        os.close(self._fd)
        super().close()
