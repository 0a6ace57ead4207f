"""The operator's console in the browser: ``durable-steps ui`` (the ``[ui]`` extra).

A local web application over any store the environment names: the runs list (filters,
bulk actions), the fleet (workers, queues, schedules), each
run's timeline as a picture, its state and recorded call results unfolded on demand,
its history, published events, waiting messages and streams (followed live), and the
actions (signal, send a message, cancel, resume, fork).

Design. Pages are rendered on the server (Starlette and Jinja2 templates) with one
small script for live refresh and unfolding; nothing is built with Node. The part
reads and changes runs only through the public ``durable_steps`` API and the store's
own methods (``list_runs``, ``run_info``, ``load``); the command line opens the store
and hands it in. Nothing imports this part but the command line.

Modules, each with its design at its top:

    security   the guard in front of every request: token, cookie, origin, CSRF, headers
    app        routes, pages and fragments; the checkpoints loaded per etag
    listing    the runs list: filters, columns, sorting, paging over the store's listing
    timeline   a run's events (from its checkpoint, and history when kept)
    svg        the timeline drawn from events
    values     a state, call result or payload folded: a level and a page at a time
    actions    what an operator can do, one entry each
    sources    history, events, mailbox and streams, through the public calls
    fleet      the workers, queues and schedules pages (over ``durable_steps.fleet``)
    bulk       one action on many selected runs: asked with the count, a result per run
    api        the JSON API behind the pages, for scripts (bearer tokens)
    server     the uvicorn server, its socket and its link with the access token
"""

from __future__ import annotations

from .server import ConsoleServer

__all__ = ["ConsoleServer"]
