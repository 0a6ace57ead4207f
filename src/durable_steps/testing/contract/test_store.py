"""The store contract: what every store promises (``seam.store``), checked on the
blocking store and its async twin of each backend of ``--durable-backends``."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Checkpoint, Step
from durable_steps.seam.state import MAX_DEPTH

from . import fixtures
from .fixtures import Backend, first, nested

backend, loop, run_id = fixtures.backend, fixtures.loop, fixtures.run_id  # its fixtures
pytest_generate_tests = fixtures.parametrize_backend  # (not in __all__: a project has its own)

__all__ = [  # what a project that runs this suite imports (its own fixtures apply)
    "test_a_run_holding_whole_floats_resumes",
    "test_a_run_s_attempt_log_round_trips",
    "test_a_step_that_its_names_do_not_match_is_refused_and_keeps_previous",
    "test_an_unreadable_checkpoint_never_stops_a_listing",
    "test_concurrent_writers_of_one_run_never_both_win",
    "test_corrupt_checkpoint_is_an_error_not_a_fresh_start",
    "test_create_only_save_conflicts_on_existing_run",
    "test_current_etag_saves_and_yields_new_etag",
    "test_invalid_run_ids_are_refused_before_io",
    "test_list_runs_shows_saved_runs",
    "test_loaded_state_is_not_aliased",
    "test_missing_run_loads_as_none",
    "test_newer_schema_is_refused",
    "test_non_json_state_names_the_key_and_keeps_previous",
    "test_odd_but_valid_run_ids_round_trip_separately",
    "test_save_then_load_round_trips",
    "test_save_with_etag_never_resurrects_a_deleted_run",
    "test_stale_etag_conflicts_and_keeps_stored_checkpoint",
    "test_the_edges_of_the_json_rules_round_trip_on_every_store",
]


ODD_BUT_VALID = [
    "...",
    "..x",
    "x..",
    ". .",
    "Run-A",
    "run-a",
    "ünïcødé-✓-検索",
    "with space",
    "x" * 255,
    "a:b;c|d*e",
]
INVALID = [
    "",
    "x" * 256,
    "a/b",
    "a\\b",
    "what?",
    "tag#1",
    "tab\there",
    "nl\nhere",
    "\x7f",
    ".",
    "..",
    "trail ",  # the Cosmos SDK refuses a trailing space; refused everywhere, before any I/O
    " lead",
    "lone\udc80surrogate",  # text that is not unicode (a surrogateescape'd byte)
    "\ud800",
]


def test_missing_run_loads_as_none(backend: Backend, run_id: str) -> None:
    """A run that was never saved loads as None (a fresh start), not an error."""
    assert backend.store.load(run_id) is None


def test_save_then_load_round_trips(backend: Backend, run_id: str) -> None:
    """What save stored, load returns: state, step, step names, with the etag save gave."""
    state = {"text": "grüße ✓", "n": 3, "f": 0.25, "nested": {"l": [1, None, True]}, "e": {}}
    saved = backend.store.save(Checkpoint(run_id, 1, state, steps=("a", "b"), done=True))
    assert saved.etag
    loaded = backend.store.load(run_id)
    assert loaded is not None
    assert (loaded.run_id, loaded.step, loaded.state, loaded.steps, loaded.done) == (
        run_id,
        1,
        state,
        ("a", "b"),
        True,
    )
    assert loaded.etag == saved.etag
    assert loaded.updated_at is not None


def test_a_run_s_attempt_log_round_trips(backend: Backend, run_id: str) -> None:
    """The attempt log the engine keeps in a run's head (``Checkpoint.attempt_log``:
    when each attempt began, how it ended) is stored and loaded as it was saved, and
    kept by a head-only save: what the console and ``runs show`` tell a run's story by."""
    log = ([0, 1, 1.5, 2.5, "failed", "ValueError", "bad input"], [0, 2, 3.0, None, None])
    backend.store.save(Checkpoint(run_id, -1, {}, attempt=2, attempt_log=log))
    loaded = backend.store.load(run_id)
    assert loaded is not None and [list(r) for r in loaded.attempt_log] == [list(r) for r in log]
    (one, two) = loaded.attempts_of(0)
    assert (one.how, one.error_type, one.ended, two.began, two.how) == (
        "failed", "ValueError", 2.5, 3.0, None,
    )  # fmt: skip
    head = backend.store.load_head(run_id)
    assert head is not None
    backend.store.save_head(replace(head, signals={"go": True}))
    after = backend.store.load(run_id)
    assert after is not None and [list(r) for r in after.attempt_log] == [list(r) for r in log]


def test_create_only_save_conflicts_on_existing_run(backend: Backend, run_id: str) -> None:
    """A save with etag=None on a run that exists raises ConflictError and changes nothing."""
    saved = backend.store.save(first(run_id, {"who": "first"}))
    with pytest.raises(ds.ConflictError, match="already has a checkpoint") as err:
        backend.store.save(first(run_id, {"who": "second"}))
    assert err.value.run_id == run_id
    loaded = backend.store.load(run_id)
    assert loaded is not None
    assert (loaded.state, loaded.etag) == ({"who": "first"}, saved.etag)


def test_stale_etag_conflicts_and_keeps_stored_checkpoint(backend: Backend, run_id: str) -> None:
    """A save with a stale etag raises ConflictError and leaves the stored checkpoint unchanged."""
    v1 = backend.store.save(first(run_id))
    v2 = backend.store.save(replace(v1, step=1, steps=("a", "b"), state={"n": 1}))
    with pytest.raises(ds.ConflictError, match="another writer"):
        backend.store.save(replace(v1, step=1, steps=("a", "b"), state={"n": 99}))
    loaded = backend.store.load(run_id)
    assert loaded is not None
    assert (loaded.state, loaded.etag) == ({"n": 1}, v2.etag)


def test_current_etag_saves_and_yields_new_etag(backend: Backend, run_id: str) -> None:
    """A save with the current etag succeeds and returns a new etag that the next save needs."""
    v1 = backend.store.save(first(run_id))
    v2 = backend.store.save(replace(v1, step=1, steps=("a", "b"), state={"n": 1}))
    assert v2.etag and v2.etag != v1.etag
    v3 = backend.store.save(replace(v2, step=2, steps=("a", "b", "c"), state={"n": 2}))
    loaded = backend.store.load(run_id)
    assert loaded is not None
    assert (loaded.step, loaded.etag) == (2, v3.etag)


def test_save_with_etag_never_resurrects_a_deleted_run(backend: Backend, run_id: str) -> None:
    """Saving with an etag after the run was deleted is a conflict; the run stays gone."""
    v1 = backend.store.save(first(run_id))
    assert backend.store.delete(run_id) is True
    assert backend.store.delete(run_id) is False
    with pytest.raises(ds.ConflictError, match="deleted"):
        backend.store.save(replace(v1, step=1, steps=("a", "b")))
    assert backend.store.load(run_id) is None


@pytest.mark.parametrize("bad", INVALID, ids=repr)
def test_invalid_run_ids_are_refused_before_io(backend: Backend, bad: str) -> None:
    """Ids that break the shared rules raise InvalidRunIdError in load, save and delete."""
    with pytest.raises(ds.InvalidRunIdError):
        backend.store.load(bad)
    with pytest.raises(ValueError, match="invalid run id"):
        backend.store.save(Checkpoint(bad, 0, {}, steps=("a",)))
    with pytest.raises(ds.InvalidRunIdError):
        backend.store.delete(bad)


def test_odd_but_valid_run_ids_round_trip_separately(backend: Backend, run_id: str) -> None:
    """Every valid id (unicode, '..', '.', ids differing in case, 255 chars) is its own run."""
    ids = ODD_BUT_VALID
    for i, rid in enumerate(ids):
        backend.store.save(first(rid, {"i": i, "tag": run_id}))
    for i, rid in enumerate(ids):
        loaded = backend.store.load(rid)
        assert loaded is not None
        assert (loaded.run_id, loaded.state) == (rid, {"i": i, "tag": run_id})
    for rid in ids:
        assert backend.store.delete(rid)


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"when": object()}, "['when']"),
        ({"d": {"s": {1, 2}}}, "['d']['s']"),
        ({"l": [1, b"raw"]}, "['l'][1]"),
        ({"k": {3: "int key"}}, "int key 3"),
        ({"nan": float("nan")}, "['nan']"),
        ({"id": 2**53}, "['id'] is an integer beyond"),
        ({"l": [1, -(2**63)]}, "['l'][1] is an integer beyond"),
        ({"n": 10**30}, "store it as a string"),
        ({"z": {"x": -0.0}}, "['z']['x'] is -0.0"),
        ({"s": "caf\udce9"}, "['s'] holds a lone surrogate"),
        ({"d": {"k\ud800": 1}}, "['d'] has a key with a lone surrogate"),
        ({"deep": nested(MAX_DEPTH)}, "['deep'][0][0]"),
    ],
    ids=[
        "object",
        "set",
        "bytes",
        "int-key",
        "nan",
        "int-2**53",
        "int-2**63",
        "int-10**30",
        "minus-zero",
        "lone-surrogate",
        "surrogate-key",
        "too-deep",
    ],
)
def test_non_json_state_names_the_key_and_keeps_previous(
    backend: Backend, run_id: str, value: dict[str, Any], named: str
) -> None:
    """Non-JSON state fails with InvalidStateError naming the key; the old checkpoint stays."""
    v1 = backend.store.save(first(run_id, {"ok": 1}))
    with pytest.raises(ds.InvalidStateError) as err:
        backend.store.save(replace(v1, step=1, steps=("a", "b"), state={"ok": 1, **value}))
    assert named in str(err.value)
    assert isinstance(err.value, TypeError)
    loaded = backend.store.load(run_id)
    assert loaded is not None
    assert (loaded.state, loaded.etag) == ({"ok": 1}, v1.etag)


@pytest.mark.parametrize(
    ("step", "steps", "named"),
    [
        (2, ("a",), "has 1 completed step names, not 3"),
        (-2, (), "not -2"),
        (True, ("a", "b"), "True"),
    ],
    ids=["names-short", "below-minus-one", "bool-step"],
)
def test_a_step_that_its_names_do_not_match_is_refused_and_keeps_previous(
    backend: Backend, run_id: str, step: Any, steps: tuple[str, ...], named: str
) -> None:
    """A checkpoint whose step disagrees with its completed step names would be saved
    only to be unreadable: every store refuses it (StepMismatchError) before any I/O."""
    v1 = backend.store.save(first(run_id, {"ok": 1}))
    with pytest.raises(ds.StepMismatchError, match="nothing was saved") as err:
        backend.store.save(replace(v1, step=step, steps=steps, state={"ok": 2}))
    assert named in str(err.value)
    loaded = backend.store.load(run_id)
    assert loaded is not None and (loaded.state, loaded.etag) == ({"ok": 1}, v1.etag)


def test_the_edges_of_the_json_rules_round_trip_on_every_store(
    backend: Backend, run_id: str
) -> None:
    """What the rules allow is kept by every store: integers at +-(2**53 - 1), floats,
    unicode (astral planes too) and nesting exactly at the documented limit."""
    state = {
        "max": 2**53 - 1,
        "min": -(2**53 - 1),
        "f": [0.5, -2.25, 1e-300, 1.5e300],
        "text": "naïve ✓ 検索 😀",
        "deep": nested(MAX_DEPTH - 1),  # with the state itself: MAX_DEPTH levels
    }
    backend.store.save(first(run_id, state))
    loaded = backend.store.load(run_id)
    assert loaded is not None
    assert loaded.state == state
    assert type(loaded.state["max"]) is int and type(loaded.state["min"]) is int


def test_a_run_holding_whole_floats_resumes(backend: Backend, run_id: str) -> None:
    """Floats with no fractional part (1e20, 1.0) survive a resume. Cosmos DB keeps every
    number as a double and may give 1e20 back as the integer 100000000000000000000, which
    the state rules refuse: it must come back as the float it was, not make the run
    impossible to resume."""
    calls: list[str] = []

    def b(state: Any) -> dict[str, Any]:
        calls.append("b")
        if len(calls) == 1:
            raise RuntimeError("the model timed out")
        return {"same": state["big"] == 1e20 and state["one"] == 1}

    steps = [Step("a", lambda s: {"big": 1e20, "one": 1.0, "neg": -3e16}), Step("b", b)]
    with pytest.raises(RuntimeError, match="timed out"):
        ds.run(run_id, steps, backend.store)
    assert ds.run(run_id, steps, backend.store) == {
        "big": 1e20,
        "one": 1.0,
        "neg": -3e16,
        "same": True,
    }
    assert calls == ["b", "b"]


def test_loaded_state_is_not_aliased(backend: Backend, run_id: str) -> None:
    """Mutating a loaded state does not change what the store holds."""
    backend.store.save(first(run_id, {"docs": ["a"], "meta": {"k": 1}}))
    loaded = backend.store.load(run_id)
    assert loaded is not None
    loaded.state["docs"].append("EVIL")
    loaded.state["meta"]["k"] = 2
    again = backend.store.load(run_id)
    assert again is not None
    assert again.state == {"docs": ["a"], "meta": {"k": 1}}


@pytest.mark.parametrize(
    "doc",
    [
        b'{"schema": 1, "run_id": "x", "st',
        b"\x00\xffgarbage",
        [1, 2, 3],
        {"schema": 1, "step": "two", "steps": [], "state": {}, "etag": "e"},
        {"schema": 1, "step": 0, "steps": ["a"], "state": [], "etag": "e"},
        b"[" * 200_000,
    ],
    ids=["truncated", "garbage", "array", "bad-step", "bad-state", "nested-200000-deep"],
)
def test_corrupt_checkpoint_is_an_error_not_a_fresh_start(
    backend: Backend, run_id: str, doc: Any
) -> None:
    """An unreadable checkpoint raises CorruptCheckpointError, and run() runs no step."""
    if isinstance(doc, dict):
        doc = {**doc, "run_id": run_id}
    backend.write_raw(run_id, doc)
    with pytest.raises(ds.CorruptCheckpointError, match="not treated as a fresh start"):
        backend.store.load(run_id)
    ran: list[str] = []
    with pytest.raises(ds.CorruptCheckpointError):
        ds.run(run_id, [Step("a", lambda s: ran.append("a"))], backend.store)
    assert ran == []


def test_newer_schema_is_refused(backend: Backend, run_id: str) -> None:
    """A checkpoint written by a newer schema is refused with 'upgrade', never misread."""
    backend.write_raw(run_id, {"schema": 99, "run_id": run_id, "step": 0, "future": True})
    with pytest.raises(ds.CorruptCheckpointError, match="upgrade durable-steps"):
        backend.store.load(run_id)


def test_list_runs_shows_saved_runs(backend: Backend, run_id: str) -> None:
    """list_runs reports each run with its last step and size; delete removes it from the list."""
    backend.store.save(Checkpoint(run_id, 1, {"n": 1}, steps=("a", "b"), done=True))
    mine = {i.run_id: i for i in backend.store.list_runs() if i.run_id == run_id}
    info = mine[run_id]
    assert (info.step, info.step_name, info.done, info.error) == (1, "b", True, None)
    assert info.size > 0 and info.updated_at
    backend.store.delete(run_id)
    assert run_id not in {i.run_id for i in backend.store.list_runs()}


def test_an_unreadable_checkpoint_never_stops_a_listing(backend: Backend, run_id: str) -> None:
    """A checkpoint that cannot be read (here: 200,000 nested brackets) is listed with
    ``error`` set, the other runs are listed as usual, and a filtered listing skips it."""
    backend.store.save(first(f"{run_id}-ok"))
    backend.write_raw(f"{run_id}-bad", b"[" * 200_000)
    listed = [i for i in backend.store.list_runs() if i.run_id.startswith(run_id)]
    ok = [i for i in listed if i.run_id == f"{run_id}-ok"]
    bad = [i for i in listed if i.run_id.startswith(f"{run_id}-bad")]
    assert len(ok) == 1 and ok[0].error is None
    assert len(bad) == 1 and bad[0].error and "unreadable" in bad[0].error
    filtered = [i.run_id for i in backend.store.list_runs(status="running")]
    assert f"{run_id}-ok" in filtered
    assert not [r for r in filtered if r.startswith(f"{run_id}-bad")]


def test_concurrent_writers_of_one_run_never_both_win(backend: Backend, run_id: str) -> None:
    """Threads saving from the same etag: exactly one succeeds, the rest get ConflictError."""
    base = backend.store.save(first(run_id))
    results: list[str] = []
    barrier = threading.Barrier(4)

    def writer(n: int) -> None:
        barrier.wait()
        try:
            backend.store.save(replace(base, step=1, steps=("a", "b"), state={"winner": n}))
            results.append(f"won:{n}")
        except ds.ConflictError:
            results.append("conflict")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if r.startswith("won")]
    assert len(winners) == 1 and results.count("conflict") == 3
    loaded = backend.store.load(run_id)
    assert loaded is not None
    assert f"won:{loaded.state['winner']}" == winners[0]
