"""The console's web application: routes, pages and fragments, on Starlette.

Pages are rendered on the server from Jinja2 templates (``templates/``, autoescaped:
every run id, name and value from a store is text, never markup); ``static/console.js``
only refreshes fragments and unfolds values, so every page works without it.

    GET  /                          the runs list (filters, sort and page in the query)
    GET  /rows                      its table, for the live refresh
    GET  /run/{id}                  a run: facts, timeline, calls, state, signals, panels
    GET  /run/{id}/live?etag=       its facts, timeline and calls, for the live refresh
                                    (204 while the run is unchanged and not running)
    GET  /run/{id}/value            one fold of a value (root: state, calls, signals, events
                                    or step-K, the state after kept step K; path, offset)
    GET  /run/{id}/stream/{name}    a stream's entries after offset ``after`` (JSON), and
                                    whether it is done -- what is there, never waiting
    POST /run/{id}/act/{action}     an action: first the question, then (confirmed) the call
    POST /bulk                      one action on the runs selected in the list (``bulk``)
    GET  /workers, /queues, /schedules   the fleet (``fleet``)
    /api/...                        the same as JSON, for scripts (``api``)

Store calls block, so handlers run in Starlette's thread pool. A run's checkpoint is
loaded once per etag (``Loaded``): a fold of its state reads the run's metadata, not
its state again, while it is unchanged.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

import jinja2
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from durable_steps import Checkpoint, DurableError, RunNotFoundError, StepRecord, Store

from . import actions, api, bulk, fleet, sources, svg, timeline, values
from .listing import (
    COLUMNS,
    EXTRA,
    IDLE,
    SIZES,
    STATUSES,
    FilterError,
    Filters,
    Listings,
    holding,
    owner,
    status_of,
)
from .security import Guard, Secrets

HERE = Path(__file__).parent
LIVE_LIST, LIVE_RUN = 5, 2
"""Seconds between live refreshes of the runs list and of a run's page."""
CHUNKS = 200
"""Entries of a stream per poll, at most."""
RESORT = 30.0
"""A sorted listing's first page is sorted anew when it is older than this."""


def size(n: int | None) -> str:
    if n is None:
        return "-"
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KiB" if n < 1024**2 else f"{n / 1024**2:.1f} MiB"


def _quoted(value: object) -> str:
    """A value as one segment or parameter of a URL."""
    return quote(str(value), safe="")


def when(ts: float | None) -> str:
    return svg.clock(ts)[:19] + "Z" if ts is not None else "-"


class Loaded:
    """Checkpoints loaded by the console, each kept while its etag stands (a few)."""

    def __init__(self, store: Store, keep: int = 4) -> None:
        self.store, self.keep = store, keep
        self._cps: OrderedDict[str, Checkpoint] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, run_id: str) -> Checkpoint:
        info = self.store.run_info(run_id)
        if info is None:
            raise _missing(run_id)
        with self._lock:
            cp = self._cps.get(run_id)
        if cp is None or cp.etag != info.etag:
            cp = self.store.load(run_id)
            if cp is None:
                raise _missing(run_id)
            with self._lock:
                self._cps[run_id] = cp
                self._cps.move_to_end(run_id)
                while len(self._cps) > self.keep:
                    self._cps.popitem(last=False)
        return cp


def _missing(run_id: str) -> RunNotFoundError:
    return RunNotFoundError(
        f"run {run_id!r} has no checkpoint in this store (deleted, or a mistyped id): "
        "the runs list shows the runs there",
        run_id=run_id,
    )


class Console:
    """The application's state: the store, its listings, loaded runs, messages."""

    def __init__(self, store: Store, secrets: Secrets, read_only: bool) -> None:
        self.store, self.secrets, self.read_only = store, secrets, read_only
        self.listings = Listings(store)
        self.loaded = Loaded(store)
        self.after = sources.After(store)
        self.fleet = fleet.FleetView(store)
        self.flashes: OrderedDict[str, str] = OrderedDict()
        self._ids = itertools.count(1)
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.env.filters.update(size=size, when=when, clock=svg.clock, owner=owner, q=_quoted)
        self.env.globals.update(
            STATUSES=STATUSES, COLUMNS=COLUMNS, EXTRA=EXTRA, SIZES=SIZES, status_of=status_of,
            csrf=secrets.csrf, read_only=read_only, store=repr(store), holding=holding,
            LIVE_LIST=LIVE_LIST, LIVE_RUN=LIVE_RUN, BULK=bulk.BULK, TITLES=bulk.TITLES,
        )  # fmt: skip

    def page(
        self, name: str, status: int = 200, request: Request | None = None, **context: Any
    ) -> HTMLResponse:
        if request is not None:  # a read-only token's session sees no action
            context.setdefault("read_only", self.read_only_for(request))
        html = self.env.get_template(name).render(now=time.time(), **context)
        return HTMLResponse(html, status_code=status)

    def read_only_for(self, request: Request) -> bool:
        """Whether this request may only read: the console is read-only, or the request
        signed in with the read-only token (``security``)."""
        return self.read_only or bool(getattr(request.state, "read_only", False))

    def flash(self, text: str) -> str:
        key = str(next(self._ids))
        self.flashes[key] = text
        while len(self.flashes) > 100:
            self.flashes.popitem(last=False)
        return key

    # -- the runs list ---------------------------------------------------------------

    def runs(self, request: Request) -> Response:
        return self._runs(request, "runs.html")

    def rows(self, request: Request) -> Response:
        return self._runs(request, "rows.html", live=True)

    def _runs(self, request: Request, template: str, live: bool = False) -> Response:
        params = dict(request.query_params)
        try:
            filters = Filters.parse(params)
        except FilterError as exc:
            return self.page(
                template, 400, request, filters=Filters(), error=str(exc), page=None, exact=None
            )
        number = int(params["page"]) if params.get("page", "").isdigit() else 0
        # The first page is listed anew; a sorted one is sorted anew when it is loaded
        # (at most every RESORT seconds), never by the live refresh, which re-reads its
        # rows; later pages come from the listing held since the first.
        relisted = number == 0 and filters.sort is None
        max_age = 0.0 if relisted else RESORT if number == 0 and not live else IDLE
        page = self.listings.page(filters, number, max_age=max_age)
        if live and not relisted:  # a later page, or a sorted one: its rows as they are now
            now = self.listings.reread([r.run_id for r in page.rows])
            page.rows = [n if n is not None else r for r, n in zip(page.rows, now, strict=True)]
        return self.page(
            template, 200, request, filters=filters, page=page, error=None,
            exact=self._exact(filters),
        )  # fmt: skip

    def _exact(self, filters: Filters) -> str | None:
        """The run whose id is the prefix typed, if there is one: a point read finds it
        at once, where the prefix filter may read many runs to fill a page."""
        if filters.prefix is None:
            return None
        try:
            found = self.store.run_info(filters.prefix)
        except DurableError:  # not a valid run id, or unreadable: the list says the rest
            return None
        return filters.prefix if found is not None else None

    # -- a run -------------------------------------------------------------------------

    def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        cp = self.loaded.get(run_id)
        done = self.flashes.pop(request.query_params.get("done", ""), None)
        bound = functools.partial
        panels: dict[str, sources.Panel[Any]] = {
            "history": sources.panel("history", bound(sources.history, self.store, run_id)),
            "events": sources.panel("events", bound(sources.events, self.store, run_id)),
            "mailbox": sources.panel("mailbox", bound(sources.mailbox, self.store, run_id)),
            "streams": sources.panel("streams", bound(sources.streams, self.store, run_id)),
        }
        offered = [] if self.read_only_for(request) else actions.offered(cp)
        return self.page(
            "run.html", 200, request, **self._live(cp, panels["history"], _zoom(request)),
            panels=panels,
            offered=offered,
            done=done, state=values.node("state", cp.state, ()),
            signals=values.node("signals", dict(cp.signals), ()),
            events=values.node("events", dict(panels["events"].rows), ()),
        )  # fmt: skip

    def live(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        info = self.store.run_info(run_id)
        if info is None:
            raise _missing(run_id)
        running = info.status == "running" and info.owner is not None
        if info.etag == request.query_params.get("etag") and not running:
            return Response(status_code=204)
        return self.page("live.html", **self._live(self.loaded.get(run_id), zoom=_zoom(request)))

    def _live(
        self,
        cp: Checkpoint,
        history: sources.Panel[StepRecord] | None = None,
        zoom: int | None = None,
    ) -> dict[str, Any]:
        now = time.time()
        if history is None:
            history = sources.panel("history", lambda: sources.history(self.store, cp.run_id))
        events = timeline.events_of(cp, history.rows, now)
        calls = [(values.call_name(r), r) for r in cp.calls]
        return {
            "cp": cp,
            "timeline": Markup(svg.render(events, now, zoom)),  # noqa: S704 (svg escapes texts)
            "zoom": zoom,
            "zoomable": range(cp.step + (1 if cp.status == "completed" else 2)),
            "attempts": [e for e in events if e.kind == timeline.ATTEMPT],
            "calls": calls,
            "size_of": timeline.size_of,
        }

    def value(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        q = request.query_params
        try:
            root, path = q.get("root", "state"), values.parse_path(q.get("path"))
            offset = int(q["offset"]) if q.get("offset", "").isdigit() else 0
            cp = self.loaded.get(run_id)
            value = sources.root_value(self.store, self.after, cp, root)
            node = values.node(root, value, path, offset)
        except (values.PathError, DurableError) as exc:  # shown in the fold, not a page
            return self.page("value.html", 404, node=None, error=str(exc), cp=None)
        return self.page("value.html", node=node, error=None, cp=cp)

    def stream(self, request: Request) -> Response:
        run_id, name = request.path_params["run_id"], request.path_params["name"]
        after = request.query_params.get("after", "")
        start = int(after) if after.lstrip("-").isdigit() and int(after) >= -1 else -1
        try:
            got = sources.stream_chunks(self.store, run_id, name, start, CHUNKS)
        except (DurableError, ValueError) as exc:  # a bad name, a run deleted meanwhile
            return JSONResponse({"error": str(exc)}, status_code=404)
        return JSONResponse(
            {"entries": got.entries, "length": got.length, "closed": got.closed, "done": got.done}
        )

    # -- actions -------------------------------------------------------------------------

    async def act(self, request: Request) -> Response:
        run_id, name = request.path_params["run_id"], request.path_params["action"]
        action = actions.ACTIONS.get(name)
        pairs, refusal = await self._posted(request, "the run's page")
        if refusal is not None:
            return refusal
        if action is None:
            return self.page("error.html", 404, error=f"There is no action {name!r} here.")
        form = dict(pairs)
        context = {"action": action, "run_id": run_id, "form": form, "error": None}
        try:
            given = actions.values(action, form)
            context["question"] = actions.question(action, run_id, given)
            if form.get("confirmed") != "yes":
                return self.page("confirm.html", **context)
            done = await run_in_threadpool(actions.perform, action, self.store, run_id, given)
        except actions.Refused as exc:
            context["error"] = str(exc)
            context.setdefault("question", action.title)
            return self.page("confirm.html", 409, **context)
        target = f"/run/{quote(run_id, safe='')}?done={self.flash(done)}"
        return RedirectResponse(target, status_code=303)

    async def _posted(
        self, request: Request, page: str
    ) -> tuple[list[tuple[str, str]], Response | None]:
        """An action's form, or why it is refused: a read-only session, or no CSRF token
        of this console's pages (``page``: where to reload it)."""
        if self.read_only_for(request):
            return [], self.page(
                "error.html", 403, request,
                error="This console is read-only (--read-only, or a read-only token).",
            )  # fmt: skip
        pairs = parse_qsl((await request.body()).decode(), keep_blank_values=True)
        if not self.secrets.csrf_ok(dict(pairs).get("csrf")):
            return pairs, self.page(
                "error.html", 403, request,
                error=f"Refused: the form's CSRF token is missing or wrong; reload {page}.",
            )  # fmt: skip
        return pairs, None

    async def bulk(self, request: Request) -> Response:
        """One action on the runs selected in the list: asked with the count, then a
        result per run (``bulk``)."""
        pairs, refusal = await self._posted(request, "the runs list")
        if refusal is not None:
            return refusal
        form = dict(pairs)
        try:
            action = bulk.action_for(form.get("action", ""))
        except KeyError as exc:
            return self.page("error.html", 404, request, error=str(exc.args[0]))
        context: dict[str, Any] = {"action": action, "form": form, "error": None, "results": None}
        try:
            context["run_ids"] = run_ids = bulk.selection(v for k, v in pairs if k == "run")
            context["question"] = bulk.question(action, run_ids, form)
            if form.get("confirmed") != "yes":
                return self.page("bulk.html", 200, request, **context)
            given = actions.values(action, form)
        except actions.Refused as exc:
            context.setdefault("run_ids", [])
            context.setdefault("question", action.title)
            context["error"] = str(exc)
            return self.page("bulk.html", 400, request, **context)
        context["results"] = await run_in_threadpool(
            bulk.perform, action, self.store, run_ids, given
        )
        return self.page("bulk.html", 200, request, **context)

    def failed(self, request: Request, exc: Exception) -> Response:
        if request.url.path.startswith("/api/"):
            return api.failed(request, exc)
        status = 404 if isinstance(exc, RunNotFoundError) else 500
        return self.page("error.html", status, error=str(exc))


def create_app(
    store: Store, secrets: Secrets, *, read_only: bool, hosts: frozenset[str] | None
) -> Guard:
    """The console's ASGI application over ``store``, behind its guard."""
    c = Console(store, secrets, read_only)
    routes = [
        Route("/", c.runs),
        Route("/rows", c.rows),
        Route("/run/{run_id}", c.run),
        Route("/run/{run_id}/live", c.live),
        Route("/run/{run_id}/value", c.value),
        Route("/run/{run_id}/stream/{name}", c.stream),
        Route("/run/{run_id}/act/{action}", c.act, methods=["POST"]),
        Route("/bulk", c.bulk, methods=["POST"]),
        *fleet.routes(c),
        *api.Api(c).routes(),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    handlers = {DurableError: c.failed, api.ApiError: api.failed}
    app = Starlette(routes=routes, exception_handlers=handlers)
    return Guard(app, secrets, hosts)


def _zoom(request: Request) -> int | None:
    """The step the timeline is zoomed to (``?zoom=K``), if any."""
    asked = request.query_params.get("zoom", "")
    return int(asked) if asked.isdigit() else None
