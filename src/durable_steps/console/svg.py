"""The timeline picture: events (``timeline``) drawn as SVG, lane by lane.

Lanes, top to bottom: the steps (completed ones whose times are not known are a row of
boxes in an "earlier" zone at the left, as history is not kept; the running step a bar
to the end of the axis), the attempts of every step at their recorded times (bands; a
boundary whose time is estimated is dashed, a failure a red mark) with the periods
when nothing ran between them drawn as such (hatched ``idle`` bars), one lane of calls
per task that made calls (each call a bar from its start to its end; where its start is
not recorded, back to the previous event of its task), and the waits (a sleep or a
signal wait up to its wake time or deadline). A time axis below, where a long idle
period is compressed behind a visible break (``axis``). ``zoom``: one step alone.

Every text in the picture comes from a run (step, call and error names) and is escaped
here; each element carries a ``<title>`` (the browser's tooltip) with the facts, and
``data-`` attributes that tests and scripts can read: ``data-step``, ``data-attempt``,
``data-how`` (an attempt's ending), ``data-idle``, ``data-call``, ``data-gap`` (the
seconds a break stands for).
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape

from .axis import BREAK, Scale
from .timeline import ATTEMPT, CALL, ERROR, IDLE, RETRY, SAVED, SLEEP, STEP, WAIT, Event, span

WIDTH, LEFT, RIGHT, ROW, TOP = 960, 130, 16, 30, 8
PLOT = WIDTH - LEFT - RIGHT
EARLIER = 120
"""The width of the zone for completed steps whose times are not known."""


def _q(text: object) -> str:
    return escape(str(text), quote=True)


def clock(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def render(events: list[Event], now: float | None = None, zoom: int | None = None) -> str:
    """The SVG of a run's timeline (``zoom``: step ``zoom``'s events alone)."""
    if zoom is not None:
        events = [e for e in events if e.step == zoom or e.kind == SAVED]
    timed = [t for e in events if e.kind not in (SLEEP, WAIT) for t in (e.at, e.start) if t]
    live = any(e.kind == ATTEMPT and e.at == now for e in events)
    waiting = any(e.kind == SAVED and e.name == "waiting" for e in events)
    if now is not None and timed and (live or waiting) and zoom is None:
        timed.append(now)  # the axis runs to now: how long it has run, or waited, so far
    steps = [e for e in events if e.kind == STEP]
    untimed = [e for e in steps if e.at is None]
    zone = EARLIER if untimed and timed else (PLOT if untimed else 0)
    idle = [(e.start, e.at) for e in events if e.kind == IDLE and e.start and e.at]
    scale = Scale(timed, LEFT + zone, LEFT + PLOT, idle)
    rows: list[str] = []
    y = TOP
    rows.append(_steps_lane(events, scale, y, zone=zone, timed=bool(timed)))
    y += ROW
    attempts = [e for e in events if e.kind == ATTEMPT]
    if attempts:
        idles = [e for e in events if e.kind == IDLE]
        rows.append(
            _attempts_lane(attempts, idles, [e for e in events if e.kind == ERROR], scale, y)
        )
        y += ROW
    tasks = sorted({e.task for e in events if e.kind in (CALL, RETRY)}, key=_task_order)
    for task in tasks:
        calls = [e for e in events if e.kind in (CALL, RETRY) and e.task == task]
        rows.append(_calls_lane(task, calls, attempts, scale, y))
        y += ROW
    waits = [e for e in events if e.kind in (SLEEP, WAIT)]
    saved = next((e for e in events if e.kind == SAVED), None)
    if waits and zoom is None:
        rows.append(_waits_lane(waits, saved, scale, y))
        y += ROW
    rows.append(_breaks(scale, TOP, y))
    rows.append(_axis(scale, y, bool(timed)))
    height = y + 34
    body = "\n".join(rows)
    zoomed = "" if zoom is None else f' data-zoom="{zoom}"'
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" role="img" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}"{zoomed} '
        f'aria-label="timeline of the run">\n{body}\n</svg>'
    )


def _breaks(scale: Scale, top: float, bottom: float) -> str:
    """Each compressed period: a band with a zigzag through every lane, and its length."""
    parts = []
    for a, b in scale.breaks:
        x = scale.x(a)
        zig = " ".join(f"l{4 if n % 2 == 0 else -4},6" for n in range(int((bottom - top) / 6)))
        title = f"{span(b - a)} when nothing ran, compressed (from {clock(a)} to {clock(b)})"
        parts.append(
            f'<g class="break" data-gap="{b - a:.1f}"><title>{_q(title)}</title>'
            f'<rect x="{x:.1f}" y="{top:.1f}" width="{BREAK:.1f}" height="{bottom - top:.1f}"/>'
            f'<path d="M{x + BREAK / 2 - 2:.1f},{top:.1f} {zig}"/>'
            f'<text class="note" x="{x + 2:.1f}" y="{bottom + 30:.1f}">{_q(span(b - a))}</text>'
            "</g>"
        )
    return "\n".join(parts)


def _task_order(task: str) -> tuple[int, list[int]]:
    return (1, [int(p) for p in task.split(".") if p.isdigit()]) if task else (0, [])


def _label(y: float, text: str) -> str:
    return f'<text class="lane" x="8" y="{y + ROW / 2 + 4:.1f}">{_q(text)}</text>'


def _bar(
    x0: float, x1: float, y: float, cls: str, title: str, *, text: str = "", data: str = ""
) -> str:
    w = max(x1 - x0, 2.0)
    label = ""
    if text and w > 7 * len(text) + 6:
        at = f'x="{x0 + 4:.1f}" y="{y + ROW / 2 + 4:.1f}"'
        label = f'<text class="in-bar" {at}>{_q(text)}</text>'
    return (
        f'<g class="{cls}" {data}><title>{_q(title)}</title>'
        f'<rect x="{x0:.1f}" y="{y + 5:.1f}" width="{w:.1f}" height="{ROW - 10}" rx="3"/>'
        f"{label}</g>"
    )


def _steps_lane(events: list[Event], scale: Scale, y: float, *, zone: float, timed: bool) -> str:
    parts = [_label(y, "steps")]
    steps = [e for e in events if e.kind == STEP]
    untimed = [e for e in steps if e.at is None]
    if untimed:
        each = zone / len(untimed)
        for n, e in enumerate(untimed):
            x0 = LEFT + n * each
            title = f"step {e.step} {e.name}: completed (when is not kept without history)"
            parts.append(
                _bar(
                    x0,
                    x0 + each - 1,
                    y,
                    "step done",
                    title,
                    text=str(e.step),
                    data=f'data-step="{e.step}"',
                )
            )
        if timed:
            parts.append(
                f'<text class="note" x="{LEFT + 2}" y="{y - 1:.1f}">completed earlier</text>'
            )
    for e in steps:
        if e.at is not None:
            start = e.start if e.start is not None else scale.t0
            title = f"step {e.step} {e.name}: completed at {clock(e.at)}" + (
                f", {e.attempt} attempt(s)" if e.attempt else ""
            )
            parts.append(
                _bar(scale.x(start), scale.x(e.at), y, "step done", title, text=e.name,
                     data=f'data-step="{e.step}"')
            )  # fmt: skip
    saved = next((e for e in events if e.kind == SAVED), None)
    attempts = [e for e in events if e.kind == ATTEMPT and saved and e.step == saved.step]
    if saved is not None and saved.name != "completed" and timed:
        starts = [e.start for e in attempts if e.start is not None]
        ends = [e.at for e in attempts if e.at is not None] + [scale.t1]
        x0, x1 = scale.x(min(starts, default=scale.t0)), scale.x(max(ends))
        title = f"step {saved.step}: {saved.detail}, last saved {clock(saved.at)}"
        parts.append(
            _bar(x0, x1, y, f"step current {saved.name}", title,
                 text=f"step {saved.step} ({saved.name})", data=f'data-step="{saved.step}"')
        )  # fmt: skip
    return "\n".join(parts)


def _attempts_lane(
    attempts: list[Event], idles: list[Event], errors: list[Event], scale: Scale, y: float
) -> str:
    steps = sorted({e.step for e in attempts})
    label = f"attempts of step {steps[0]}" if len(steps) == 1 else "attempts"
    parts = [_label(y, label)]
    for e in idles:
        if e.start is None or e.at is None:
            continue
        title = f"step {e.step}: {e.detail}; from {clock(e.start)} to {clock(e.at)}"
        data = f'data-step="{e.step}" data-idle="{_q(e.how)}"'
        parts.append(_bar(scale.x(e.start), scale.x(e.at), y, f"idle idle-{e.how}", title,
                          data=data))  # fmt: skip
    for e in attempts:
        data = f'data-step="{e.step}" data-attempt="{e.attempt}" data-how="{_q(e.how)}"'
        how = f"step {e.step}, {e.name}: {e.detail}"
        if e.start is None and e.at is None:
            title = f"{how} (when is not recorded)"
            at = scale.left - 8 * (len(attempts) - (e.attempt or 0) + 1)
            parts.append(_bar(at, at + 6, y, "attempt unplaced", title, data=data))
            continue
        x0 = scale.x(e.start if e.start is not None else scale.t0)
        x1 = scale.x(e.at if e.at is not None else scale.t1)
        title = f"{how}; from {clock(e.start)} to {clock(e.at)}" + (
            " (a boundary is estimated: the crash's time is not recorded)" if e.estimated else ""
        )
        cls = f"attempt n{(e.attempt or 0) % 2}" + (" estimated" if e.estimated else "")
        cls += f" how-{e.how}" if e.how else ""
        parts.append(_bar(x0, x1, y, cls, title, text=e.name, data=data))
        if e.estimated and e.start is not None:
            parts.append(
                f'<line class="boundary" x1="{x0:.1f}" x2="{x0:.1f}" y1="{y + 2:.1f}" '
                f'y2="{y + ROW - 2:.1f}"/>'
            )
    for e in errors:
        if e.at is not None:
            x = scale.x(e.at)
            parts.append(
                f'<g class="error"><title>{_q(f"attempt {e.attempt} failed at {clock(e.at)}: ")}'
                f"{_q(f'{e.name}: {e.detail}')}</title>"
                f'<path d="M{x:.1f},{y + 6:.1f} l6,9 l-6,9 l-6,-9 z"/></g>'
            )
    return "\n".join(parts)


def _calls_lane(
    task: str, calls: list[Event], attempts: list[Event], scale: Scale, y: float
) -> str:
    parts = [_label(y, f"calls of task {task}" if task else "calls")]
    starts = sorted(e.start for e in attempts if e.start is not None)
    previous: float | None = None
    for e in sorted(calls, key=lambda c: (c.at is None, c.at or 0.0, c.index or 0)):
        where = f"{e.task}/{e.index}" if e.task else str(e.index)
        data = f'data-call="{_q(where)}"'
        if e.kind == RETRY or e.at is None:
            x = LEFT + PLOT - 10
            title = f"call {where} {e.name}: {e.detail}"
            parts.append(_bar(x, x + 6, y, "call retry", title, data=data))
            continue
        data += f' data-step="{e.step}"'
        if e.start is not None:  # recorded: from when its last try began
            title = (
                f"step {e.step}, call {where} {e.name}: from {clock(e.start)} to "
                f"{clock(e.at)} ({span(e.at - e.start)}), {e.size} bytes"
                + (f", attempt {e.attempt}" if e.attempt else "")
            )
            parts.append(_call(scale.x(e.start), scale.x(e.at), y, title, name=e.name,
                               data=data + " data-timed"))  # fmt: skip
            previous = e.at
            continue
        begun = max(
            [s for s in starts if s <= e.at] + ([previous] if previous else []), default=e.at
        )
        title = f"call {where} {e.name}: returned at {clock(e.at)}, {e.size} bytes" + (
            f"; {span(e.at - begun)} since the previous event (when it started is not recorded)"
            if begun < e.at
            else ""
        )
        parts.append(_call(scale.x(begun), scale.x(e.at), y, title, name=e.name, data=data))
        previous = e.at
    return "\n".join(parts)


def _call(x0: float, x1: float, y: float, title: str, *, name: str, data: str) -> str:
    """A call: a mark at the moment it returned, and a light span back to the previous
    event of its task (it ran somewhere in there: its start is not recorded)."""
    label = ""
    if x1 - x0 > 7 * len(name) + 10:
        at = f'x="{x0 + 4:.1f}" y="{y + ROW / 2 + 4:.1f}"'
        label = f'<text class="in-bar" {at}>{_q(name)}</text>'
    return (
        f'<g class="call" {data}><title>{_q(title)}</title>'
        f'<rect class="span" x="{x0:.1f}" y="{y + 7:.1f}" width="{max(x1 - x0, 0):.1f}" '
        f'height="{ROW - 14}" rx="2"/>'
        f'<rect class="mark" x="{x1 - 1.5:.1f}" y="{y + 4:.1f}" width="3" height="{ROW - 8}"/>'
        f"{label}</g>"
    )


def _waits_lane(waits: list[Event], saved: Event | None, scale: Scale, y: float) -> str:
    parts = [_label(y, "waits")]
    begun = saved.at if saved is not None and saved.name == "waiting" else None
    for e in waits:
        message = e.detail == "receive"  # a wait for a message (runner.mailbox)
        what = (
            "sleep"
            if e.kind == SLEEP
            else f"wait for a message on {e.name}"
            if message
            else f"wait for signal {e.name}"
        )
        until = e.at
        comes = "until a message comes" if message else "until the signal comes"
        title = f"{what}: " + (f"until {clock(until)}" if until is not None else comes)
        x0 = scale.x(begun) if begun is not None else LEFT + PLOT - 60
        x1 = scale.x(until) if until is not None and until <= scale.t1 else LEFT + PLOT
        arrow = "" if until is None or until <= scale.t1 else " →"
        parts.append(_bar(x0, x1, y, f"wait {e.kind}", title, text=what + arrow))
    return "\n".join(parts)


def _axis(scale: Scale, y: float, timed: bool) -> str:
    if not timed:
        return (
            f'<text class="note" x="{LEFT}" y="{y + 14:.1f}">no times recorded: completed '
            "steps are kept without their times until history is kept</text>"
        )
    parts = [
        f'<line class="axis" x1="{scale.left:.1f}" x2="{LEFT + PLOT}" y1="{y + 2:.1f}" '
        f'y2="{y + 2:.1f}"/>'
    ]
    for n in range(5):
        x = scale.left + scale.width * n / 4
        t = scale.t(x)
        anchor = "start" if n == 0 else "end" if n == 4 else "middle"
        text = clock(t)[11:] if n == 0 else f"+{span(t - scale.t0)}"
        parts.append(
            f'<line class="tick" x1="{x:.1f}" x2="{x:.1f}" y1="{y:.1f}" y2="{y + 6:.1f}"/>'
            f'<text class="tick" text-anchor="{anchor}" x="{x:.1f}" y="{y + 20:.1f}">'
            f"{_q(text)}</text>"
        )
    return "\n".join(parts)
