"""The console's JSON API: what its pages show, for scripts (docs/console.md has curl).

    GET  /api/runs                       the runs list: the page's filters (status,
                                         workflow, prefix, older, newer, since, until,
                                         error, version, queue), sort, dir, size, page
    GET  /api/runs/{id}                  a run: its listing fields, last error, state's
                                         keys and sizes, signals, calls recorded
    GET  /api/runs/{id}/history          its kept steps (run_history)
    GET  /api/runs/{id}/streams          its streams (list_streams)
    GET  /api/runs/{id}/streams/{name}   a stream's entries after ``after`` (as the page)
    GET  /api/workers | /api/queues | /api/schedules   the fleet (``fleet``)
    POST /api/runs/{id}/{action}         an action (signal, message, cancel, resume,
                                         fork) with its fields as a JSON object
    POST /api/bulk/{action}              cancel, resume or signal ``run_ids``: a result
                                         per run (``bulk``)

Scripts sign in with ``Authorization: Bearer TOKEN`` (``security``); a browser's
session may call it too, and then a POST carries the page's CSRF token in the
``X-CSRF-Token`` header. A read-only token reads everything; every POST answers 403.

Errors are JSON, ``{"error": "...", "status": N}``, naming what is wrong: 400 for a
filter the API does not know or cannot read (an unknown name, a bad time range) or a
bad field, 404 for an unknown run, stream or action, 409 for what the library refused
(the run completed meanwhile), 403 for an action with a read-only token. Nothing here
is a new semantics: the same listing, reads and calls as the pages.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from durable_steps import DurableError, RunInfo, RunNotFoundError, owner_label

from . import actions, bulk, sources, timeline
from .host import Host
from .listing import SIZES, FilterError, Filters, status_of

FILTERS = frozenset(
    {"status", "workflow", "prefix", "older", "newer", "since", "until", "error", "version"}
    | {"queue", "sort", "dir", "size", "page"}
)
"""The query parameters ``/api/runs`` takes; any other is a 400 naming these."""


class ApiError(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


def answer(value: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(value, status_code=status)


def refused(status: int, text: str) -> JSONResponse:
    return answer({"error": text, "status": status}, status)


def run_json(info: RunInfo) -> dict[str, Any]:
    """A run as the list shows it: ``RunInfo``'s fields (``error``, set when its
    checkpoint cannot be read, as ``unreadable``), its status and its lease owner as
    people read it (``owner_label``)."""
    out = dataclasses.asdict(info)
    out["unreadable"] = out.pop("error")  # "error" is the key of the API's refusals
    out["status"] = status_of(info)
    out["owner_label"] = None if info.owner is None else owner_label(info.owner)
    return out


class Api:
    """The API's handlers over the console's state (store, listings, loaded runs)."""

    def __init__(self, console: Host) -> None:
        self.c = console

    def routes(self) -> list[Route]:
        return [
            Route("/api/runs", self.runs),
            Route("/api/runs/{run_id}", self.run),
            Route("/api/runs/{run_id}/history", self.history),
            Route("/api/runs/{run_id}/streams", self.streams),
            Route("/api/runs/{run_id}/streams/{name}", self.stream),
            Route("/api/workers", self.workers),
            Route("/api/queues", self.queues),
            Route("/api/schedules", self.schedules),
            Route("/api/runs/{run_id}/{action}", self.act, methods=["POST"]),
            Route("/api/bulk/{action}", self.bulk, methods=["POST"]),
        ]

    # -- reads -------------------------------------------------------------------------

    def runs(self, request: Request) -> Response:
        params = dict(request.query_params)
        unknown = sorted(set(params) - FILTERS)
        if unknown:
            return refused(
                400,
                f"unknown filter {', '.join(map(repr, unknown))}; /api/runs takes "
                f"{', '.join(sorted(FILTERS))}",
            )
        if params.get("size") and params["size"] not in {str(n) for n in SIZES}:
            return refused(400, f"size {params['size']!r}: give one of {SIZES}")
        if params.get("page") and not params["page"].isdigit():
            return refused(400, f"page {params['page']!r}: give a page number from 0")
        try:
            filters = Filters.parse(params)
        except FilterError as exc:
            return refused(400, str(exc))
        number = int(params.get("page") or 0)
        page = self.c.listings.page(filters, number, max_age=0.0 if number == 0 else 600.0)
        return answer(
            {
                "runs": [run_json(i) for i in page.rows],
                "page": page.number,
                "more": page.more,
                "total": page.total,
                "read": page.read,
                "filters": filters.params(),
            }
        )

    def _info(self, run_id: str) -> RunInfo:
        try:
            info = self.c.store.run_info(run_id)
        except DurableError as exc:  # not a valid run id
            raise ApiError(400, str(exc)) from None
        if info is None:
            raise ApiError(404, f"run {run_id!r} has no checkpoint in this store")
        return info

    def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        info = self._info(run_id)
        cp = self.c.loaded.get(run_id)
        return answer(
            {
                **run_json(info),
                "last_error": cp.error,
                "cancel_reason": cp.cancel_reason,
                "state_sizes": {str(k): timeline.size_of(v) for k, v in cp.state.items()},
                "signals": sorted(cp.signals),
                "calls": len(cp.calls),
                "actions": [] if self.c.read_only_for(request) else [
                    a.name for a in actions.offered(cp)
                ],
            }
        )  # fmt: skip

    def history(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        self._info(run_id)
        return answer([dataclasses.asdict(s) for s in sources.history(self.c.store, run_id)])

    def streams(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        self._info(run_id)
        return answer([s._asdict() for s in sources.streams(self.c.store, run_id)])

    def stream(self, request: Request) -> Response:
        run_id, name = request.path_params["run_id"], request.path_params["name"]
        self._info(run_id)
        after = request.query_params.get("after", "-1")
        if not after.lstrip("-").isdigit() or int(after) < -1:
            return refused(400, f"after {after!r}: give an offset from -1 (-1: from the start)")
        if name not in {s.name for s in sources.streams(self.c.store, run_id)}:
            return refused(404, f"run {run_id!r} has no stream {name!r}")
        got = sources.stream_chunks(self.c.store, run_id, name, int(after), 200)
        return answer(dataclasses.asdict(got))

    def workers(self, request: Request) -> Response:
        f = self.c.fleet.get("workers")
        return answer({"workers": [dataclasses.asdict(w) for w in f.workers], **_cost(f)})

    def queues(self, request: Request) -> Response:
        f = self.c.fleet.get("queues")
        return answer({"queues": [dataclasses.asdict(q) for q in f.queues], **_cost(f)})

    def schedules(self, request: Request) -> Response:
        f = self.c.fleet.get("schedules")
        return answer({"schedules": [dataclasses.asdict(s) for s in f.schedules], **_cost(f)})

    # -- actions -----------------------------------------------------------------------

    async def _body(self, request: Request) -> dict[str, Any]:
        if self.c.read_only_for(request):
            raise ApiError(403, "this token is read-only: it reads, and every action is refused")
        if not request.state.bearer and not self.c.secrets.csrf_ok(
            request.headers.get("x-csrf-token")
        ):
            raise ApiError(403, "a POST from a browser session needs the X-CSRF-Token header")
        raw = await request.body()
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            raise ApiError(400, f"the body is not JSON ({exc}); send a JSON object") from None
        if not isinstance(body, dict):
            raise ApiError(400, f"the body is {type(body).__name__}; send a JSON object")
        return body

    async def act(self, request: Request) -> Response:
        run_id, name = request.path_params["run_id"], request.path_params["action"]
        body = await self._body(request)
        action = actions.ACTIONS.get(name)
        if action is None:
            return refused(
                404, f"there is no action {name!r}; the actions are {', '.join(actions.ACTIONS)}"
            )
        await run_in_threadpool(self._info, run_id)
        try:
            given = actions.values_of_json(action, body)
        except actions.Refused as exc:
            return refused(400, str(exc))
        try:
            done = await run_in_threadpool(actions.perform, action, self.c.store, run_id, given)
        except actions.Refused as exc:
            return refused(409, str(exc))
        return answer({"run_id": run_id, "action": name, "ok": True, "result": done})

    async def bulk(self, request: Request) -> Response:
        name = request.path_params["action"]
        body = await self._body(request)
        try:
            action = bulk.action_for(name)
        except KeyError as exc:
            return refused(404, str(exc.args[0]))
        ids = body.get("run_ids")
        if not isinstance(ids, list) or not all(isinstance(r, str) for r in ids):
            return refused(400, 'run_ids: give a list of run ids, e.g. {"run_ids": ["a", "b"]}')
        try:
            chosen = bulk.selection(ids)
            given = actions.values_of_json(action, body)
        except actions.Refused as exc:
            return refused(400, str(exc))
        results = await run_in_threadpool(bulk.perform, action, self.c.store, chosen, given)
        ok = sum(r.ok for r in results)
        return answer(
            {
                "action": name,
                "count": len(results),
                "done": ok,
                "refused": len(results) - ok,
                "results": [r.json() for r in results],
            }
        )


def _cost(f: Any) -> dict[str, Any]:
    return {"as_of": f.taken_at, "listed": f.listed, "seconds": round(f.seconds, 3)}


def failed(request: Request, exc: Exception) -> Response:
    """An error of a handler of the API, as JSON."""
    if isinstance(exc, ApiError):
        return refused(exc.status, str(exc))
    if isinstance(exc, RunNotFoundError):
        return refused(404, str(exc))
    return refused(500, f"{type(exc).__name__}: {exc}")
