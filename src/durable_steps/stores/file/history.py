"""A FileStore run's history: the logs its compactions superseded, kept.

A run file is a log of records, one per save: each record *is* that save's update
(``runfile``). A compaction used to drop the log when it wrote a new snapshot file; with
history on (``history="steps"``, the default) it first gives the old file a second
name, ``PATH/history/<run file's stem>/<n>.log`` (a hard link: no byte is copied, the
old log's inode lives on after the rename replaces the run's file). So history costs
no write a save did not make; its storage is the superseded records, which a state
that only grows barely has (its log is never compacted for growing).

Reading (``versions``): the history files in order, then the run's file, record by
record; each file starts with a snapshot, so each replays alone. A record whose etag
was met already is skipped: a compaction killed between the link and the rename
leaves a history file that is the run's file itself (the same inode), whose records
the next files hold again. The listing of history files is read before and after
the run's file; a compaction in between makes the reader look again.

``keep_last=N``: a compaction removes the history files whose last record is at least
N completed steps old (each file holds whole steps' records, so at least N stay).
Deleting a run removes its history directory after its file; a crash between the two
leaves a directory no run file claims, which ``prune_orphans`` removes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ...seam import delta
from ...seam.document import loads
from ...seam.errors import corrupt_error
from ...seam.history import Keep, Version
from . import fileio, platform, runfile, runfile_tail

DIR = "history"
_NAME = re.compile(r"([0-9]{8})\.log")


def dir_of(store: Path, run_file: Path) -> Path:
    return store / DIR / run_file.stem


def files(d: Path) -> list[Path]:
    """The history files of a run, oldest first."""
    try:
        names = [e.name for e in os.scandir(d) if _NAME.fullmatch(e.name)]
    except FileNotFoundError:
        return []
    return [d / n for n in sorted(names)]


def keep_log(store: Path, run_file: Path, keep: Keep, step: int) -> None:
    """Before a compaction replaces ``run_file`` (under the run's lock): its log becomes
    the run's next history file; with ``keep_last``, files older than it say go."""
    d = dir_of(store, run_file)
    fileio.make_dir(store / DIR)
    fileio.make_dir(d)
    found = files(d)
    n = int(found[-1].stem) + 1 if found else 1
    os.link(run_file, d / f"{n:08d}.log")
    platform.current.sync_dir(str(d))
    if keep.keep_last is not None:
        for old in found:
            last = _last_step(old)
            if last is not None and last <= step - keep.keep_last:
                with contextlib.suppress(FileNotFoundError):
                    platform.current.remove(str(old))


def _last_step(path: Path) -> int | None:
    fd = fileio.open_existing(path, os.O_RDONLY | platform.BINARY)
    if fd is None:
        return None
    try:
        last = runfile_tail.last_record(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    try:
        meta = json.loads(last.meta) if last is not None else None
    except ValueError:
        return None
    step = meta.get("step") if isinstance(meta, dict) else None
    return step if type(step) is int else None


def remove(store: Path, run_file: Path) -> None:
    """Remove a run's history (after its file)."""
    d = dir_of(store, run_file)
    for path in files(d):
        with contextlib.suppress(FileNotFoundError):
            platform.current.remove(str(path))
    with contextlib.suppress(FileNotFoundError, OSError):
        os.rmdir(d)


def orphans(store: Path, runs: Path) -> Iterator[Path]:
    """History directories whose run file is gone (a delete that crashed half-way)."""
    try:
        entries = list(os.scandir(store / DIR))
    except FileNotFoundError:
        return
    for e in entries:
        if e.is_dir(follow_symlinks=False) and not (runs / f"{e.name}.json").exists():
            yield Path(e.path)


def versions(store: Path, run_file: Path, run_id: str) -> Iterator[Version] | None:
    """Every stored version of the run, oldest first; None when it has no file."""
    d = dir_of(store, run_file)
    for _ in range(10):
        before = files(d)
        current = fileio.read_file(run_file)
        if current is None:
            return None
        if files(d) == before:
            return _walk([*before, run_file], current, run_id)
    raise corrupt_error(run_id, str(d), "its history kept changing while it was read")


def _walk(paths: list[Path], current: bytes, run_id: str) -> Iterator[Version]:
    seen: set[str] = set()
    for path in paths:
        data = current if path == paths[-1] else fileio.read_file(path)
        if data is None:  # removed by keep_last meanwhile: older steps go
            continue
        yield from _replay(data, run_id, str(path), seen)


def _replay(data: bytes, run_id: str, where: str, seen: set[str]) -> Iterator[Version]:
    doc, etag, records = runfile.parse(data, run_id, where)
    if records is None:  # an earlier version's whole document: one version
        if isinstance(doc, dict) and etag not in seen:
            seen.add(str(etag))
            whole, records_of = doc.get("state") or {}, doc.get("calls") or []
            yield Version(doc, len(data), lambda: _copy(whole), lambda: list(records_of))
        return
    state: Any = None
    steps: list[str] = []
    calls: dict[tuple[str, int], Any] = {}
    for rec in records:
        meta, body = loads(rec.meta, run_id, where), loads(rec.body, run_id, where)
        try:
            state = delta.apply(state, calls, body)
            if "steps" in body:
                steps = list(body["steps"])
            else:
                steps.extend(body.get("steps+") or ())
        except (TypeError, ValueError) as exc:
            raise corrupt_error(run_id, where, f"the record at byte {rec.start}: {exc}") from None
        if rec.etag in seen:
            continue
        seen.add(rec.etag)
        fields = {**meta, "steps": list(steps)}
        yield Version(fields, len(rec.body), _copier(state), _lister(delta.journal(calls)))


def _copier(state: Any) -> Callable[[], dict[str, Any]]:
    return lambda: _copy(state)


def _lister(journal: list[Any]) -> Callable[[], list[Any]]:
    return lambda: list(journal)


def _copy(state: Any) -> dict[str, Any]:
    """A state the walk may keep while the replay changes its own in place."""
    copied: dict[str, Any] = json.loads(json.dumps(state))
    return copied
