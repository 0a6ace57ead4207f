"""A completed step's history entry indexes its calls (name, key, start and end, result
size, attempt -- never results) and keeps its attempts (when each began, how it
ended), on every backend; entries written before it load."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import durable_steps as ds
from durable_steps import durable
from durable_steps.seam.callindex import LIMIT, build
from durable_steps.seam.history import Version, Walk
from durable_steps.stores.cosmos.history import _entries

from ..conftest import Api

SECRET = "s3cr3t-result-never-in-history"


def test_a_step_s_history_lists_its_calls_in_order_without_results(api: Api, run_id: str) -> None:
    """3 calls (one keyed), the step fails once after two: the entry lists all three in
    the order made, with the attempt that recorded each and their result sizes."""
    tries: list[int] = []

    async def agent(state: Any) -> dict[str, Any]:
        tries.append(1)
        a = await ds.call_async("llm", lambda: SECRET)
        b = await ds.call_async("lookup", lambda: {"rows": [1, 2, 3]}, key="tool-7")
        if len(tries) == 1:
            raise RuntimeError("fails once after two calls")
        c = await ds.call_async("llm", lambda: "done")
        return {"n": len(a) + len(b) + len(c)}

    retry = ds.Retry(attempts=2, backoff=0.0)
    api.run(run_id, [api.step("agent", agent, retry=retry), ds.Step("after", lambda s: {})])
    first, after = api.store.run_history(run_id)
    assert first.calls is not None and after.calls == ()
    got = [(c.name, c.key, c.kind, c.size, c.attempt) for c in first.calls]
    assert got == [
        ("llm", None, "call", len(json.dumps(SECRET)), 1),
        ("lookup", "tool-7", "call", len('{"rows":[1,2,3]}'), 1),
        ("llm", None, "call", len('"done"'), 2),
    ]
    ends = [c.end for c in first.calls]
    assert all(e is not None for e in ends) and ends == sorted(ends)
    # when each call began travels in its result's record: start <= end, in order
    starts = [c.start for c in first.calls]
    assert all(s is not None and s <= e for s, e in zip(starts, ends, strict=True))
    # the step's attempts, as the engine recorded them: began, ended, how
    one, two = first.attempt_log
    assert (one.number, one.how, one.error_type) == (1, "failed", "RuntimeError")
    assert one.error_message == "fails once after two calls"
    assert (two.number, two.how, two.error_type) == (2, "completed", None)
    assert one.began is not None and one.ended is not None and two.began is not None
    assert one.began <= starts[0] and one.ended <= two.began  # type: ignore[operator]
    assert two.ended is not None and abs(two.ended - first.at) < 1  # type: ignore[operator]
    (own,) = after.attempt_log
    assert (own.step, own.number, own.how) == (1, 1, "completed")
    assert first.at is not None and ends[-1] <= first.at  # type: ignore[operator]
    assert first.calls_left_out == 0
    assert [c.label for c in first.calls] == ["llm#0", "lookup[tool-7]", "llm#2"]
    assert SECRET not in json.dumps([asdict(h) for h in api.store.run_history(run_id)])


@durable.step
def fetch_page(url: str) -> str:
    return f"{SECRET}:{url}"


@durable.workflow(name="call-index-crawl")
def crawl(urls: list[str]) -> int:
    return sum(len(fetch_page(u)) for u in urls)


@durable.step(name="fetch_page")
async def fetch_page_async(url: str) -> str:
    return f"{SECRET}:{url}"


@durable.workflow(name="call-index-crawl-async")
async def crawl_async(urls: list[str]) -> int:
    return sum([len(await fetch_page_async(u)) for u in urls])


def test_a_code_first_run_s_history_is_its_calls(api: Api, run_id: str) -> None:
    """A ``@durable.workflow`` is one engine step: its entry lists the decorated steps'
    calls, through ``run_history`` and the run's handle."""
    api.start(crawl_async if api.is_async else crawl, run_id, urls=["a", "bb", "ccc"])
    history = api.store.run_history(run_id)
    if not api.is_async:
        assert ds.handle_for(api.store, run_id).history() == history
    (entry,) = history
    assert entry.calls is not None
    assert [(c.name, c.size) for c in entry.calls] == [
        ("fetch_page", len(json.dumps(f"{SECRET}:{u}"))) for u in ("a", "bb", "ccc")
    ]
    assert SECRET not in json.dumps(asdict(entry))


def test_entries_written_before_call_indexes_load() -> None:
    """A Cosmos DB marker without ``calls`` is an entry with ``calls=None``; a malformed
    index is read leniently; the index is bounded."""
    marker = {"step": 0, "name": "s0", "at": 1.0, "attempts": 1, "size": 9}
    ((_, old),) = _entries([{"hist": marker}])
    assert (old.step, old.name, old.calls, old.calls_left_out) == (0, "s0", None, 0)
    ((_, odd),) = _entries([{"hist": {**marker, "calls": {"c": [["x"], 3], "n": "?"}}}])
    assert odd.calls == () and odd.calls_left_out == 0
    many = build({"i": i, "name": "c", "at": float(i), "result": i} for i in range(LIMIT + 5))
    assert many is not None and len(many["c"]) == LIMIT and many["n"] == 5
    assert many["c"][0][3] == 5  # the last LIMIT kept
    assert many["c"][0][5] is None  # no t0 recorded: no start


def test_a_walk_indexes_the_journal_the_completing_save_dropped() -> None:
    """The file log's walk: the version before a step's completion holds its journal."""
    rec = {"i": 0, "name": "llm", "at": 2.0, "result": "xy", "step_attempt": 1}
    walk = Walk()
    for step, journal in ((-1, [rec]), (0, [])):
        fields = {"step": step, "steps": ["s0"][: step + 1], "updated_at": 3.0, "attempt": 1}
        walk.add(Version(fields, 10, dict, lambda j=journal: list(j)))  # type: ignore[misc]
    (entry,) = walk.entries
    assert entry.calls is not None and [(c.name, c.size) for c in entry.calls] == [("llm", 4)]
