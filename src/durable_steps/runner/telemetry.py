"""Observability: log lines under the ``durable_steps`` logger, and OpenTelemetry spans.

Logging is the standard library's (the package logger has a ``NullHandler``; the
application configures handlers): INFO when a run starts, resumes (at which step,
which attempt), completes or waits; WARNING for a failed or retried step (the
error's type), a refused or lost lease, a lease taken over and a claim that met
another writer; DEBUG for each save (bytes, duration). Never state contents,
never state keys.

Spans use ``opentelemetry-api`` only (extra ``[otel]``); without it nothing is
imported and every hook here is a no-op. Per run attempt (one call of ``run``)
a ``durable_steps.run`` span, child of the caller's current span; under it a
``durable_steps.step`` span per step attempt, which the driver opens around the
step's function and the runner ends once the attempt's outcome is saved; under
that the attempt's ``durable_steps.save`` (other saves -- the claim, a release,
a heartbeat -- are children of the run span). The traceparent of a run's first
attempt is kept in the checkpoint (``trace``); every later attempt's run span
links to it, so one trace query shows the whole life of a run across crashes and
hosts. Saves run with their span current, so azure-core's OpenTelemetry plugin
puts the Cosmos DB requests under them.

Stores report the bytes a save wrote (or sent) with ``seam.metering.wrote(n)``; it
lands on the save and step spans and in the DEBUG line.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
import traceback
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from ..seam import metering
from ..seam.checkpoint import Checkpoint
from ..seam.errors import (
    InvalidStateError,
    LeaseLostError,
    RunCancelledError,
    RunLeasedError,
    RunWaiting,
    StopRequested,
    Suspend,
)
from ..seam.store import AsyncStore, Store

log = logging.getLogger("durable_steps")

otel: Any = None
Status: Any = None
StatusCode: Any = None
TraceContextTextMapPropagator: Any = None


@functools.cache
def _tracing() -> bool:
    """Import opentelemetry-api on first use, if it is installed (``import durable_steps``
    stays free of it); False: spans are off."""
    global otel, Status, StatusCode, TraceContextTextMapPropagator  # noqa: PLW0603
    try:
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode
        from opentelemetry.trace.propagation.tracecontext import (
            TraceContextTextMapPropagator,
        )
    except ImportError:  # the [otel] extra is not installed
        return False
    otel = trace
    return True


PREFIX = "durable_steps."
_QUIET = contextlib.nullcontext()


def _tracer() -> Any:
    """The tracer of the configured provider; None when opentelemetry-api is missing or
    no SDK provider is configured (nothing would be recorded, so no span is made)."""
    if not _tracing():
        return None
    provider = otel.get_tracer_provider()
    if type(provider).__name__ in ("ProxyTracerProvider", "NoOpTracerProvider"):
        return None
    return provider.get_tracer("durable_steps")


_OUTCOMES: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str], ...] = (
    ((RunWaiting, Suspend), "waiting"),
    (RunLeasedError, "leased"),
    (LeaseLostError, "lease_lost"),
    (RunCancelledError, "cancelled"),
    (StopRequested, "interrupted"),
)


def _outcome(exc: BaseException | None) -> str:
    if exc is None:
        return "completed"
    for kind, outcome in _OUTCOMES:
        if isinstance(exc, kind):
            return outcome
    return "failed" if isinstance(exc, Exception) else "interrupted"


class Observer:
    """The spans and log lines of one run attempt."""

    def __init__(self, run_id: str, workflow: str | None) -> None:
        self.run_id, self.workflow = run_id, workflow
        self.store_kind: str | None = None
        self.tracer = _tracer()
        self.span: Any = None
        self.step_span: Any = None

    def bind(self, store: Store | AsyncStore) -> None:
        self.store_kind = store.kind

    def attributes(self, **extra: Any) -> dict[str, Any]:
        attrs = {"run_id": self.run_id, "workflow": self.workflow, "store": self.store_kind}
        return {PREFIX + k: v for k, v in {**attrs, **extra}.items() if v is not None}

    # -- the run --------------------------------------------------------------------------

    @contextlib.contextmanager
    def run(self) -> Iterator[None]:
        """Around a whole attempt."""
        if self.tracer is None:
            yield
            return
        with self.tracer.start_as_current_span(
            PREFIX + "run",
            attributes=self.attributes(),
            record_exception=False,
            set_status_on_exception=False,
            end_on_exit=False,
        ) as span:
            self.span = span
            try:
                yield
            except BaseException as exc:
                self.step_ended(exc)  # a step the runner could not see to its end
                _end(span, exc)
                raise
            self.step_ended(None)
            _end(span, None)

    def loaded(self, cp: Checkpoint | None) -> None:
        """The checkpoint the attempt starts from: link to the run's first attempt."""
        if cp is not None and cp.workflow and not self.workflow:
            self.workflow = cp.workflow
        if self.span is None or cp is None:
            return
        if cp.workflow:
            self.span.set_attribute(PREFIX + "workflow", cp.workflow)
        if cp.trace:
            ctx = TraceContextTextMapPropagator().extract({"traceparent": cp.trace})
            first = otel.get_current_span(ctx).get_span_context()
            if first.is_valid:
                self.span.add_link(first, {PREFIX + "link": "first_attempt"})

    def claiming(self, cp: Checkpoint) -> Checkpoint:
        """A claim that finds no first attempt's trace records this attempt's."""
        if self.span is None or cp.trace is not None or not self.span.get_span_context().is_valid:
            return cp
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier, otel.set_span_in_context(self.span))
        return replace(cp, trace=carrier.get("traceparent"))

    def claimed(self, cp: Checkpoint, loaded: Checkpoint | None) -> None:
        """The run is ours (``cp``, claimed over ``loaded``): say how it got here."""
        if self.span is not None:
            self.span.set_attribute(PREFIX + "attempt", cp.attempt)
            self.span.set_attribute(PREFIX + "resumed_at", cp.step + 1)
        where = f"step {cp.step + 1}, attempt {cp.attempt}"
        if loaded is None:
            of = f" (workflow {self.workflow})" if self.workflow else ""
            log.info("run %r started%s", self.run_id, of)
        elif loaded.owner not in (None, cp.owner) and loaded.lease_expires is not None:
            # A warning: the run resumes from its journal, so its recorded calls replay and none
            # runs again.
            log.warning(
                "run %r: took over the lease of %s (expired or its process ended); resuming at %s",
                *(self.run_id, loaded.owner, where),
            )
        else:
            log.info("run %r resumed at %s", self.run_id, where)

    # -- steps and saves ------------------------------------------------------------------

    def step(self, index: int, name: str, attempt: int) -> contextlib.AbstractContextManager[None]:
        """Around a step's function: opens the step's span, current while it runs. The
        span stays open for the save of its outcome; ``step_ended`` ends it."""
        return _QUIET if self.tracer is None else self._step(index, name, attempt)

    def step_ended(self, exc: BaseException | None) -> None:
        """The outcome of the open step attempt is known (and saved)."""
        if self.step_span is not None:
            span, self.step_span = self.step_span, None
            _end(span, exc)

    def call(self, step: int, index: int, name: str, attempt: int) -> CallSpan:
        """One attempt of a call of the running step: a ``durable_steps.call`` span under
        the step's, current while the call's function runs, ended once its result is
        recorded (with the bytes that took) or it failed."""
        log.debug("run %r: call %d %r (attempt %d)", self.run_id, index, name, attempt)
        return CallSpan(self, step, index, name, attempt=attempt, replayed=False)

    def call_replayed(self, step: int, index: int, name: str, attempt: int) -> None:
        """A call that returned its recorded result: a span of its own, marked so."""
        log.debug("run %r: call %d %r replayed from its record", self.run_id, index, name)
        if self.tracer is not None:
            CallSpan(self, step, index, name, attempt=attempt, replayed=True).ended(None)

    def save(
        self, cp: Checkpoint, *, beat: bool = False
    ) -> contextlib.AbstractContextManager[None]:
        """Around one save: under the open step's span, or (a claim, a release, a
        heartbeat's save, from another thread or task) under the run's."""
        if self.tracer is None and not log.isEnabledFor(logging.DEBUG):
            return _QUIET
        return self._save(cp, beat)

    @contextlib.contextmanager
    def _step(self, index: int, name: str, attempt: int) -> Iterator[None]:
        self.step_ended(None)  # defensive: one step span at a time
        self.step_span = self.tracer.start_span(
            PREFIX + "step",
            attributes=self.attributes(
                **{"step.index": index, "step.name": name, "attempt": attempt}
            ),
        )
        with otel.use_span(self.step_span, end_on_exit=False, record_exception=False):
            yield

    @contextlib.contextmanager
    def _save(self, cp: Checkpoint, beat: bool) -> Iterator[None]:
        started = time.perf_counter()
        step = None if beat else self.step_span
        span = None
        if self.tracer is not None:
            span = self.tracer.start_span(
                PREFIX + "save",
                context=otel.set_span_in_context(step or self.span),
                attributes=self.attributes(**{"step.index": cp.step, "status": cp.status}),
            )
        with metering.counting() as holder:
            try:
                if span is None:
                    yield
                else:
                    with otel.use_span(span, end_on_exit=False, record_exception=False):
                        yield
            except BaseException as exc:
                if span is not None:
                    _end(span, exc)
                raise
        written = sum(holder)
        log.debug(
            "run %r: saved (step %d, %s, %d bytes, %.2f ms)",
            *(self.run_id, cp.step, cp.status, written),
            (time.perf_counter() - started) * 1000,
        )
        for s in (span, step):
            if s is not None:
                s.set_attribute(PREFIX + "bytes_written", written)
        if span is not None:
            _end(span, None)


class CallSpan:
    """The span of one call attempt (``Observer.call``); nothing when tracing is off."""

    __slots__ = ("span",)

    def __init__(
        self,
        obs: Observer,
        step: int,
        index: int,
        name: str,
        *,
        attempt: int | None,
        replayed: bool,
    ) -> None:
        self.span: Any = None
        if obs.tracer is not None:
            extra: dict[str, Any] = {
                "step.index": step,
                "call.index": index,
                "call.name": name,
                "call.replayed": replayed,
            }
            if attempt is not None:
                extra["attempt"] = attempt
            self.span = obs.tracer.start_span(PREFIX + "call", attributes=obs.attributes(**extra))

    def current(self) -> contextlib.AbstractContextManager[Any]:
        """The span current while the call's function runs (its own spans go under it)."""
        if self.span is None:
            return _QUIET
        current: contextlib.AbstractContextManager[Any] = otel.use_span(
            self.span, end_on_exit=False, record_exception=False
        )
        return current

    def ended(self, exc: BaseException | None, written: int = 0) -> None:
        """The call's outcome: recorded (with the bytes its record took), replayed, or
        failed."""
        if self.span is not None:
            self.span.set_attribute(PREFIX + "bytes_written", written)
            _end(self.span, exc)
            self.span = None


def _end(span: Any, exc: BaseException | None) -> None:
    outcome = _outcome(exc)
    span.set_attribute(PREFIX + "outcome", outcome)
    if exc is not None and outcome in ("failed", "lease_lost", "leased", "cancelled"):
        span.record_exception(exc, _keyless(exc))
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
    span.end()


def _keyless(exc: BaseException) -> dict[str, str] | None:
    """What replaces the message (and its copy in the stack trace) of an error of ours
    that names a state key: traces must not carry state keys."""
    if not isinstance(exc, InvalidStateError):
        return None
    said = "state is not plain JSON (the key is in the error, not in traces)"
    trace = "".join(traceback.format_tb(exc.__traceback__))
    return {
        "exception.message": said,
        "exception.stacktrace": f"Traceback (most recent call last):\n{trace}{said}\n",
    }
