"""What operators see: log lines under `durable_steps` and OpenTelemetry spans, including one
trace across a crash and a resume in another process."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import durable_steps as ds
from durable_steps import Retry, Step

CHILD = str(Path(__file__).parents[1] / "helpers" / "otel_child.py")
P = "durable_steps."


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """An SDK tracer provider with an in-memory exporter, for this test only (the global
    provider is left alone, so other tests trace nothing)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer", provider.get_tracer)
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    yield exporter
    provider.shutdown()


def raising_first(*errors: BaseException) -> Callable[[Any], None]:
    """A step function that raises ``errors`` on its first calls, then returns."""
    left = iter(errors)

    def flaky(state: Any) -> None:
        if (exc := next(left, None)) is not None:
            raise exc

    return flaky


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == P + name]


def readme_attributes() -> dict[str, set[str]]:
    """The documented span table (docs/observability.md): span kind -> its attribute names
    (without the prefix)."""
    readme = (Path(__file__).parents[2] / "docs" / "observability.md").read_text()
    rows = re.findall(r"^\| `durable_steps\.(\w+)` .*\| (`[^|]*`) \|$", readme, re.MULTILINE)
    return {kind: set(re.findall(r"`([\w.]+)`", attrs)) for kind, attrs in rows}


README_ATTRIBUTES = readme_attributes()


def test_spans_carry_exactly_the_attributes_the_readme_lists(
    spans: InMemorySpanExporter, run_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Every span of a workflow run has the attribute names of the documented table, no
    more and no fewer; and no span is ended twice (the SDK would warn)."""
    caplog.set_level(logging.WARNING, logger="opentelemetry")
    w = ds.Workflow(
        "wf", [Step("a", lambda s: {"a": ds.call("c", lambda: 1)}), Step("b", lambda s: {"b": 2})]
    )
    w.run(run_id, ds.MemoryStore())
    assert set(README_ATTRIBUTES) == {"run", "step", "save", "call"}  # the table was found
    finished = spans.get_finished_spans()
    assert {s.name for s in finished} == {P + kind for kind in README_ATTRIBUTES}
    for span in finished:
        names = {k.removeprefix(P) for k in span.attributes or {}}
        assert names == README_ATTRIBUTES[span.name.removeprefix(P)], span.name
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry")]


def test_a_fresh_run_has_a_run_span_with_step_and_save_spans(
    spans: InMemorySpanExporter, run_id: str, tmp_path: Path
) -> None:
    """One durable_steps.run span per attempt; a durable_steps.step span per step under it,
    each with its save under it; attributes name the run, step, attempt, store and bytes."""
    w = ds.Workflow("wf", [Step("a", lambda s: {"a": 1}), Step("b", lambda s: {"b": 2})])
    with ds.FileStore(tmp_path) as store:
        w.run(run_id, store)
    (run,) = named(spans, "run")
    a, _ = sorted(named(spans, "step"), key=lambda s: s.attributes[P + "step.index"])
    assert run.attributes is not None and a.attributes is not None
    assert run.attributes[P + "run_id"] == run_id
    assert run.attributes[P + "workflow"] == "wf"
    assert run.attributes[P + "store"] == "FileStore"
    assert (run.attributes[P + "outcome"], run.attributes[P + "attempt"]) == ("completed", 1)
    assert (a.attributes[P + "step.name"], a.attributes[P + "attempt"]) == ("a", 1)
    assert a.parent is not None and a.parent.span_id == run.context.span_id
    saves = named(spans, "save")
    assert len(saves) == 3  # the claim, then one per step
    under_a = [s for s in saves if s.parent and s.parent.span_id == a.context.span_id]
    assert len(under_a) == 1
    assert under_a[0].attributes[P + "bytes_written"] > 0  # type: ignore[index,operator]
    assert a.attributes[P + "bytes_written"] == under_a[0].attributes[P + "bytes_written"]  # type: ignore[index]
    assert all(s.status.status_code != StatusCode.ERROR for s in spans.get_finished_spans())


def test_each_call_has_a_span_under_its_step_replayed_or_not(
    spans: InMemorySpanExporter, run_id: str
) -> None:
    """A durable_steps.call span per call attempt, a child of the step span and current
    while the call's function runs (its own spans nest under it), with the call's index,
    name and bytes; on the step's next attempt a recorded call's span says replayed."""
    tracer = trace.get_tracer("test")
    crash = [True]

    def tool() -> str:
        with tracer.start_as_current_span("http.request"):
            return "x" * 100

    def agent(state: Any) -> dict[str, Any]:
        got = ds.call("tool", tool)
        if crash[0]:
            raise RuntimeError("die")
        return {"got": len(got)}

    store = ds.MemoryStore()
    with pytest.raises(RuntimeError):
        ds.run(run_id, [Step("agent", agent)], store)
    crash[0] = False
    ds.run(run_id, [Step("agent", agent)], store)
    first, replayed = named(spans, "call")
    steps = {s.context.span_id: s for s in named(spans, "step")}
    assert first.attributes is not None and replayed.attributes is not None
    assert first.parent is not None and first.parent.span_id in steps
    assert (first.attributes[P + "call.name"], first.attributes[P + "call.index"]) == ("tool", 0)
    assert (first.attributes[P + "call.replayed"], replayed.attributes[P + "call.replayed"]) == (
        False,
        True,
    )
    assert first.attributes[P + "bytes_written"] > 100  # type: ignore[operator]
    assert replayed.attributes[P + "bytes_written"] == 0
    (http,) = [s for s in spans.get_finished_spans() if s.name == "http.request"]
    assert http.parent is not None and http.parent.span_id == first.context.span_id


def test_a_failed_step_records_the_exception_on_its_span(
    spans: InMemorySpanExporter, run_id: str
) -> None:
    """A step that raises ends its span and the run's with status error, the exception
    recorded, and outcome failed."""

    def boom(state: Any) -> None:
        raise ValueError("the tool is down")

    with pytest.raises(ValueError, match="the tool is down"):
        ds.run(run_id, [Step("boom", boom)], ds.MemoryStore())
    (step,) = named(spans, "step")
    (run,) = named(spans, "run")
    for span in (step, run):
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes is not None and span.attributes[P + "outcome"] == "failed"
    (event,) = [e for e in step.events if e.name == "exception"]
    assert event.attributes is not None
    assert event.attributes["exception.type"] == "ValueError"


@pytest.mark.usefixtures("pauses")  # retries pause on a fake clock
def test_a_step_span_ends_with_the_outcome_of_its_attempt(
    spans: InMemorySpanExporter, run_id: str
) -> None:
    """A step span ends once its attempt's outcome is saved: failed for an attempt that
    is retried and for a result that is not JSON, waiting for a wait; the save that
    records it is its child."""
    store = ds.MemoryStore()
    flaky = raising_first(TimeoutError("429"))

    steps = [
        Step("flaky", flaky, retry=Retry(attempts=2)),
        Step("gate", lambda s: {"ok": ds.wait_for_signal("ok")}),
    ]
    with pytest.raises(ds.RunWaiting):
        ds.run(run_id, steps, store)
    with pytest.raises(ds.InvalidStateError):
        ds.run(run_id + "-bad", [Step("bad", lambda s: {"x": object()})], store)
    steps_ = named(spans, "step")
    outcomes = [(s.attributes[P + "step.name"], s.attributes[P + "outcome"]) for s in steps_]  # type: ignore[index]
    assert outcomes == [
        ("flaky", "failed"),
        ("flaky", "completed"),
        ("gate", "waiting"),
        ("bad", "failed"),
    ]
    saves = named(spans, "save")
    for step in steps_:
        children = [x for x in saves if x.parent and x.parent.span_id == step.context.span_id]
        assert len(children) == 1, step.attributes


def test_a_resumed_attempt_links_to_the_first_attempts_trace(tmp_path: Path, run_id: str) -> None:
    """Attempt 1 dies (os._exit) in step b in one process; attempt 2 runs in another. The
    checkpoint keeps attempt 1's traceparent and attempt 2's run span links to it, so the
    spans of both attempts are found from one trace id."""
    env = {
        **os.environ,
        "DURABLE_STORE": "file",
        "DURABLE_FILE_PATH": str(tmp_path / "store"),
        "SPANS": str(tmp_path / "spans.jsonl"),
    }
    first = subprocess.run(
        [sys.executable, CHILD, run_id], env={**env, "CRASH": "1"}, check=False, timeout=120
    )
    assert first.returncode == 3
    spans_1 = [json.loads(line) for line in (tmp_path / "spans.jsonl").read_text().splitlines()]
    (step_a,) = [s for s in spans_1 if s["name"] == P + "step"]
    first_trace = step_a["context"]["trace_id"]
    cp = ds.FileStore(tmp_path / "store").load(run_id)
    assert cp is not None and cp.trace is not None
    assert f"0x{cp.trace.split('-')[1]}" == first_trace
    second = subprocess.run([sys.executable, CHILD, run_id], env=env, check=False, timeout=120)
    assert second.returncode == 0
    spans_all = [json.loads(line) for line in (tmp_path / "spans.jsonl").read_text().splitlines()]
    (run_2,) = [s for s in spans_all if s["name"] == P + "run"]
    assert run_2["context"]["trace_id"] != first_trace  # a new trace for the new process
    assert [link["context"]["trace_id"] for link in run_2["links"]] == [first_trace]
    assert run_2["attributes"][P + "attempt"] == 2
    resumed = [s["attributes"][P + "step.name"] for s in spans_all if s["name"] == P + "step"]
    assert resumed == ["a", "b", "c"]


def test_a_resumed_run_is_a_child_of_the_callers_span(
    spans: InMemorySpanExporter, run_id: str
) -> None:
    """The run span is a child of whatever span is current where run() is called."""
    tracer = trace.get_tracer("app")
    with tracer.start_as_current_span("handle-request") as parent:
        ds.run(run_id, [Step("a", lambda s: None)], ds.MemoryStore())
    (run,) = named(spans, "run")
    assert run.parent is not None and run.parent.span_id == parent.get_span_context().span_id


def test_cosmos_requests_appear_under_the_save_span(
    spans: InMemorySpanExporter, cosmos_local: Any, run_id: str
) -> None:
    """With azure-core's OpenTelemetry plugin on, the SDK's HTTP requests of a save are
    children of its durable_steps.save span."""
    from azure.core.settings import settings

    before = settings.tracing_implementation()
    settings.tracing_implementation = "opentelemetry"
    try:
        with cosmos_local.store() as store:
            ds.run(run_id, [Step("a", lambda s: {"a": 1})], store)
    finally:
        settings.tracing_implementation = before
    saves = {s.context.span_id for s in named(spans, "save")}
    children = [s for s in spans.get_finished_spans() if s.parent and s.parent.span_id in saves]
    assert len(children) >= 2, [s.name for s in spans.get_finished_spans()]
    assert not any(s.name.startswith(P) for s in children)


@pytest.mark.usefixtures("pauses")  # retries pause on a fake clock
def test_log_lines_tell_the_story_of_a_run(caplog: pytest.LogCaptureFixture, run_id: str) -> None:
    """INFO for started, resumed, waiting and completed; WARNING for a retried and a failed
    step (with the error type), a refused lease and a taken-over lease; DEBUG per save."""
    caplog.set_level(logging.DEBUG, logger="durable_steps")
    store = ds.MemoryStore()
    flaky = raising_first(TimeoutError(), TimeoutError())

    steps = [
        Step("flaky", flaky, retry=Retry(attempts=2)),
        Step("gate", lambda s: {"ok": ds.wait_for_signal("ok")}),
    ]
    with pytest.raises(TimeoutError):
        ds.run(run_id, steps, store)
    with pytest.raises(ds.RunWaiting):
        ds.run(run_id, steps, store)
    store.save(ds.Checkpoint(run_id + "-x", -1, {}, owner="other", lease_expires=9e9))
    with pytest.raises(ds.RunLeasedError):
        ds.run(run_id + "-x", steps, store)
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "durable_steps"]
    text = "\n".join(f"{level} {msg}" for level, msg in lines)
    assert f"INFO run {run_id!r} started" in text
    assert "WARNING" in text and "failed (TimeoutError, attempt 1); retrying in" in text
    assert "step 0 'flaky' failed (TimeoutError, attempt 2)" in text
    assert f"INFO run {run_id!r} resumed at step 1" not in text  # it resumed at step 0
    assert f"INFO run {run_id!r} resumed at step 0, attempt 3" in text
    assert f"INFO run {run_id!r} is waiting for signal 'ok' in step 1" in text
    assert f"WARNING run {run_id + '-x'!r} is leased by other; nothing ran" in text
    assert "DEBUG" in text and "bytes" in text
    ds.send_signal(store, run_id, "ok", True)
    caplog.clear()
    store.save(ds.Checkpoint(run_id + "-y", -1, {}, owner="crashed", lease_expires=1.0))
    ds.run(run_id + "-y", [Step("a", lambda s: None)], store)
    ds.run(run_id, steps, store)
    text = "\n".join(f"{r.levelname} {r.getMessage()}" for r in caplog.records)
    assert f"WARNING run {run_id + '-y'!r}: took over the lease of crashed" in text
    assert f"INFO run {run_id!r} completed" in text

    def steal(state: Any) -> None:
        cp = store.load(run_id + "-z")
        assert cp is not None
        store.save(replace(cp, owner="thief", lease_expires=9e9))

    caplog.clear()
    with pytest.raises(ds.LeaseLostError):
        ds.run(run_id + "-z", [Step("steal", steal)], store)
    text = "\n".join(f"{r.levelname} {r.getMessage()}" for r in caplog.records)
    assert f"WARNING run {run_id + '-z'!r}: lost its lease to another worker" in text


@pytest.mark.usefixtures("pauses")  # retries pause on a fake clock
def test_no_log_line_or_span_attribute_carries_state(
    spans: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
    run_id: str,
) -> None:
    """State values and state keys never appear in a log record or a span attribute, in
    success, retry, failure, waiting and invalid-state paths."""
    caplog.set_level(logging.DEBUG, logger="durable_steps")
    key, value = "api_token_QZX", "s3cr3t-VALUE-8812"
    store = ds.MemoryStore()
    flaky = raising_first(ConnectionError("reset"))

    steps = [
        Step("secret", lambda s: {key: value}),
        Step("flaky", flaky, retry=Retry(attempts=2)),
        Step("gate", lambda s: {"ok": ds.wait_for_signal("ok")}),
    ]
    with pytest.raises(ds.RunWaiting):
        ds.run(run_id, steps, store)
    ds.send_signal(store, run_id, "ok", {"note": value})
    ds.run(run_id, steps, store)
    with pytest.raises(ds.InvalidStateError):
        ds.run(run_id + "-bad", [Step("bad", lambda s: {key: object()})], store)
    seen = [r.getMessage() for r in caplog.records] + [str(r.args) for r in caplog.records]
    for span in spans.get_finished_spans():
        seen += [f"{k}={v}" for k, v in (span.attributes or {}).items()]
        seen += [span.status.description or ""]
        for event in span.events:  # a recorded exception: its message and stack trace
            seen += [f"{k}={v}" for k, v in (event.attributes or {}).items()]
    assert any("exception.stacktrace" in s for s in seen)  # the invalid state was recorded
    assert seen
    assert not [s for s in seen if key in s or value in s]


def test_import_without_opentelemetry_traces_nothing_and_runs() -> None:
    """Without opentelemetry-api installed, runs work and nothing of it is imported."""
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None\n"
        "import durable_steps as ds\n"
        "print(ds.run('r', [ds.Step('a', lambda s: {'a': 1})], ds.MemoryStore()))\n"
        "print([m for m in sys.modules if m.startswith('opentelemetry') and sys.modules[m]])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["{'a': 1}", "[]"]
