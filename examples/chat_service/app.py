"""The chat service's web app: start an agent run, stream its tokens to the browser.

    uvicorn app:app                    (the store from the environment, as the worker's)

- ``GET /``: a page with a question box; its EventSource shows the answer as it comes.
- ``POST /chats`` (JSON ``{"question": ...}``): starts a run of the ``chat`` workflow
  for the workers (``CHAT.start``: nothing runs here) and answers ``{"run_id": ...,
  "stream": URL}``.
- ``GET /chats/{run_id}/stream``: Server-Sent Events of the run's stream ``"model"``,
  from the offset after ``Last-Event-ID`` (what a browser's EventSource sends when it
  reconnects) or ``?after=N``. Each event's id is its offset: ``token`` events carry a
  chunk (``{"text": ...}``), a ``reset`` event (``{"since": N}``) says that the chunks
  from offset N on were written by a model call that was interrupted (its worker
  died) and are replaced by what follows, ``end`` closes the stream when the run
  ended with its result (``{"status": "completed", "answer": ...}``).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Route

from agent import CHAT, STREAM
from durable_steps import (
    AsyncStore,
    RunCancelledError,
    RunFailedError,
    StreamReset,
    async_store_from_env,
    read_stream_async,
    wait_for_result_async,
)

PAGE = Path(__file__).with_name("index.html")
END_WAIT = 30.0
"""Seconds the ``end`` event waits for the run's result once its stream ended."""


def offset_after(request: Request) -> int | None:
    """Where a reader resumes: the browser's ``Last-Event-ID``, else ``?after=``."""
    text = request.headers.get("last-event-id") or request.query_params.get("after")
    if text is None or text == "":
        return None
    if not text.lstrip("-").isdigit():
        raise ValueError(f"an offset is an integer, not {text!r}")
    return int(text)


async def events(
    store: AsyncStore, run_id: str, after: int | None
) -> AsyncIterator[ServerSentEvent]:
    # wait: the page connects as the chat starts, before the worker's step writes its stream
    async for offset, chunk in read_stream_async(store, run_id, STREAM, after=after, wait=True):
        if isinstance(chunk, StreamReset):
            yield ServerSentEvent(json.dumps({"since": chunk.since}), event="reset", id=str(offset))
        else:
            yield ServerSentEvent(json.dumps(chunk), event="token", id=str(offset))
    # The stream is closed as the step ends: its answer comes with the run's last save.
    try:
        state = await wait_for_result_async(store, run_id, timeout=END_WAIT, interval=0.05)
        end: dict[str, Any] = {"status": "completed", "answer": state.get("answer")}
    except RunFailedError as exc:
        end = {"status": "failed", "error": str(exc)}
    except RunCancelledError:
        end = {"status": "cancelled"}
    except TimeoutError:
        end = {"status": "running"}  # the stream ended before the run: read its result later
    yield ServerSentEvent(json.dumps(end), event="end")


async def page(request: Request) -> FileResponse:
    return FileResponse(PAGE)


async def start_chat(request: Request) -> JSONResponse:
    try:
        body: Any = await request.json()
    except ValueError:  # not JSON (or not UTF-8): the client's mistake, said as such
        body = None
    question = body.get("question") if isinstance(body, dict) else None
    if not isinstance(question, str) or not question.strip():
        return JSONResponse({"error": 'send {"question": "..."}'}, status_code=400)
    run_id = f"chat-{uuid.uuid4().hex}"
    await CHAT.start_async(run_id, request.app.state.store, input={"question": question})
    return JSONResponse({"run_id": run_id, "stream": f"/chats/{run_id}/stream"}, status_code=201)


async def stream(request: Request) -> EventSourceResponse | JSONResponse:
    store: AsyncStore = request.app.state.store
    run_id = request.path_params["run_id"]
    try:
        after = offset_after(request)
    except ValueError as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    if await store.run_info(run_id) is None:
        return JSONResponse({"error": f"no run {run_id!r}"}, status_code=404)
    return EventSourceResponse(events(store, run_id, after))


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    async with async_store_from_env() as store:
        app.state.store = store
        yield


app = Starlette(
    routes=[
        Route("/", page),
        Route("/chats", start_chat, methods=["POST"]),
        Route("/chats/{run_id}/stream", stream),
    ],
    lifespan=lifespan,
)
