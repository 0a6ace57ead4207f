"""A traced run in a child process: spans go to $SPANS as JSON lines when they end.

    python tests/helpers/otel_child.py RUN_ID        store from the environment

Steps a, b, c; b calls os._exit(3) when CRASH=1 (a crash: the attempt's run span never
ends, but the spans that ended before it were exported).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

import durable_steps as ds


def main() -> None:
    out = open(os.environ["SPANS"], "a")  # noqa: SIM115 - open for the process's life
    provider = TracerProvider()
    exporter = ConsoleSpanExporter(out=out, formatter=lambda s: s.to_json(indent=None) + "\n")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    def b(state: Any) -> dict[str, int]:
        if os.environ.get("CRASH") == "1":
            out.flush()
            os._exit(3)
        return {"b": 2}

    steps = [ds.Step("a", lambda s: {"a": 1}), ds.Step("b", b), ds.Step("c", lambda s: None)]
    with contextlib.closing(ds.store_from_env()) as store:
        ds.run(sys.argv[1], steps, store)
    provider.shutdown()


if __name__ == "__main__":
    main()
